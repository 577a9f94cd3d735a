package sqlitestore_test

import (
	"context"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/sqlitestore"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/storetest"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
	sqlfiles "github.com/pharos-metallo/metallo/sql"
)

// TestSQLiteStoreConforms runs the shared store suite on a SQLite file in
// t.TempDir() per subtest.
func TestSQLiteStoreConforms(t *testing.T) {
	storetest.Exercise(t, func(t *testing.T) storetest.Subject {
		ctx := t.Context()
		target, err := database.ParseURL("sqlite:"+dbtest.SQLitePath(t, "provisioning.sqlite"), "")
		dbtest.Must(t, err)
		h, err := database.Open(ctx, target, database.Options{})
		dbtest.Must(t, err)
		t.Cleanup(h.Close)
		migrations, err := sqlfiles.Migrations("sqlite", "resourceprovisioning")
		dbtest.Must(t, err)
		_, err = h.Migrate(ctx, migrations, "resource_provisioning")
		dbtest.Must(t, err)
		s, err := sqlitestore.New(h.DB, target.Path)
		dbtest.Must(t, err)
		t.Cleanup(func() { _ = s.Close() })
		base := h.DB.Stats().WaitCount
		return storetest.Subject{
			Store:    s,
			Receipts: s.CountReceipts,
			LockWaits: func(context.Context) (int, error) {
				return int(h.DB.Stats().WaitCount - base), nil
			},
			Break: func() { h.Close(); _ = s.Close() },
		}
	})
}

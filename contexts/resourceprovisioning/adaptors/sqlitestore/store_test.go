package sqlitestore_test

import (
	"context"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/sqlitestore"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/storetest"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
)

// TestSQLiteStoreConforms runs the shared store suite on a SQLite file in
// t.TempDir() per subtest.
func TestSQLiteStoreConforms(t *testing.T) {
	storetest.Exercise(t, func(t *testing.T) storetest.Subject {
		h := dbtest.Migrated(t, resourceprovisioning.Database(), database.SQLite)
		s, err := sqlitestore.New(h.DB, h.Target.Path)
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

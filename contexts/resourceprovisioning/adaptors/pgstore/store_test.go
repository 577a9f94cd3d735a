package pgstore_test

import (
	"context"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/pgstore"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/storetest"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
)

// TestPostgresStoreConforms runs the shared store suite on a real
// PostgreSQL database per subtest.
func TestPostgresStoreConforms(t *testing.T) {
	storetest.Exercise(t, func(t *testing.T) storetest.Subject {
		h := dbtest.MigratedWith(t, resourceprovisioning.Database(), database.Postgres, database.Options{MaxConns: 16})
		s := pgstore.New(h.Pool)
		return storetest.Subject{
			Store:    s,
			Receipts: s.CountReceipts,
			LockWaits: func(ctx context.Context) (int, error) {
				var n int
				err := h.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
				return n, err
			},
			Break: h.Pool.Close,
		}
	})
}

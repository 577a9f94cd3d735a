package resourceprovisioning_test

import (
	"context"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
	sqlfiles "github.com/pharos-metallo/metallo/sql"
)

// TestTheBindingAccountMigrationNamesEveryExistingBindingMemberParty:
// migration 3 gives every member binding written before it the account it
// names, member-<party> (all were Kubernetes bindings), on both engines,
// and rolls back (docs/operations.md#upgrades).
func TestTheBindingAccountMigrationNamesEveryExistingBindingMemberParty(t *testing.T) {
	const party = "9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"
	for _, engine := range []database.Engine{database.SQLite, database.Postgres} {
		t.Run(string(engine), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			target := database.Target{Engine: engine, Path: dbtest.SQLitePath(t, "provisioning.sqlite")}
			changedAt := "1787220000000000"
			if engine == database.Postgres {
				target = database.Target{Engine: engine, URL: dbtest.NewPostgres(t)}
				changedAt = "'2026-08-20T10:00:00Z'"
			}
			h, err := database.Open(ctx, target, database.Options{})
			dbtest.Must(t, err)
			defer h.Close()
			migrations, err := sqlfiles.Migrations(string(engine), resourceprovisioning.MigrationsDir)
			dbtest.Must(t, err)
			name := resourceprovisioning.Database().Name
			if v, err := h.MigrateTo(ctx, migrations, name, 2); err != nil || v != 2 {
				t.Fatalf("migrate to 2: %d %v", v, err)
			}
			_, err = h.DB.ExecContext(ctx, `INSERT INTO member_bindings (binding_id, party_id, project_id, environment, generation, state, reasons,
				site_binding_id, site_username, site_binding_generation, account_uid, allocation_id, namespace, revision, changed_at)
				VALUES ('b1', '`+party+`', 'p1', 'alpha-k8s', 1, 'pending', '["account_missing"]', 's1', 'alice', 1, '', '', '', 1, `+changedAt+`)`)
			dbtest.Must(t, err)
			if v, err := h.MigrateTo(ctx, migrations, name, 3); err != nil || v != 3 {
				t.Fatalf("migrate to 3: %d %v", v, err)
			}
			var account string
			dbtest.Must(t, h.DB.QueryRowContext(ctx, `SELECT account FROM member_bindings WHERE binding_id = 'b1'`).Scan(&account))
			if account != "member-"+party {
				t.Fatalf("account after migration 3: %q, want member-%s", account, party)
			}
			if v, err := h.MigrateTo(ctx, migrations, name, 2); err != nil || v != 2 {
				t.Fatalf("migrate back to 2: %d %v", v, err)
			}
			if err := h.DB.QueryRowContext(ctx, `SELECT account FROM member_bindings`).Scan(&account); err == nil {
				t.Fatal("the account column is still there after migrating back to 2")
			}
		})
	}
}

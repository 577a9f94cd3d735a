package sqlitestore_test

import (
	"context"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/sqlitestore"
	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/storetest"
	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
	sqlfiles "github.com/pharos-metallo/metallo/sql"
)

func open(t *testing.T) *database.Handle {
	t.Helper()
	ctx := context.Background()
	h, err := database.Open(ctx, database.Target{Engine: database.SQLite, Path: dbtest.SQLitePath(t, "execution.sqlite")}, database.Options{})
	dbtest.Must(t, err)
	t.Cleanup(h.Close)
	migrations, err := sqlfiles.Migrations("sqlite", "executionports")
	dbtest.Must(t, err)
	_, err = h.Migrate(ctx, migrations, "execution_ports")
	dbtest.Must(t, err)
	return h
}

func TestSQLiteStoreConformsToTheStreamRules(t *testing.T) {
	storetest.Exercise(t, func(t *testing.T) application.StreamStore { return sqlitestore.New(open(t).DB) })
}

package pgstore_test

import (
	"context"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/pgstore"
	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/storetest"
	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
	sqlfiles "github.com/pharos-metallo/metallo/sql"
)

func open(t *testing.T) *database.Handle {
	t.Helper()
	ctx := context.Background()
	target, err := database.ParseURL(dbtest.NewPostgres(t), "")
	dbtest.Must(t, err)
	h, err := database.Open(ctx, target, database.Options{})
	dbtest.Must(t, err)
	t.Cleanup(h.Close)
	migrations, err := sqlfiles.Migrations("postgres", "executionports")
	dbtest.Must(t, err)
	_, err = h.Migrate(ctx, migrations, "execution_ports")
	dbtest.Must(t, err)
	return h
}

func TestPostgresStoreConformsToTheStreamRules(t *testing.T) {
	storetest.Exercise(t, func(t *testing.T) application.StreamStore { return pgstore.New(open(t).Pool) })
}

// Package sql embeds the schema migrations of every context and engine:
// sql/<engine>/<context>/migrations/*.sql (goose format). sqlc reads the same
// files as its schema and the queries beside them
// (sql/<engine>/<context>/queries/*.sql).
package sqlfiles

import (
	"embed"
	"fmt"
	"io/fs"
)

//go:embed postgres/*/migrations/*.sql sqlite/*/migrations/*.sql
var files embed.FS

// Migrations returns the migration files of context (its directory name,
// e.g. "resourceprovisioning") for engine ("postgres" or "sqlite").
func Migrations(engine, context string) (fs.FS, error) {
	sub, err := fs.Sub(files, engine+"/"+context+"/migrations")
	if err != nil {
		return nil, fmt.Errorf("migrations for %s/%s: %w", engine, context, err)
	}
	if entries, err := fs.ReadDir(sub, "."); err != nil || len(entries) == 0 {
		return nil, fmt.Errorf("no migrations embedded for %s/%s", engine, context)
	}
	return sub, nil
}

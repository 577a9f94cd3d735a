package pgstore

import (
	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/platform/database"
)

// unavailable returns a *database.UnavailableError (wrapping
// application.ErrUnavailable; its message carries no driver text, which can
// name the database's host, user or file) when err means the database cannot
// be reached or used now (database.Unavailable: the
// connection could not be made or was lost, the pool is closed, the server
// refuses connections or the database is gone); errors.Is still sees
// err's chain (domain errors stay visible) and database.LogCause gives the
// driver's text for the log. Any other error is returned unchanged; nil
// stays nil.
func unavailable(err error) error {
	return database.MarkUnavailable(application.ErrUnavailable, "postgres", err)
}

package sqlitestore

import (
	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/platform/database"
)

// unavailable returns a *database.UnavailableError (wrapping
// application.ErrUnavailable; its message carries no driver text, which can
// name the database's host, user or file) when err means the database cannot
// be reached or used now (database.Unavailable: busy or
// locked past the busy timeout, a file it cannot open, an I/O error, a
// handle already closed); errors.Is still sees
// err's chain (domain errors stay visible) and database.LogCause gives the
// driver's text for the log. Any other error is returned unchanged; nil
// stays nil.
func unavailable(err error) error {
	return database.MarkUnavailable(application.ErrUnavailable, "sqlite", err)
}

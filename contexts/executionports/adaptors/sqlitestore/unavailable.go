package sqlitestore

import (
	"errors"
	"fmt"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
)

// unavailable wraps err with application.ErrUnavailable when it means the
// database file cannot be used now: SQLite's busy or locked answers (another
// process held the write lock past the busy timeout), a file it cannot open
// (directory gone, permissions), an I/O error, or a database handle already
// closed. The wrapped error keeps its chain; nil stays nil.
func unavailable(err error) error {
	if err == nil || errors.Is(err, application.ErrUnavailable) || !isUnavailable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", application.ErrUnavailable, err)
}

func isUnavailable(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff { // the primary result code of an extended one
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR:
			return true
		}
		return false
	}
	// database/sql reports a closed *sql.DB with an unexported error.
	return strings.Contains(err.Error(), "sql: database is closed")
}

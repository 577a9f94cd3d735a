package sqlitestore

import (
	"errors"
	"fmt"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/platform/database"
)

// unavailable wraps err with application.ErrUnavailable when it means the
// database file cannot be used now (database.Unavailable: busy or locked
// past the busy timeout, a file it cannot open, an I/O error, a handle
// already closed). The wrapped error keeps its chain; nil stays nil.
func unavailable(err error) error {
	if err == nil || errors.Is(err, application.ErrUnavailable) || !database.Unavailable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", application.ErrUnavailable, err)
}

package pgstore

import (
	"errors"
	"fmt"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/platform/database"
)

// unavailable wraps err with application.ErrUnavailable when it means the
// database cannot be reached or used now (database.Unavailable: the
// connection could not be made or was lost, the pool is closed, the server
// refuses connections or the database is gone). The wrapped error keeps its
// chain (domain errors stay visible); nil stays nil.
func unavailable(err error) error {
	if err == nil || errors.Is(err, application.ErrUnavailable) || !database.Unavailable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", application.ErrUnavailable, err)
}

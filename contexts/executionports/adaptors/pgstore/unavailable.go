package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
)

// unavailableCodes are the SQLSTATEs that mean the server cannot serve this
// request now (PostgreSQL Appendix A): connection exceptions (class 08),
// shutdown and start-up (57P01–57P03), too many connections (53300), and a
// database that does not exist (3D000, e.g. dropped or not created yet).
var unavailableCodes = map[string]bool{
	"57P01": true, "57P02": true, "57P03": true, "53300": true, "3D000": true,
}

// unavailable wraps err with application.ErrUnavailable when it means the
// database cannot be reached or used now: the connection could not be made
// or was lost, the pool is closed, or the server refuses connections. The
// wrapped error keeps its chain (domain errors stay visible); nil stays nil.
func unavailable(err error) error {
	if err == nil || errors.Is(err, application.ErrUnavailable) || !isUnavailable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", application.ErrUnavailable, err)
}

func isUnavailable(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return strings.HasPrefix(pg.Code, "08") || unavailableCodes[pg.Code]
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // the caller gave up; not the database's state
	}
	var connect *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connect), errors.As(err, &netErr),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	// pgxpool reports an Acquire on a closed pool with puddle's
	// ErrClosedPool ("closed pool"), a module this one does not import.
	return strings.Contains(err.Error(), "closed pool")
}

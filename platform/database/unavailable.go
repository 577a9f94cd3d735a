package database

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Unavailable reports whether err, returned by a PostgreSQL (pgx) or SQLite
// (modernc, database/sql) call, means the database cannot be reached or used
// now, so a caller should answer "unavailable, retry later" (HTTP 503) rather
// than an internal error. Every store adaptor classifies its errors with it,
// so every context answers the same failures the same way.
//
// PostgreSQL: a failed connect (checked first: it wraps the server's FATAL);
// SQLSTATE classes 08 (connection exception), 28 (invalid authorization),
// 53 (insufficient resources, too many connections among them) and 58
// (system error), 3D000 (the database does not exist: dropped or not yet
// created) and 57P01–57P05 (shutdown, crash, cannot connect now, database
// dropped, idle session timeout) — PostgreSQL Appendix A; a network error,
// EOF, refused, reset or broken connection; a closed pool or connection.
//
// SQLite: the primary result codes BUSY and LOCKED (the write lock was held
// past the busy timeout), CANTOPEN, IOERR, FULL, READONLY, CORRUPT and NOTADB
// (the file cannot be used as a database now); a database/sql handle or
// connection already closed.
//
// Either engine: context.DeadlineExceeded (the database did not answer in
// time). context.Canceled is never unavailability: the caller gave up.
// Everything else (constraint violations, syntax, a query cancelled by the
// server's statement timeout, 57014) is not.
func Unavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var connect *pgconn.ConnectError
	if errors.As(err, &connect) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return unavailableSQLState(pe.Code)
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff { // the primary result code of an extended one
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR,
			sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
			return true
		}
		return false
	}
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, sql.ErrConnDone),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	// Errors without an exported value: pgxpool's Acquire on a closed pool
	// (puddle's ErrClosedPool, "closed pool"), pgconn's use of a closed
	// connection ("conn closed"), and database/sql's closed *sql.DB.
	msg := err.Error()
	return strings.Contains(msg, "closed pool") || strings.Contains(msg, "conn closed") ||
		strings.Contains(msg, "sql: database is closed")
}

// unavailableSQLState reports whether a PostgreSQL SQLSTATE is one of
// Unavailable's.
func unavailableSQLState(code string) bool {
	switch code {
	case "3D000", "57P01", "57P02", "57P03", "57P04", "57P05":
		return true
	}
	if len(code) != 5 {
		return false
	}
	switch code[:2] {
	case "08", "28", "53", "58":
		return true
	}
	return false
}

// UnavailableError is the error a store returns when its database cannot be
// reached or used now (Unavailable). Its Error is Sentinel's fixed sentence
// only (the context's ErrUnavailable), so the message an HTTP client or an
// in-process owner may see never carries the driver's text, which can name
// the database's host, user, database or file; Op and Cause keep what
// failed for the log line that handles the error (LogCause). errors.Is
// matches Sentinel and everything in Cause's chain. Every central context's
// stores answer unavailability this way (docs/architecture.md#one-answer-per-fault).
type UnavailableError struct {
	// Sentinel is the context's ErrUnavailable.
	Sentinel error
	// Op is the store operation that failed ("postgres begin").
	Op string
	// Cause is the driver's error.
	Cause error
}

// Error returns Sentinel's text only.
func (e *UnavailableError) Error() string { return e.Sentinel.Error() }

// Unwrap returns Sentinel and the cause.
func (e *UnavailableError) Unwrap() []error { return []error{e.Sentinel, e.Cause} }

// MarkUnavailable returns an *UnavailableError for err (Sentinel sentinel,
// Op op) when Unavailable(err) and err is not one already (errors.Is(err,
// sentinel)); otherwise err unchanged (nil stays nil).
func MarkUnavailable(sentinel error, op string, err error) error {
	if err == nil || errors.Is(err, sentinel) || !Unavailable(err) {
		return err
	}
	return &UnavailableError{Sentinel: sentinel, Op: op, Cause: err}
}

// LogCause returns the operation and the driver's text of the first
// *UnavailableError in err's chain, for logs only ("" when there is none).
func LogCause(err error) string {
	var ue *UnavailableError
	if !errors.As(err, &ue) {
		return ""
	}
	return ue.LogCause()
}

// LogCause returns the operation that failed and the driver's text, for
// logs only (the HTTP edge's tail logs it: httpserver.Failure).
func (e *UnavailableError) LogCause() string {
	if e.Cause == nil {
		return e.Op
	}
	if e.Op == "" {
		return e.Cause.Error()
	}
	return e.Op + ": " + e.Cause.Error()
}

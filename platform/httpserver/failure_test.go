package httpserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// errStore is a context's ErrUnavailable; causeError keeps a driver's text
// for logs only, as database.UnavailableError does.
var errStore = errors.New("test store unavailable")

type causeError struct{ cause string }

func (e causeError) Error() string    { return errStore.Error() }
func (e causeError) Unwrap() error    { return errStore }
func (e causeError) LogCause() string { return e.cause }

// TestTheTailAnswersUnavailableCancelledAndInternalAlikeForEveryContext
// maps the three failures every context leaves to the tail: a store that
// cannot be reached (503 unavailable, Retry-After, the fixed detail, the
// cause logged once at warn and never answered), a cancelled request (503
// cancelled, not logged) and anything else (500 internal-error, logged
// once at error, its text never answered).
func TestTheTailAnswersUnavailableCancelledAndInternalAlikeForEveryContext(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	log := zap.New(core)
	ctx := withOperation(context.Background(), "read-things")
	store := Unavailable{Err: errStore, Detail: "the thing store cannot be reached now; retry later", Log: "thing store unavailable"}

	err := Failure(ctx, log, fmt.Errorf("read things: %w", causeError{cause: "dial tcp 10.0.0.7:5432: user=secret"}), store)
	var withHeaders huma.HeadersError
	var p *Problem
	if !errors.As(err, &withHeaders) || withHeaders.GetHeaders().Get("Retry-After") != "5" || !errors.As(err, &p) ||
		p.Status != http.StatusServiceUnavailable || p.Reason != ReasonUnavailable || p.Detail != store.Detail {
		t.Fatalf("unavailable store: %#v", err)
	}
	lines := logs.TakeAll()
	if len(lines) != 1 || lines[0].Level != zap.WarnLevel || lines[0].Message != store.Log ||
		lines[0].ContextMap()["cause"] != "dial tcp 10.0.0.7:5432: user=secret" || lines[0].ContextMap()["operation"] != "read-things" {
		t.Fatalf("unavailable store logged %+v", lines)
	}

	err = Failure(ctx, log, fmt.Errorf("read things: %w", context.Canceled), store)
	if !errors.As(err, &p) || p.Status != http.StatusServiceUnavailable || p.Reason != ReasonCancelled {
		t.Fatalf("cancelled: %#v", err)
	}
	if n := logs.Len(); n != 0 {
		t.Fatalf("a cancelled request logged %d lines", n)
	}

	err = Failure(ctx, log, errors.New("decode row 7: secret detail"), store)
	if !errors.As(err, &p) || p.Status != http.StatusInternalServerError || p.Reason != ReasonInternal || strings.Contains(p.Detail, "secret") {
		t.Fatalf("internal: %#v", err)
	}
	lines = logs.TakeAll()
	if len(lines) != 1 || lines[0].Level != zap.ErrorLevel || !strings.Contains(lines[0].ContextMap()["error"].(string), "secret detail") {
		t.Fatalf("internal logged %+v", lines)
	}
}

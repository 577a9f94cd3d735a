package heartbeat_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/heartbeat"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/clock"
)

func TestLivenessFailsWhenTheHeartbeatIsMissingStaleOrStopped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heartbeat")
	clk := clock.NewManual(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	bound := time.Minute
	if _, err := heartbeat.Check(path, bound, clk.Now()); !errors.Is(err, heartbeat.ErrMissing) {
		t.Fatalf("no file: %v", err)
	}
	f := heartbeat.NewFile(path, clk, time.Second)
	ctx := context.Background()
	if err := f.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := heartbeat.Check(path, bound, clk.Now().Add(30*time.Second)); err != nil {
		t.Fatalf("fresh beat: %v", err)
	}
	clk.Advance(500 * time.Millisecond)
	_ = f.Beat(ctx) // within the interval: not written
	if r, _ := heartbeat.Check(path, bound, clk.Now()); !r.BeatAt.Equal(clk.Now().Add(-500 * time.Millisecond)) {
		t.Fatalf("a beat within the interval was written: %v", r.BeatAt)
	}
	if _, err := heartbeat.Check(path, bound, clk.Now().Add(2*time.Minute)); !errors.Is(err, heartbeat.ErrStale) {
		t.Fatalf("old beat: %v", err)
	}
	clk.Advance(time.Minute)
	if err := f.Stopped(ctx, domain.StopResultConflict, "the server recorded another result"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	_ = f.Beat(ctx)
	_, err := heartbeat.Check(path, bound, clk.Now())
	if !errors.Is(err, heartbeat.ErrStopped) {
		t.Fatalf("stopped worker: %v", err)
	}
	if got := err.Error(); !strings.Contains(got, "result-conflict") {
		t.Fatalf("stop reason not named: %s", got)
	}
}

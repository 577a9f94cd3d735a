package heartbeat_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/heartbeat"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
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

func TestLivenessRefusesABeatDatedInTheFutureBeyondTheSkewSayingWhy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heartbeat")
	writer := clock.NewManual(time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC))
	if err := heartbeat.NewFile(path, writer, time.Second).Beat(context.Background()); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	_, err := heartbeat.Check(path, time.Minute, now)
	if !errors.Is(err, heartbeat.ErrFuture) || !strings.Contains(err.Error(), "ahead of this clock") {
		t.Fatalf("a beat in the year 9999: %v", err)
	}
	// Within the skew tolerance a beat counts (clocks of one host).
	near := filepath.Join(t.TempDir(), "heartbeat")
	if err := heartbeat.NewFile(near, clock.NewManual(now.Add(heartbeat.MaxSkew-time.Second)), time.Second).Beat(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := heartbeat.Check(near, time.Minute, now); err != nil {
		t.Fatalf("a beat a little ahead: %v", err)
	}
	if _, err := heartbeat.Check(near, 0, now); err == nil {
		t.Fatal("a zero liveness bound was accepted")
	}
}

func TestAnUnwritableHeartbeatFailsEachBeatOncePerIntervalUntilItIsWritable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	path := filepath.Join(dir, "heartbeat")
	clk := clock.NewManual(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	f := heartbeat.NewFile(path, clk, time.Second)
	ctx := context.Background()
	if err := f.Beat(ctx); err == nil {
		t.Fatal("a beat into a missing directory succeeded")
	}
	clk.Advance(100 * time.Millisecond)
	if err := f.Beat(ctx); err != nil {
		t.Fatalf("a beat within the interval after a failure: %v", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if err := f.Beat(ctx); err != nil {
		t.Fatalf("a beat once the directory exists: %v", err)
	}
	if _, err := heartbeat.Check(path, time.Minute, clk.Now()); err != nil {
		t.Fatal(err)
	}
}

func TestLivenessRefusesAGarbledHeartbeatFileSayingSo(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for name, content := range map[string]string{
		"not json":       "alive\n",
		"cut short":      `{"beat_at":"2026-11-29T10:`,
		"no time":        `{"stopped":""}`,
		"a wrong time":   `{"beat_at":"yesterday"}`,
		"null":           "null",
		"empty":          "",
		"another record": `{"beat":"2026-11-29T10:00:00Z"}`,
	} {
		path := filepath.Join(t.TempDir(), "heartbeat")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := heartbeat.Check(path, time.Minute, now)
		if !errors.Is(err, heartbeat.ErrGarbled) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: want ErrGarbled naming the file, got %v", name, err)
		}
	}
	// A directory in the file's place cannot be read.
	if _, err := heartbeat.Check(t.TempDir(), time.Minute, now); !errors.Is(err, heartbeat.ErrGarbled) {
		t.Errorf("a directory: %v", err)
	}
}

func TestAStaleBeatNamesItsAgeAndTheBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heartbeat")
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	if err := heartbeat.NewFile(path, clock.NewManual(at), time.Second).Beat(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := heartbeat.Check(path, time.Minute, at.Add(time.Minute)); err != nil {
		t.Fatalf("a beat exactly at the bound: %v", err)
	}
	_, err := heartbeat.Check(path, time.Minute, at.Add(time.Minute+time.Millisecond))
	if !errors.Is(err, heartbeat.ErrStale) || !strings.Contains(err.Error(), "1m0.001s ago") || !strings.Contains(err.Error(), "bound 1m0s") {
		t.Fatalf("just past the bound: %v", err)
	}
}

// The heartbeat file is read strictly: a repeated member (which a lenient
// decoder resolves to the last, e.g. hiding a stop) and an unknown member
// are refused as garbled.
func TestLivenessRefusesDuplicateAndUnknownMembers(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	beat := `"beat_at":"` + now.Format(time.RFC3339Nano) + `"`
	for name, body := range map[string]string{
		"duplicate": `{` + beat + `,"stopped":"result-conflict","stopped":""}`,
		"unknown":   `{` + beat + `,"stoped":"result-conflict"}`,
		"trailing":  `{` + beat + `} {}`,
	} {
		path := filepath.Join(t.TempDir(), "heartbeat")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := heartbeat.Check(path, time.Minute, now); !errors.Is(err, heartbeat.ErrGarbled) {
			t.Errorf("%s: %v", name, err)
		}
	}
	path := filepath.Join(t.TempDir(), "heartbeat")
	if err := os.WriteFile(path, []byte(`{`+beat+`}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := heartbeat.Check(path, time.Minute, now); err != nil {
		t.Fatalf("a strict beat: %v", err)
	}
}

// A run of credential refusals fails liveness once it outlasts the bound,
// naming the credential, while beats keep landing; a request that is not
// refused ends the run, and liveness passes again
// (docs/site-runtime.md#a-refused-credential).
func TestLivenessFailsOnceCredentialRefusalsOutlastTheBoundNamingTheCredential(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heartbeat")
	clk := clock.NewManual(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	bound := time.Minute
	ctx := context.Background()
	f := heartbeat.NewFile(path, clk, time.Second)
	if err := f.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	first := "the Site API refuses the credential --token-file /var/run/secrets/metallo/token: site api answered 401 unauthenticated: no valid bearer token"
	if err := f.Refused(ctx, first); err != nil {
		t.Fatal(err)
	}
	started := clk.Now()
	r, err := heartbeat.Check(path, bound, clk.Now())
	if err != nil || r.CredentialRefusedSince == nil || !r.CredentialRefusedSince.Equal(started) {
		t.Fatalf("a fresh refusal: %+v, %v; want it recorded and liveness passing", r, err)
	}
	// The run goes on: later refusals keep its start, beats keep landing.
	latest := strings.Replace(first, "401 unauthenticated: no valid bearer token", "403 forbidden: environment:other may not use this route", 1)
	for range 70 {
		clk.Advance(time.Second)
		if err := f.Refused(ctx, latest); err != nil {
			t.Fatal(err)
		}
		if err := f.Beat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, err = heartbeat.Check(path, bound, clk.Now())
	if !errors.Is(err, heartbeat.ErrCredentialRefused) {
		t.Fatalf("refused for 70s with a bound of 1m: %v", err)
	}
	for _, want := range []string{"--token-file /var/run/secrets/metallo/token", "403 forbidden", started.Format(time.RFC3339), "1m10s"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%q does not name %q", err, want)
		}
	}
	// Any request that is not refused ends the run at once.
	if err := f.Refused(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if r, err := heartbeat.Check(path, bound, clk.Now()); err != nil || r.CredentialRefusedSince != nil || r.CredentialRefusal != "" {
		t.Fatalf("after the run ended: %+v, %v", r, err)
	}
	// A new run starts afresh.
	clk.Advance(time.Second)
	if err := f.Refused(ctx, first); err != nil {
		t.Fatal(err)
	}
	if _, err := heartbeat.Check(path, bound, clk.Now().Add(30*time.Second)); err != nil {
		t.Fatalf("a new run, 30s old: %v", err)
	}
	// A stop wins over a refusal.
	if err := f.Stopped(ctx, domain.StopInstallationMismatch, "another installation"); err != nil {
		t.Fatal(err)
	}
	if _, err := heartbeat.Check(path, bound, clk.Now().Add(2*time.Minute)); !errors.Is(err, heartbeat.ErrStopped) {
		t.Fatalf("stopped while refused: %v", err)
	}
}

// A refusal without its cause, or dated after its beat, is no heartbeat
// the worker writes.
func TestLivenessRefusesAGarbledCredentialRefusal(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for name, body := range map[string]string{
		"no cause": `{"beat_at":"2026-11-29T10:00:00Z","credential_refused_since":"2026-11-29T09:00:00Z"}`,
		"future":   `{"beat_at":"2026-11-29T10:00:00Z","credential_refused_since":"2026-11-29T10:00:01Z","credential_refusal":"x"}`,
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := heartbeat.Check(path, time.Minute, now); !errors.Is(err, heartbeat.ErrGarbled) {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// A busy worker's heartbeat records the command it runs and the bounded
// wait under way, and beats on while it waits: liveness passes however
// long past the liveness bound the command has run, as long as the beats
// come and the command's ceiling (Until) is not passed; past the ceiling
// it fails ErrOverdue, naming the command, its Attempt and its wait. Once
// the command is answered the record holds none
// (docs/site-runtime.md#command-bounds).
func TestLivenessFollowsABusyWorkerUntilItsCommandOutlastsItsCeiling(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heartbeat")
	start := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	clk := clock.NewManual(start)
	f := heartbeat.NewFile(path, clk, time.Second)
	ctx := context.Background()
	bound := 2 * time.Minute
	work := &application.Work{Sequence: 42, CommandID: "c-42", Operation: siteprotocol.OpReadFile, AttemptID: "a-7",
		Since: start, Until: start.Add(10 * time.Minute)}
	if err := f.Busy(ctx, work); err != nil {
		t.Fatal(err)
	}
	withWait := *work
	withWait.Wait = &application.Wait{What: "the workspace reader Pod ns/attempt-a-7-read (uid u) to end", Since: start.Add(time.Second), Until: start.Add(3 * time.Minute)}
	clk.Advance(time.Second)
	if err := f.Busy(ctx, &withWait); err != nil {
		t.Fatal(err)
	}
	// Beats every second for five minutes: more than twice the liveness
	// bound, within the command's ceiling.
	for i := 0; i < 300; i++ {
		clk.Advance(time.Second)
		if err := f.Busy(ctx, &withWait); err != nil {
			t.Fatal(err)
		}
		if _, err := heartbeat.Check(path, bound, clk.Now()); err != nil {
			t.Fatalf("after %s busy: %v", clk.Now().Sub(start), err)
		}
	}
	r, err := heartbeat.Check(path, bound, clk.Now())
	if err != nil || r.Command == nil || r.Command.Sequence != 42 || r.Command.Operation != "read-file" || r.Command.AttemptID != "a-7" ||
		r.Command.Waiting != withWait.Wait.What || !r.Command.Until.Equal(work.Until) {
		t.Fatalf("the record of a busy worker: %+v, %v", r.Command, err)
	}
	clk.Advance(6 * time.Minute)
	if err := f.Busy(ctx, &withWait); err != nil {
		t.Fatal(err)
	}
	_, err = heartbeat.Check(path, bound, clk.Now())
	if !errors.Is(err, heartbeat.ErrOverdue) || !strings.Contains(err.Error(), "command 42 (read-file, attempt a-7") || !strings.Contains(err.Error(), "workspace reader") {
		t.Fatalf("a command past its ceiling: %v", err)
	}
	if err := f.Busy(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if r, err := heartbeat.Check(path, bound, clk.Now()); err != nil || r.Command != nil {
		t.Fatalf("after the command: %+v, %v", r.Command, err)
	}
}

// A command record the worker could not have written is garbled.
func TestLivenessRefusesAGarbledCommandRecord(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	for _, body := range []string{
		`{"beat_at":"2026-12-04T10:00:00Z","command":{"sequence":0,"id":"c","operation":"proxy","since":"2026-12-04T10:00:00Z","until":"2026-12-04T10:05:00Z"}}`,
		`{"beat_at":"2026-12-04T10:00:00Z","command":{"sequence":1,"id":"c","operation":"","since":"2026-12-04T10:00:00Z","until":"2026-12-04T10:05:00Z"}}`,
		`{"beat_at":"2026-12-04T10:00:00Z","command":{"sequence":1,"id":"c","operation":"proxy","since":"2026-12-04T10:00:00Z","until":"2026-12-04T09:05:00Z"}}`,
		`{"beat_at":"2026-12-04T10:00:00Z","command":{"sequence":1,"id":"c","operation":"proxy","since":"2026-12-04T10:00:00Z","until":"2026-12-04T10:05:00Z","waiting":"x"}}`,
	} {
		path := filepath.Join(t.TempDir(), "heartbeat")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := heartbeat.Check(path, time.Minute, now); !errors.Is(err, heartbeat.ErrGarbled) {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// A busy stream of short commands costs no more writes than an idle
// worker: a command begun and ended within the interval of the last write
// is never written; a command the file shows is cleared at once when it
// ends (an ended command must never look overdue), and a wait that begins
// is written at once.
func TestBusyWritesOnlyWaitsAtOnceAndClearsAShownCommandAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heartbeat")
	start := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	clk := clock.NewManual(start)
	f := heartbeat.NewFile(path, clk, time.Second)
	ctx := context.Background()
	if err := f.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	read := func() heartbeat.Record {
		t.Helper()
		r, err := heartbeat.Check(path, time.Hour, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	work := &application.Work{Sequence: 1, CommandID: "c1", Operation: siteprotocol.OpObserve, Since: start, Until: start.Add(time.Minute)}
	clk.Advance(100 * time.Millisecond)
	_ = f.Busy(ctx, work)
	_ = f.Busy(ctx, nil)
	if r := read(); r.Command != nil || !r.BeatAt.Equal(start) {
		t.Fatalf("a short command was written: %+v at %v", r.Command, r.BeatAt)
	}
	// A wait begins: written at once, whatever the interval.
	waiting := *work
	waiting.Wait = &application.Wait{What: "the log", Since: clk.Now(), Until: clk.Now().Add(30 * time.Second)}
	clk.Advance(100 * time.Millisecond)
	_ = f.Busy(ctx, &waiting)
	if r := read(); r.Command == nil || r.Command.Waiting != "the log" {
		t.Fatalf("a wait that began was not written: %+v", r.Command)
	}
	// Its end, right after: cleared at once.
	clk.Advance(100 * time.Millisecond)
	_ = f.Busy(ctx, nil)
	if r := read(); r.Command != nil {
		t.Fatalf("an ended command is still shown: %+v", r.Command)
	}
}

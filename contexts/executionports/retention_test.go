package executionports_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/contexts/executionports"
	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/sqlitestore"
	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// readLogs returns a read-logs command with id n as compact JSON.
func readLogs(n int) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"operation":"read-logs","issued_at":%q,"run_id":%q,"attempt_id":%q,"member_id":%q,"project_id":%q,"account_ref":{"binding_id":%q,"generation":1},"family":"batch","payload":{"tail_bytes":4096}}`,
		uuid(n), issued, uuid(1000+n), uuid(2000+n), uuid(3000+n), uuid(4000+n), uuid(5000+n)))
}

// A read's result is served by GET …/commands/{id} until its retention
// after acknowledgement has passed; then the record keeps its digest and
// says when its content expired, without the bytes, and the Runtime's
// exact replay of the same result is still answered as before
// (docs/execution-ports.md#read-results-retention). The sweep runs on the
// server's clock: the test moves it and sweeps the server's own database
// file, so nothing waits on real time.
func TestAReadResultsContentExpiresAndTheCommandRecordSaysSo(t *testing.T) {
	s := startServer(t, options{})
	wantStatus(t, s.appendCommand(t, "alpha-k8s", readLogs(1)), http.StatusCreated, "")
	wantStatus(t, s.appendCommand(t, "alpha-k8s", observe(2, issued)), http.StatusCreated, "")
	page := decode[siteprotocol.Pull](t, s.pull(t, "alpha-k8s", s.alphaKey, installA, 0, 100, 0))
	c, err := siteprotocol.ParsePulled(page.Commands[0])
	must(t, err)
	content := "\x1b[32mok\x1b[0m \xff\xfe\n"
	r, logsResult, err := siteprotocol.NewResult(c, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonRead, "read",
		siteprotocol.ReadLogsDetail{Container: "main", ContentBase64: base64.StdEncoding.EncodeToString([]byte(content))}, nil)
	must(t, err)
	first := s.ack(t, "alpha-k8s", s.alphaKey, installA, 1, logsResult)
	wantStatus(t, first, http.StatusOK, "")
	observed := resultFor(t, page.Commands[1], "observed")
	wantStatus(t, s.ack(t, "alpha-k8s", s.alphaKey, installA, 2, observed), http.StatusOK, "")

	get := func(n int) siteprotocol.CommandRecord {
		return decode[siteprotocol.CommandRecord](t, s.call(t, http.MethodGet, "/execution/v1/streams/alpha-k8s/commands/"+uuid(n), s.serviceKey, "", nil))
	}
	if rec := get(1); !bytes.Equal(rec.Result, logsResult) || rec.ResultDigest != r.Digest || rec.ResultExpiredAt != "" || rec.AcknowledgedAt != "2026-11-29T10:00:00Z" {
		t.Fatalf("a read result within its retention: %+v", rec)
	}

	h, err := database.Open(context.Background(), database.Target{Engine: database.SQLite, Path: filepath.Join(s.dir, "execution.sqlite")}, database.Options{})
	must(t, err)
	t.Cleanup(h.Close)
	sweep := application.NewReadResultRetention(sqlitestore.New(h.DB), s.clock, 0) // the default, 1 h
	s.clock.Advance(time.Hour - time.Millisecond)
	if n, err := sweep.Sweep(context.Background()); err != nil || n != 0 {
		t.Fatalf("a sweep before the retention ended: %d, %v", n, err)
	}
	s.clock.Advance(time.Millisecond)
	if n, err := sweep.Sweep(context.Background()); err != nil || n != 1 {
		t.Fatalf("the sweep at the retention's end: %d, %v; want the read result", n, err)
	}

	raw := s.call(t, http.MethodGet, "/execution/v1/streams/alpha-k8s/commands/"+uuid(1), s.serviceKey, "", nil)
	if bytes.Contains(raw.Body, []byte(`"result"`)) || bytes.Contains(raw.Body, []byte(base64.StdEncoding.EncodeToString([]byte(content)))) {
		t.Fatalf("an expired read result still serves its content: %s", raw)
	}
	if rec := get(1); rec.Result != nil || rec.ResultDigest != r.Digest || rec.AcknowledgedAt != "2026-11-29T10:00:00Z" || rec.ResultExpiredAt != "2026-11-29T11:00:00Z" {
		t.Fatalf("an expired read result: %+v", rec)
	}
	if rec := get(2); !bytes.Equal(rec.Result, observed) || rec.ResultExpiredAt != "" {
		t.Fatalf("an observe result after the sweep: %+v; want it kept", rec)
	}
	replay := s.ack(t, "alpha-k8s", s.alphaKey, installA, 1, logsResult)
	if replay.Status != http.StatusOK || !bytes.Equal(replay.Body, first.Body) {
		t.Fatalf("exact replay after expiry: got %s, want %s", replay, first)
	}
}

// expiry is one ExpireResults call a sweep made.
type expiry struct {
	operation  string
	before, at time.Time
}

// recordingStore records the sweep's calls; nothing else of the store is
// used.
type recordingStore struct {
	application.StreamStore
	calls chan expiry
}

func (r recordingStore) ExpireResults(_ context.Context, operation string, before, at time.Time, _ int) (int, error) {
	r.calls <- expiry{operation, before, at}
	return 0, nil
}

// The role's sweep runs at start and again every interval, each time as of
// its clock's now minus the retention, over every read operation.
func TestTheReadResultSweepRunsAtStartAndEveryIntervalOnTheContextsClock(t *testing.T) {
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	clk := clock.NewManual(start)
	store := recordingStore{calls: make(chan expiry, 64)}
	lc := fxtest.NewLifecycle(t)
	executionports.RunReadResultSweep(lc, application.NewReadResultRetention(store, clk, 30*time.Minute), time.Millisecond, zap.NewNop())
	lc.RequireStart()
	defer lc.RequireStop()
	next := func() expiry {
		select {
		case e := <-store.calls:
			return e
		case <-time.After(10 * time.Second):
			t.Fatal("no sweep within 10 s")
		}
		return expiry{}
	}
	for _, op := range siteprotocol.ReadOperations() {
		if e := next(); e.operation != string(op) || !e.before.Equal(start.Add(-30*time.Minute)) || !e.at.Equal(start) {
			t.Fatalf("the first sweep: %+v; want %s as of %v", e, op, start)
		}
	}
	clk.Advance(2 * time.Hour)
	for e := next(); !e.at.Equal(start.Add(2 * time.Hour)); e = next() {
		if !e.at.Equal(start) {
			t.Fatalf("a sweep as of %v; want the clock's reading", e.at)
		}
	}
}

// A negative retention is refused before anything opens, naming the flag
// and its variable; 0 is the default.
func TestANegativeReadResultRetentionIsRefusedNamingItsFlag(t *testing.T) {
	cfg := executionports.Config{MaxConns: 1, ResourceOwner: executionports.OwnerInProcess, ReadResultRetention: -time.Second}
	var fe *config.FlagError
	if err := cfg.Validate(); !errors.As(err, &fe) || fe.Flag != "read-result-retention" || !strings.Contains(err.Error(), "METALLO_READ_RESULT_RETENTION") {
		t.Fatalf("a negative retention: %v; want a flag error naming --read-result-retention", err)
	}
	cfg.ReadResultRetention = 0
	if err := cfg.Validate(); err != nil {
		t.Fatalf("retention 0 (the default): %v", err)
	}
	if r := application.NewReadResultRetention(nil, nil, 0); r.Retention() != application.DefaultReadResultRetention {
		t.Fatalf("retention 0 means %v; want the default", r.Retention())
	}
}

// Every fault of the configuration is named at once, each with its flag and its variable, the
// missing owner among them.
func TestValidateNamesEveryFaultAtOnce(t *testing.T) {
	cfg := executionports.Config{DatabaseURL: "mysql://db", MaxConns: 0, DeliveryInterval: -time.Second, FeedInterval: -time.Second,
		ReadResultRetention: -time.Second, ProvisioningCAFile: "/nonexistent/ca.crt"}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, flag := range []string{"execution-database-url", "execution-database-max-conns", "binding-delivery-interval", "binding-feed-interval", "read-result-retention", "provisioning-ca-file"} {
		if !strings.Contains(err.Error(), "--"+flag+" ("+config.EnvName(flag)+")") {
			t.Errorf("the refusal does not name --%s and its variable:\n%v", flag, err)
		}
	}
	if !errors.Is(err, executionports.ErrNoOwner) || !strings.Contains(err.Error(), "--resource-owner (METALLO_RESOURCE_OWNER)") {
		t.Errorf("the refusal does not name the missing owner:\n%v", err)
	}
}

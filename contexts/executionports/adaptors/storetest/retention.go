package storetest

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// retentionTests are where read results live
// (docs/execution-ports.md#read-results-retention): a read's result content
// is dropped after its retention, its digest stays, exact replay still
// compares; other results are kept.
var retentionTests = []testCase{
	{"AReadResultsContentExpiresAfterItsRetentionWhileItsDigestStays", testReadResultsExpire},
	{"AnExpiredReadResultIsStillReplayedExactlyAndAnotherStillConflicts", testExpiredReplay},
	{"ExpiryIsBoundedPerStatementOldestFirstAcrossStreams", testExpiryBatches},
}

// readPayloads are valid payloads and families of the read operations.
var readPayloads = map[siteprotocol.Operation]struct {
	family, payload string
}{
	siteprotocol.OpReadLogs: {"batch", `{"tail_bytes":1024}`},
	siteprotocol.OpReadFile: {"batch", `{"path":"out/result.txt","max_bytes":1024}`},
	siteprotocol.OpProxy:    {"application", `{"method":"GET","path":"/healthz"}`},
}

// ReadCommand builds a command of the read operation op (read-logs,
// read-file or proxy) with id n (salt separates suites).
func ReadCommand(t testing.TB, salt, n int, op siteprotocol.Operation) application.NewCommand {
	t.Helper()
	p, ok := readPayloads[op]
	if !ok {
		t.Fatalf("%s is not a read operation", op)
	}
	raw := fmt.Sprintf(`{"id":%q,"operation":%q,"issued_at":"2026-11-29T10:00:00.123Z","run_id":%q,"attempt_id":%q,"member_id":%q,"project_id":%q,"account_ref":{"binding_id":%q,"generation":1},"family":%q,"payload":%s}`,
		uuidFor(salt, n), op, uuidFor(salt+1, n), uuidFor(salt+2, n), uuidFor(salt+3, n), uuidFor(salt+4, n), uuidFor(salt+5, n), p.family, p.payload)
	cmd, canonical, err := siteprotocol.ParseAppend([]byte(raw))
	if err != nil {
		t.Fatalf("build %s command: %v", op, err)
	}
	return application.NewCommand{ID: cmd.ID, Operation: string(cmd.Operation), Digest: cmd.Digest, Canonical: canonical}
}

// ReadResult builds the succeeded result of the read command c at
// sequence, its content being content.
func ReadResult(t testing.TB, c application.NewCommand, sequence int64, content string) application.ReceivedResult {
	t.Helper()
	cmd := siteprotocol.Command{ID: c.ID, Digest: c.Digest, Sequence: sequence}
	b64 := base64.StdEncoding.EncodeToString([]byte(content))
	var (
		reason = siteprotocol.ReasonRead
		detail any
	)
	switch siteprotocol.Operation(c.Operation) {
	case siteprotocol.OpReadLogs:
		detail = siteprotocol.ReadLogsDetail{Container: "main", ContentBase64: b64}
	case siteprotocol.OpReadFile:
		detail = siteprotocol.ReadFileDetail{ContentBase64: b64}
	case siteprotocol.OpProxy:
		reason, detail = siteprotocol.ReasonProxied, siteprotocol.ProxyDetail{Status: 200, BodyBase64: b64}
	default:
		t.Fatalf("%s is not a read operation", c.Operation)
	}
	r, raw, err := siteprotocol.NewResult(cmd, siteprotocol.OutcomeSucceeded, reason, "read", detail, nil)
	if err != nil {
		t.Fatalf("build read result: %v", err)
	}
	return application.ReceivedResult{
		ReceivedResult: domain.ReceivedResult{CommandID: r.CommandID, CommandDigest: r.CommandDigest, Sequence: r.Sequence, Digest: r.Digest},
		Bytes:          raw,
	}
}

func mustAppend(t *testing.T, s application.StreamStore, env string, c application.NewCommand, want int64) {
	t.Helper()
	a, err := s.Append(context.Background(), env, c, t0)
	if err != nil || a.Sequence != want {
		t.Fatalf("append %s to %s: sequence %d, %v; want sequence %d", c.ID, env, a.Sequence, err, want)
	}
}

func mustApplyAt(t *testing.T, s application.StreamStore, env string, sequence int64, r application.ReceivedResult, at time.Time) {
	t.Helper()
	if _, err := application.ApplyResult(context.Background(), s, env, inst, sequence, r, at); err != nil {
		t.Fatalf("ack %s/%d: %v", env, sequence, err)
	}
}

func mustExpire(t *testing.T, s application.StreamStore, now time.Time, want int) {
	t.Helper()
	n, err := application.ExpireReadResults(context.Background(), s, now, time.Hour)
	if err != nil || n != want {
		t.Fatalf("expire as of %v: dropped %d, %v; want %d", now, n, err, want)
	}
}

func mustRecord(t *testing.T, s application.StreamStore, env, id string) application.CommandRecord {
	t.Helper()
	rec, err := s.Command(context.Background(), env, id)
	if err != nil {
		t.Fatalf("read command %s: %v", id, err)
	}
	return rec
}

// held checks that id's result is held exactly as r.
func held(t *testing.T, s application.StreamStore, id string, r application.ReceivedResult) {
	t.Helper()
	rec := mustRecord(t, s, "alpha-k8s", id)
	if !bytes.Equal(rec.Result, r.Bytes) || rec.ResultDigest != r.Digest || !rec.ResultExpiredAt.IsZero() {
		t.Fatalf("command %s: result %q digest %s expired at %v; want its bytes held", id, rec.Result, rec.ResultDigest, rec.ResultExpiredAt)
	}
}

// expired checks that id's result has no content, keeps r's digest and
// its acknowledgement time, and expired at at.
func expired(t *testing.T, s application.StreamStore, env, id string, r application.ReceivedResult, acked, at time.Time) {
	t.Helper()
	rec := mustRecord(t, s, env, id)
	if rec.Result != nil || rec.ResultDigest != r.Digest || !rec.AcknowledgedAt.Equal(acked) || !rec.ResultExpiredAt.Equal(at) {
		t.Fatalf("command %s: result %q digest %s acknowledged %v expired %v; want no content, digest %s, acknowledged %v, expired %v",
			id, rec.Result, rec.ResultDigest, rec.AcknowledgedAt, rec.ResultExpiredAt, r.Digest, acked, at)
	}
}

// testReadResultsExpire: with a retention of 1 h, a read result's content
// is dropped once its acknowledgement is at least 1 h old (the boundary
// included), whatever the read operation; the observe result acknowledged
// with it, a younger read result and an unacknowledged read are kept; a
// second sweep changes nothing; the stream goes on.
func testReadResultsExpire(t *testing.T, s application.StreamStore) {
	logs := ReadCommand(t, 40, 1, siteprotocol.OpReadLogs)
	obs, _ := Command(t, 40, 2)
	file := ReadCommand(t, 40, 3, siteprotocol.OpReadFile)
	proxy := ReadCommand(t, 40, 4, siteprotocol.OpProxy)
	later := ReadCommand(t, 40, 5, siteprotocol.OpReadLogs)
	for i, c := range []application.NewCommand{logs, obs, file, proxy, later} {
		mustAppend(t, s, "alpha-k8s", c, int64(i+1))
	}
	mustBind(t, s, "alpha-k8s", inst)
	rLogs, rObs := ReadResult(t, logs, 1, "\x1b[31mdone\x1b[0m\n"), Result(t, obs, 2, "observed")
	rFile, rProxy := ReadResult(t, file, 3, "42\n"), ReadResult(t, proxy, 4, "ok")
	mustApplyAt(t, s, "alpha-k8s", 1, rLogs, t0)
	mustApplyAt(t, s, "alpha-k8s", 2, rObs, t0)
	mustApplyAt(t, s, "alpha-k8s", 3, rFile, t0.Add(10*time.Minute))
	mustApplyAt(t, s, "alpha-k8s", 4, rProxy, t0.Add(61*time.Minute))

	mustExpire(t, s, t0.Add(time.Hour-time.Second), 0)
	held(t, s, logs.ID, rLogs)

	at1 := t0.Add(time.Hour)
	mustExpire(t, s, at1, 1) // read-logs, acknowledged exactly 1 h before
	expired(t, s, "alpha-k8s", logs.ID, rLogs, t0, at1)
	held(t, s, obs.ID, rObs)
	held(t, s, file.ID, rFile)

	at2 := t0.Add(2*time.Hour + time.Minute)
	mustExpire(t, s, at2, 2) // read-file and proxy, acknowledged 1 h 51 min and exactly 1 h before
	expired(t, s, "alpha-k8s", file.ID, rFile, t0.Add(10*time.Minute), at2)
	expired(t, s, "alpha-k8s", proxy.ID, rProxy, t0.Add(61*time.Minute), at2)
	mustExpire(t, s, at2.Add(time.Hour), 0)
	expired(t, s, "alpha-k8s", logs.ID, rLogs, t0, at1) // the first expiry time stays
	held(t, s, obs.ID, rObs)                            // not a read: kept as it is
	if rec := mustRecord(t, s, "alpha-k8s", later.ID); rec.Result != nil || rec.ResultDigest != "" || !rec.ResultExpiredAt.IsZero() {
		t.Fatalf("an unacknowledged read: result %q digest %s expired %v", rec.Result, rec.ResultDigest, rec.ResultExpiredAt)
	}

	// The stream goes on: the next read is acknowledged and held.
	rLater := ReadResult(t, later, 5, "more")
	mustApplyAt(t, s, "alpha-k8s", 5, rLater, at2.Add(time.Hour))
	held(t, s, later.ID, rLater)
	if st := mustState(t, s, "alpha-k8s"); st.AcknowledgedSequence != 5 {
		t.Fatalf("acknowledged %d, want 5", st.AcknowledgedSequence)
	}
}

// testExpiredReplay: the Runtime may resend a result whose answer it lost
// long after; once its content expired, the same result is still an exact
// replay (by digest) and another is still a conflict, and neither brings
// content back.
func testExpiredReplay(t *testing.T, s application.StreamStore) {
	ctx := context.Background()
	logs := ReadCommand(t, 41, 1, siteprotocol.OpReadLogs)
	mustAppend(t, s, "alpha-k8s", logs, 1)
	mustBind(t, s, "alpha-k8s", inst)
	r := ReadResult(t, logs, 1, "the log's tail")
	mustApplyAt(t, s, "alpha-k8s", 1, r, t0)
	at := t0.Add(3 * time.Hour)
	mustExpire(t, s, at, 1)

	ack, err := application.ApplyResult(ctx, s, "alpha-k8s", inst, 1, r, at.Add(time.Minute))
	if err != nil || !ack.Replayed || ack.Sequence != 1 || ack.ResultDigest != r.Digest {
		t.Fatalf("replay after expiry: %+v, %v; want the same acknowledgement, replayed", ack, err)
	}
	other := ReadResult(t, logs, 1, "another tail")
	if _, err := application.ApplyResult(ctx, s, "alpha-k8s", inst, 1, other, at.Add(time.Minute)); !errors.Is(err, domain.ErrResultConflict) {
		t.Fatalf("another result after expiry: got %v, want ErrResultConflict", err)
	}
	expired(t, s, "alpha-k8s", logs.ID, r, t0, at)
	if st := mustState(t, s, "alpha-k8s"); st.AcknowledgedSequence != 1 {
		t.Fatalf("acknowledged %d, want 1", st.AcknowledgedSequence)
	}
}

// testExpiryBatches: one ExpireResults drops at most its limit, the
// oldest acknowledgements first, of every stream; the next call drops the
// rest.
func testExpiryBatches(t *testing.T, s application.StreamStore) {
	ctx := context.Background()
	var cs []application.NewCommand
	for i := 1; i <= 3; i++ {
		c := ReadCommand(t, 42, i, siteprotocol.OpReadLogs)
		mustAppend(t, s, "alpha-k8s", c, int64(i))
		cs = append(cs, c)
	}
	beta := ReadCommand(t, 42, 4, siteprotocol.OpReadLogs)
	mustAppend(t, s, "beta-k8s", beta, 1)
	mustBind(t, s, "alpha-k8s", inst)
	mustBind(t, s, "beta-k8s", inst)
	var rs []application.ReceivedResult
	for i, c := range cs { // acknowledged at t0+2 min, t0+1 min, t0+3 min
		rs = append(rs, ReadResult(t, c, int64(i+1), "x"))
	}
	mustApplyAt(t, s, "alpha-k8s", 1, rs[0], t0.Add(2*time.Minute))
	mustApplyAt(t, s, "alpha-k8s", 2, rs[1], t0.Add(1*time.Minute))
	mustApplyAt(t, s, "alpha-k8s", 3, rs[2], t0.Add(3*time.Minute))
	rBeta := ReadResult(t, beta, 1, "y")
	mustApplyAt(t, s, "beta-k8s", 1, rBeta, t0)

	at := t0.Add(time.Hour)
	if n, err := s.ExpireResults(ctx, string(siteprotocol.OpReadFile), at, at, 10); err != nil || n != 0 {
		t.Fatalf("expire read-file results: %d, %v; want none (they are read-logs)", n, err)
	}
	n, err := s.ExpireResults(ctx, string(siteprotocol.OpReadLogs), at, at, 2)
	if err != nil || n != 2 {
		t.Fatalf("first batch: %d, %v; want 2", n, err)
	}
	expired(t, s, "beta-k8s", beta.ID, rBeta, t0, at)
	expired(t, s, "alpha-k8s", cs[1].ID, rs[1], t0.Add(time.Minute), at)
	held(t, s, cs[0].ID, rs[0])
	held(t, s, cs[2].ID, rs[2])
	if n, err = s.ExpireResults(ctx, string(siteprotocol.OpReadLogs), at, at, 2); err != nil || n != 2 {
		t.Fatalf("second batch: %d, %v; want 2", n, err)
	}
	if n, err = s.ExpireResults(ctx, string(siteprotocol.OpReadLogs), at, at, 2); err != nil || n != 0 {
		t.Fatalf("third batch: %d, %v; want 0", n, err)
	}
	expired(t, s, "alpha-k8s", cs[0].ID, rs[0], t0.Add(2*time.Minute), at)
	expired(t, s, "alpha-k8s", cs[2].ID, rs[2], t0.Add(3*time.Minute), at)
}

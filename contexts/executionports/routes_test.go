package executionports_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

const (
	installA = "6a0f3c1e-0000-4000-8000-00000000000a"
	installB = "6a0f3c1e-0000-4000-8000-00000000000b"
)

func uuid(n int) string { return fmt.Sprintf("3e8d2b10-5f6a-4c7b-9d8e-%012x", n) }

// observe returns an observe command with id n as compact JSON.
func observe(n int, issuedAt string) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"operation":"observe","issued_at":%q,"run_id":%q,"attempt_id":%q,"member_id":%q,"project_id":%q,"family":"batch"}`,
		uuid(n), issuedAt, uuid(1000+n), uuid(2000+n), uuid(3000+n), uuid(4000+n)))
}

// reshuffled returns the same command as observe with its members in another
// order and other whitespace.
func reshuffled(n int, issuedAt string) []byte {
	return []byte(fmt.Sprintf("{\n  \"family\" : \"batch\",\n  \"project_id\": %q, \"member_id\":%q,\n\t\"attempt_id\": %q, \"run_id\": %q,\n  \"issued_at\": %q, \"operation\": \"observe\", \"id\": %q }\n",
		uuid(4000+n), uuid(3000+n), uuid(2000+n), uuid(1000+n), issuedAt, uuid(n)))
}

const issued = "2026-11-29T10:00:00.123Z"

type reply = executiontest.Reply

func wantStatus(t *testing.T, r reply, status int, reason string) {
	t.Helper()
	executiontest.Want(t, r, status, reason)
}

func decode[T any](t *testing.T, r reply) T {
	t.Helper()
	return executiontest.Decode[T](t, r)
}

func (s *server) call(t *testing.T, method, path, key, installation string, body []byte) reply {
	t.Helper()
	return s.Call(t, method, path, key, installation, body)
}

func (s *server) appendCommand(t *testing.T, env string, body []byte) reply {
	return s.call(t, http.MethodPost, "/execution/v1/streams/"+env+"/commands", s.serviceKey, "", body)
}

func (s *server) pull(t *testing.T, env, key, installation string, after, limit, wait int) reply {
	return s.call(t, http.MethodGet, fmt.Sprintf("/site/v1/streams/%s/commands?after=%d&limit=%d&wait=%d", env, after, limit, wait), key, installation, nil)
}

func (s *server) ack(t *testing.T, env, key, installation string, seq int64, result []byte) reply {
	return s.call(t, http.MethodPut, fmt.Sprintf("/site/v1/streams/%s/commands/%d/result", env, seq), key, installation, result)
}

func TestAppendIsIdempotentOnContentAndRefusesAConflictingRetry(t *testing.T) {
	s := startServer(t, options{})
	first := s.appendCommand(t, "alpha-k8s", observe(1, issued))
	wantStatus(t, first, http.StatusCreated, "")
	a := decode[siteprotocol.AppendReceipt](t, first)
	if a.Sequence != 1 || !a.Created || a.ID != uuid(1) || !siteprotocol.IsDigest(a.Digest) {
		t.Fatalf("first append: %+v", a)
	}
	wantStatus(t, s.appendCommand(t, "alpha-k8s", observe(2, issued)), http.StatusCreated, "")

	retry := s.appendCommand(t, "alpha-k8s", reshuffled(1, issued))
	wantStatus(t, retry, http.StatusOK, "")
	if r := decode[siteprotocol.AppendReceipt](t, retry); r.Sequence != 1 || r.Created || r.Digest != a.Digest {
		t.Fatalf("retry with reordered keys and whitespace: %+v, want sequence 1, created false, digest %s", r, a.Digest)
	}
	wantStatus(t, s.appendCommand(t, "alpha-k8s", observe(1, "2026-11-29T10:00:01.123Z")), http.StatusConflict, siteprotocol.ProblemConflictingRetry)
	wantStatus(t, s.appendCommand(t, "beta-k8s", observe(1, issued)), http.StatusConflict, siteprotocol.ProblemConflictingRetry)
	// The digest, when given, must match the content.
	withDigest := bytes.Replace(observe(3, issued), []byte(`{`), []byte(`{"digest":"`+strings.Repeat("0", 64)+`",`), 1)
	wantStatus(t, s.appendCommand(t, "alpha-k8s", withDigest), http.StatusUnprocessableEntity, siteprotocol.ProblemInvalidCommand)

	st := decode[siteprotocol.StreamState](t, s.call(t, http.MethodGet, "/site/v1/streams/alpha-k8s", s.alphaKey, installA, nil))
	if st.HeadSequence != 2 || st.Site != "alpha" || st.Authority != "https://metallo.example.org" || st.Environment != "alpha-k8s" {
		t.Fatalf("stream state %+v", st)
	}
}

func TestBadCommandsAre4xxProblemsAndStoreNothing(t *testing.T) {
	s := startServer(t, options{})
	for name, tc := range map[string]struct {
		body   []byte
		status int
	}{
		"not JSON":         {[]byte(`{"id":`), http.StatusBadRequest},
		"an empty body":    {[]byte{}, http.StatusBadRequest},
		"a null member":    {bytes.Replace(observe(1, issued), []byte(`"family":"batch"`), []byte(`"family":null`), 1), http.StatusUnprocessableEntity},
		"an unknown field": {bytes.Replace(observe(1, issued), []byte(`{`), []byte(`{"colour":"blue",`), 1), http.StatusUnprocessableEntity},
		"a sequence":       {bytes.Replace(observe(1, issued), []byte(`{`), []byte(`{"sequence":4,`), 1), http.StatusUnprocessableEntity},
		"a local time":     {observe(1, "2026-11-29T10:00:00+01:00"), http.StatusUnprocessableEntity},
		"no run_id":        {[]byte(`{"id":"` + uuid(1) + `","operation":"start","issued_at":"` + issued + `","family":"batch"}`), http.StatusUnprocessableEntity},
	} {
		t.Run(name, func(t *testing.T) {
			wantStatus(t, s.appendCommand(t, "alpha-k8s", tc.body), tc.status, siteprotocol.ProblemInvalidCommand)
		})
	}
	big := bytes.Replace(observe(1, issued), []byte(`"family":"batch"`), []byte(`"family":"batch","payload":{"pad":"`+strings.Repeat("x", siteprotocol.MaxCommandBytes)+`"}`), 1)
	wantStatus(t, s.appendCommand(t, "alpha-k8s", big), http.StatusRequestEntityTooLarge, "payload-too-large")
	r := s.appendCommand(t, "alpha-k8s", []byte(`{"id":"`+uuid(1)+`","operation":"start","issued_at":"`+issued+`","family":"batch"}`))
	if !bytes.Contains(r.Body, []byte(`"location":"body.run_id"`)) {
		t.Fatalf("a validation problem names each location: %s", r)
	}
	st := decode[siteprotocol.StreamState](t, s.call(t, http.MethodGet, "/site/v1/streams/alpha-k8s", s.alphaKey, installA, nil))
	if st.HeadSequence != 0 {
		t.Fatalf("refused commands moved the head to %d", st.HeadSequence)
	}
}

func TestPulledCommandsVerifyAndComeOldestFirstWithinBounds(t *testing.T) {
	s := startServer(t, options{})
	for i := 1; i <= 5; i++ {
		wantStatus(t, s.appendCommand(t, "alpha-k8s", reshuffled(i, issued)), http.StatusCreated, "")
	}
	r := s.pull(t, "alpha-k8s", s.alphaKey, installA, 1, 3, 0)
	wantStatus(t, r, http.StatusOK, "")
	page := decode[siteprotocol.Pull](t, r)
	if len(page.Commands) != 3 || page.HeadSequence != 5 || page.AcknowledgedSequence != 0 {
		t.Fatalf("page: %d commands, head %d, acknowledged %d", len(page.Commands), page.HeadSequence, page.AcknowledgedSequence)
	}
	for i, raw := range page.Commands {
		c, err := siteprotocol.ParsePulled(raw)
		if err != nil {
			t.Fatalf("pulled command %d does not verify: %v", i, err)
		}
		if c.Sequence != int64(i+2) || c.ID != uuid(i+2) {
			t.Fatalf("pulled command %d: sequence %d id %s", i, c.Sequence, c.ID)
		}
		canonical, err := siteprotocol.Canonical(raw)
		must(t, err)
		if !bytes.Equal(canonical, raw) {
			t.Fatalf("a pulled command is not served in its canonical form: %s", raw)
		}
	}
	wantStatus(t, s.pull(t, "alpha-k8s", s.alphaKey, installA, 0, 101, 0), http.StatusUnprocessableEntity, "")
	wantStatus(t, s.pull(t, "alpha-k8s", s.alphaKey, installA, 0, 10, 31), http.StatusUnprocessableEntity, "")
	wantStatus(t, s.pull(t, "alpha-k8s", s.alphaKey, installA, -1, 10, 0), http.StatusUnprocessableEntity, "")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// resultFor returns the encoded result of the pulled command raw with message.
func resultFor(t *testing.T, raw []byte, message string) []byte {
	t.Helper()
	c, err := siteprotocol.ParsePulled(raw)
	must(t, err)
	_, b, err := siteprotocol.NewResult(c, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonObserved, message, map[string]string{"state": "running"}, nil)
	must(t, err)
	return b
}

func TestAcknowledgementsFollowTheExactReplayRules(t *testing.T) {
	s := startServer(t, options{})
	for i := 1; i <= 3; i++ {
		wantStatus(t, s.appendCommand(t, "alpha-k8s", observe(i, issued)), http.StatusCreated, "")
	}
	page := decode[siteprotocol.Pull](t, s.pull(t, "alpha-k8s", s.alphaKey, installA, 0, 100, 0))
	r1, r2 := resultFor(t, page.Commands[0], "one"), resultFor(t, page.Commands[1], "two")

	wantStatus(t, s.ack(t, "alpha-k8s", s.alphaKey, installA, 2, r2), http.StatusConflict, siteprotocol.ProblemOutOfOrder)
	wantStatus(t, s.ack(t, "alpha-k8s", s.alphaKey, installA, 1, r2), http.StatusConflict, siteprotocol.ProblemIdentityMismatch)
	tampered := bytes.Replace(r1, []byte(`"one"`), []byte(`"uno"`), 1)
	wantStatus(t, s.ack(t, "alpha-k8s", s.alphaKey, installA, 1, tampered), http.StatusUnprocessableEntity, siteprotocol.ProblemInvalidResult)
	wantStatus(t, s.ack(t, "alpha-k8s", s.alphaKey, installA, 1, []byte(`{"command_id":`)), http.StatusBadRequest, siteprotocol.ProblemInvalidResult)
	wantStatus(t, s.ack(t, "alpha-k8s", s.alphaKey, installA, 1, []byte{}), http.StatusBadRequest, siteprotocol.ProblemInvalidResult)

	first := s.ack(t, "alpha-k8s", s.alphaKey, installA, 1, r1)
	wantStatus(t, first, http.StatusOK, "")
	ack := decode[siteprotocol.Acknowledgement](t, first)
	if d, _ := siteprotocol.ResultDigest(r1); ack.AcknowledgedSequence != 1 || ack.ResultDigest != d {
		t.Fatalf("acknowledgement %+v", ack)
	}
	wantStatus(t, s.ack(t, "alpha-k8s", s.alphaKey, installA, 2, r2), http.StatusOK, "")
	replay := s.ack(t, "alpha-k8s", s.alphaKey, installA, 1, r1)
	if replay.Status != http.StatusOK || !bytes.Equal(replay.Body, first.Body) {
		t.Fatalf("byte-identical replay: got %s, want %s", replay, first)
	}
	wantStatus(t, s.ack(t, "alpha-k8s", s.alphaKey, installA, 1, resultFor(t, page.Commands[0], "a different outcome")), http.StatusConflict, siteprotocol.ProblemResultConflict)

	rec := decode[struct {
		Command        json.RawMessage `json:"command"`
		Result         json.RawMessage `json:"result"`
		AcknowledgedAt string          `json:"acknowledged_at"`
	}](t, s.call(t, http.MethodGet, "/execution/v1/streams/alpha-k8s/commands/"+uuid(1), s.serviceKey, "", nil))
	if !bytes.Equal(rec.Result, r1) || !bytes.Equal(rec.Command, page.Commands[0]) || rec.AcknowledgedAt != "2026-11-29T10:00:00Z" {
		t.Fatalf("command record after a conflicting result: %s / %s at %s", rec.Command, rec.Result, rec.AcknowledgedAt)
	}
	unacked := s.call(t, http.MethodGet, "/execution/v1/streams/alpha-k8s/commands/"+uuid(3), s.serviceKey, "", nil)
	if bytes.Contains(unacked.Body, []byte(`"result"`)) {
		t.Fatalf("an unacknowledged command shows a result: %s", unacked)
	}
	wantStatus(t, s.call(t, http.MethodGet, "/execution/v1/streams/alpha-k8s/commands/"+uuid(9), s.serviceKey, "", nil), http.StatusNotFound, siteprotocol.ProblemUnknownCommand)
}

func TestARuntimeMayUseOnlyItsOwnEnvironmentsStream(t *testing.T) {
	s := startServer(t, options{})
	wantStatus(t, s.appendCommand(t, "beta-k8s", observe(1, issued)), http.StatusCreated, "")
	wantStatus(t, s.pull(t, "beta-k8s", s.alphaKey, installA, 0, 10, 0), http.StatusForbidden, siteprotocol.ProblemForbidden)
	wantStatus(t, s.call(t, http.MethodGet, "/site/v1/streams/beta-k8s", s.alphaKey, installA, nil), http.StatusForbidden, siteprotocol.ProblemForbidden)
	wantStatus(t, s.ack(t, "beta-k8s", s.alphaKey, installA, 1, []byte(`{}`)), http.StatusForbidden, siteprotocol.ProblemForbidden)
	wantStatus(t, s.pull(t, "beta-k8s", s.serviceKey, installA, 0, 10, 0), http.StatusForbidden, siteprotocol.ProblemForbidden)
	wantStatus(t, s.call(t, http.MethodPost, "/execution/v1/streams/beta-k8s/commands", s.betaKey, "", observe(2, issued)), http.StatusForbidden, siteprotocol.ProblemForbidden)
	wantStatus(t, s.call(t, http.MethodPost, "/execution/v1/streams/beta-k8s/commands", s.betoKey, "", observe(2, issued)), http.StatusForbidden, siteprotocol.ProblemForbidden)
	wantStatus(t, s.pull(t, "beta-k8s", "", installA, 0, 10, 0), http.StatusUnauthorized, "")
	wantStatus(t, s.pull(t, "beta-k8s", "mtl_not-a-key", installA, 0, 10, 0), http.StatusUnauthorized, "")
	wantStatus(t, s.pull(t, "beta-k8s", s.betaKey, installA, 0, 10, 0), http.StatusOK, "")
}

func TestUnknownEnvironmentIs404(t *testing.T) {
	s := startServer(t, options{})
	wantStatus(t, s.appendCommand(t, "ghost", observe(1, issued)), http.StatusNotFound, siteprotocol.ProblemUnknownEnvironment)
	wantStatus(t, s.call(t, http.MethodPost, "/execution/v1/streams/ghost/rebind", s.serviceKey, "", []byte(`{"reason":"x"}`)), http.StatusNotFound, siteprotocol.ProblemUnknownEnvironment)
	// No key names an environment that environments.yaml does not list (keys.yaml holds no
	// environment key): a configured environment's key on it is refused, naming nothing of it.
	wantStatus(t, s.pull(t, "ghost", s.alphaKey, installA, 0, 10, 0), http.StatusForbidden, siteprotocol.ProblemForbidden)
	wantStatus(t, s.call(t, http.MethodGet, "/site/v1/streams/ghost", s.alphaKey, installA, nil), http.StatusForbidden, siteprotocol.ProblemForbidden)
}

func TestEverySiteRouteRequiresTheInstallationHeader(t *testing.T) {
	s := startServer(t, options{})
	wantStatus(t, s.pull(t, "alpha-k8s", s.alphaKey, "", 0, 10, 0), http.StatusBadRequest, siteprotocol.ProblemInstallationRequired)
	wantStatus(t, s.call(t, http.MethodGet, "/site/v1/streams/alpha-k8s", s.alphaKey, "", nil), http.StatusBadRequest, siteprotocol.ProblemInstallationRequired)
	wantStatus(t, s.ack(t, "alpha-k8s", s.alphaKey, "", 1, []byte(`{}`)), http.StatusBadRequest, siteprotocol.ProblemInstallationRequired)
	wantStatus(t, s.pull(t, "alpha-k8s", s.alphaKey, "not an id!", 0, 10, 0), http.StatusBadRequest, siteprotocol.ProblemInstallationRequired)
}

func TestASecondInstallationIsFencedUntilTheStreamIsRebound(t *testing.T) {
	s := startServer(t, options{})
	wantStatus(t, s.appendCommand(t, "alpha-k8s", observe(1, issued)), http.StatusCreated, "")
	page := decode[siteprotocol.Pull](t, s.pull(t, "alpha-k8s", s.alphaKey, installA, 0, 10, 0))
	result := resultFor(t, page.Commands[0], "done")

	wantStatus(t, s.pull(t, "alpha-k8s", s.alphaKey, installB, 0, 10, 0), http.StatusConflict, siteprotocol.ProblemInstallationMismatch)
	wantStatus(t, s.ack(t, "alpha-k8s", s.alphaKey, installB, 1, result), http.StatusConflict, siteprotocol.ProblemInstallationMismatch)
	wantStatus(t, s.call(t, http.MethodGet, "/site/v1/streams/alpha-k8s", s.alphaKey, installB, nil), http.StatusConflict, siteprotocol.ProblemInstallationMismatch)
	st := decode[siteprotocol.StreamState](t, s.call(t, http.MethodGet, "/site/v1/streams/alpha-k8s", s.alphaKey, installA, nil))
	if st.AcknowledgedSequence != 0 || st.InstallationID != installA {
		t.Fatalf("the fenced installation changed the stream: %+v", st)
	}

	wantStatus(t, s.call(t, http.MethodPost, "/execution/v1/streams/alpha-k8s/rebind", s.alphaKey, "", []byte(`{"reason":"x"}`)), http.StatusForbidden, siteprotocol.ProblemForbidden)
	wantStatus(t, s.call(t, http.MethodPost, "/execution/v1/streams/alpha-k8s/rebind", s.serviceKey, "", []byte(`{"installation_id":"`+installB+`"}`)), http.StatusUnprocessableEntity, "")
	s.clock.Advance(time.Hour)
	rb := s.call(t, http.MethodPost, "/execution/v1/streams/alpha-k8s/rebind", s.serviceKey, "", []byte(`{"installation_id":"`+installB+`","reason":"volume lost; reinstalled"}`))
	wantStatus(t, rb, http.StatusOK, "")
	type bindingBody struct {
		Action                 string `json:"action"`
		InstallationID         string `json:"installation_id"`
		PreviousInstallationID string `json:"previous_installation_id"`
		Principal              string `json:"principal"`
		Reason                 string `json:"reason"`
		RecordedAt             string `json:"recorded_at"`
	}
	out := decode[struct {
		Stream  siteprotocol.StreamState `json:"stream"`
		Binding bindingBody              `json:"binding"`
	}](t, rb)
	binding := out.Binding
	if out.Stream.InstallationID != installB || binding.Principal != "service:execution" || binding.PreviousInstallationID != installA || binding.InstallationID != installB ||
		binding.RecordedAt != "2026-11-29T11:00:00Z" || binding.Reason != "volume lost; reinstalled" || binding.Action != "rebound" {
		t.Fatalf("rebind answer: %s", rb)
	}
	wantStatus(t, s.ack(t, "alpha-k8s", s.alphaKey, installA, 1, result), http.StatusConflict, siteprotocol.ProblemInstallationMismatch)
	wantStatus(t, s.ack(t, "alpha-k8s", s.alphaKey, installB, 1, result), http.StatusOK, "")
}

func TestAWaitingPullWakesWhenACommandIsAppended(t *testing.T) {
	// Re-reads without a wake-up every minute only: the pull can return
	// the command within the wait only through the append's wake-up. On
	// SQLite (one connection) the append also proves the waiting pull holds
	// no connection.
	s := startServer(t, options{recheck: time.Minute})
	got := make(chan reply, 1)
	go func() { got <- s.pull(t, "alpha-k8s", s.alphaKey, installA, 0, 10, 30) }()
	s.waitBound(t, "alpha-k8s", s.alphaKey, installA)
	start := time.Now()
	wantStatus(t, s.appendCommand(t, "alpha-k8s", observe(1, issued)), http.StatusCreated, "")
	r := <-got
	page := decode[siteprotocol.Pull](t, r)
	// Without a wake-up the pull could answer only at its 30 s deadline.
	if took := time.Since(start); len(page.Commands) != 1 || took >= 15*time.Second {
		t.Fatalf("the waiting pull answered %s %s after the append", r, took)
	}
}

func TestPlanningAnswersUnavailableWhenTheOwnerCannotBeRead(t *testing.T) {
	s := startServer(t, options{}) // the owner's URL is a closed port
	r := s.call(t, http.MethodPost, "/execution/v1/plans", s.serviceKey, "", []byte(`{"project":"`+uuid(7)+`","environment":"alpha-k8s","demand":{"cpu":1000}}`))
	wantStatus(t, r, http.StatusOK, "")
	p := decode[map[string]any](t, r)
	if p["answer"] != "unavailable" || p["site"] != "alpha" || p["detail"] == "" {
		t.Fatalf("plan with an unreachable owner: %s", r)
	}
}

func TestBadPlanRequestsAre4xx(t *testing.T) {
	s := startServer(t, options{})
	plan := func(key, body string) reply {
		return s.call(t, http.MethodPost, "/execution/v1/plans", key, "", []byte(body))
	}
	wantStatus(t, plan(s.serviceKey, `{"project":"`+uuid(7)+`","environment":"ghost","demand":{"cpu":1}}`), http.StatusUnprocessableEntity, siteprotocol.ProblemUnknownEnvironment)
	wantStatus(t, plan(s.serviceKey, `{"project":"`+uuid(7)+`","environment":"alpha-k8s","demand":{"cpu":-1}}`), http.StatusUnprocessableEntity, "validation-failed")
	wantStatus(t, plan(s.serviceKey, `{"project":"`+uuid(7)+`","environment":"alpha-k8s","demand":{"disk":1}}`), http.StatusUnprocessableEntity, "validation-failed")
	wantStatus(t, plan(s.serviceKey, `{"project":"Project Alpha","environment":"alpha-k8s","demand":{"cpu":1}}`), http.StatusUnprocessableEntity, "validation-failed")
	wantStatus(t, plan(s.alphaKey, `{"project":"`+uuid(7)+`","environment":"alpha-k8s","demand":{"cpu":1}}`), http.StatusForbidden, siteprotocol.ProblemForbidden)
}

func TestStoppingTheServerAnswersWaitingPullsAtOnce(t *testing.T) {
	s := startServer(t, options{recheck: time.Minute})
	got := make(chan reply, 1)
	go func() {
		r, err := s.Try(http.MethodGet, "/site/v1/streams/alpha-k8s/commands?after=0&wait=30", s.alphaKey, installA, nil)
		if err != nil {
			t.Errorf("pull: %v", err)
		}
		got <- r
	}()
	s.waitBound(t, "alpha-k8s", s.alphaKey, installA)
	start := time.Now()
	if err := s.stop(); err != nil {
		t.Fatalf("stop with a waiting pull: %v", err)
	}
	r := <-got
	// The HTTP server's graceful shutdown bound is 10 s; the pull waited 30.
	if took := time.Since(start); r.Status != http.StatusOK || took >= 10*time.Second {
		t.Fatalf("the waiting pull answered %s; stopping took %s", r, took)
	}
}

// waitBound waits until a pull of installation has bound env's stream (a
// pull binds before it waits), polling the stream state.
func (s *server) waitBound(t *testing.T, env, key, installation string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := decode[siteprotocol.StreamState](t, s.call(t, http.MethodGet, "/site/v1/streams/"+env, key, installation, nil))
		if st.InstallationID == installation {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the pull never bound the stream")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

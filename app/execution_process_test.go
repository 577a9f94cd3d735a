package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/platform/testsetup"
)

// executionPair is two `metallo serve --role execution` processes on one
// PostgreSQL database, with an unreachable HTTP owner (streams only).
type executionPair struct {
	files executiontest.Files
	a, b  executiontest.Client
}

func startExecutionPair(t *testing.T) executionPair {
	t.Helper()
	bin := testsetup.Binary(t)
	dir := t.TempDir()
	files := executiontest.WriteFiles(t, dir, []executiontest.Environment{{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org"}})
	ownerKey := filepath.Join(dir, "provisioning.key")
	dbtest.Must(t, os.WriteFile(ownerKey, []byte("unused\n"), 0o600))
	dbURL := dbtest.NewPostgres(t)
	args := []string{"--role", "execution", "--migrate", "--keys-file", files.KeysFile, "--environments-file", files.EnvironmentsFile,
		"--execution-database-url", dbURL, "--resource-owner", "http", "--provisioning-url", "http://127.0.0.1:1", "--provisioning-key-file", ownerKey}
	pa := startServed(t, bin, args...)
	pb := startServed(t, bin, args...)
	return executionPair{files: files, a: executiontest.Client{Base: pa.base}, b: executiontest.Client{Base: pb.base}}
}

func commandID(n int) string { return fmt.Sprintf("6b1c0d2e-3f4a-4b5c-8d6e-%012x", n) }

// startCommand is a batch start command with id n, compact, keys in one order.
func startCommand(n int, issuedAt string) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"operation":"start","issued_at":%q,"run_id":"5b0e2b10-5f6a-4c7b-9d8e-%012x","attempt_id":"7d1f2b10-5f6a-4c7b-9d8e-%012x","member_id":"9c2e2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e","project_id":"0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9","account_ref":{"binding_id":"e41f2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e","generation":1},"family":"batch","payload":{"demand":{"cpu":2000,"memory":4294967296},"time_limit_seconds":3600,"argv":["python","train.py"],"env":{"EPOCHS":"3"}}}`,
		commandID(n), issuedAt, n, n))
}

// startCommandReordered is startCommand(n) with its members (and nested
// members) in another order and whitespace added: the same content.
func startCommandReordered(n int, issuedAt string) []byte {
	return []byte(fmt.Sprintf("{ \"payload\" : {\"env\": {\"EPOCHS\": \"3\"}, \"argv\": [\"python\", \"train.py\"], \"time_limit_seconds\": 3600,\n \"demand\": {\"memory\": 4294967296, \"cpu\": 2000}},\n\t\"family\": \"batch\", \"account_ref\": {\"generation\": 1, \"binding_id\": \"e41f2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e\"},\n \"project_id\": \"0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9\", \"member_id\": \"9c2e2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e\",\n \"attempt_id\": \"7d1f2b10-5f6a-4c7b-9d8e-%012x\", \"run_id\": \"5b0e2b10-5f6a-4c7b-9d8e-%012x\",\n \"issued_at\": %q, \"operation\": \"start\", \"id\": %q }\n",
		n, n, issuedAt, commandID(n)))
}

const issuedAt = "2026-11-29T10:00:00.123Z"

// TestSixteenAppendersAcrossTwoServerProcessesGetGaplessUniqueSequences
// runs 16 appenders split across two execution server processes on one
// PostgreSQL database, 1,000 commands each, to one stream:
// sequences 1..16,000 without gap or duplicate; re-appending any of them
// with identical content (keys reordered, whitespace changed) returns its
// original sequence; a changed issued_at is 409 conflicting-retry.
func TestSixteenAppendersAcrossTwoServerProcessesGetGaplessUniqueSequences(t *testing.T) {
	const appenders, each = 16, 1000
	p := startExecutionPair(t)
	clients := []executiontest.Client{p.a, p.b}
	path := "/execution/v1/streams/alpha-k8s/commands"

	seqOf := make([]int64, appenders*each)
	var wg sync.WaitGroup
	errs := make(chan error, appenders)
	for w := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[w%2]
			for i := range each {
				n := w*each + i
				r, err := c.Try(http.MethodPost, path, p.files.ServiceKey, "", startCommand(n, issuedAt))
				if err != nil || r.Status != http.StatusCreated {
					errs <- fmt.Errorf("appender %d command %d: %v %v", w, n, r, err)
					return
				}
				var a siteprotocol.AppendReceipt
				if err := json.Unmarshal(r.Body, &a); err != nil || !a.Created || a.ID != commandID(n) {
					errs <- fmt.Errorf("appender %d command %d: receipt %s", w, n, r.Body)
					return
				}
				seqOf[n] = a.Sequence
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	owner := make(map[int64]int, appenders*each)
	for n, seq := range seqOf {
		if prev, dup := owner[seq]; dup {
			t.Fatalf("sequence %d given to commands %d and %d", seq, prev, n)
		}
		owner[seq] = n
	}
	for seq := int64(1); seq <= appenders*each; seq++ {
		if _, ok := owner[seq]; !ok {
			t.Fatalf("gap: no command got sequence %d", seq)
		}
	}

	// The stream as a Runtime pulls it holds exactly those commands in that
	// order, each verifying its digest.
	install := "6a0f3c1e-0000-4000-8000-0000000000aa"
	key := p.files.EnvironmentKeys["alpha-k8s"]
	for after := int64(0); after < appenders*each; {
		page := executiontest.Decode[siteprotocol.Pull](t, p.b.Call(t, http.MethodGet, fmt.Sprintf("/site/v1/streams/alpha-k8s/commands?after=%d&limit=100", after), key, install, nil))
		if len(page.Commands) == 0 || page.HeadSequence != appenders*each {
			t.Fatalf("pull after %d: %d commands, head %d", after, len(page.Commands), page.HeadSequence)
		}
		for _, raw := range page.Commands {
			c, err := siteprotocol.ParsePulled(raw)
			if err != nil {
				t.Fatalf("pulled command after %d: %v", after, err)
			}
			if c.Sequence != after+1 || c.ID != commandID(owner[c.Sequence]) {
				t.Fatalf("pulled sequence %d (%s) after %d", c.Sequence, c.ID, after)
			}
			after = c.Sequence
		}
	}

	// Every command re-appended with the same content, reordered and
	// re-spaced, through either process, keeps its sequence.
	errs = make(chan error, appenders)
	for w := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[(w+1)%2]
			for i := range each {
				n := w*each + i
				r, err := c.Try(http.MethodPost, path, p.files.ServiceKey, "", startCommandReordered(n, issuedAt))
				var a siteprotocol.AppendReceipt
				if err != nil || r.Status != http.StatusOK || json.Unmarshal(r.Body, &a) != nil || a.Created || a.Sequence != seqOf[n] {
					errs <- fmt.Errorf("re-append of command %d (sequence %d): %v %v", n, seqOf[n], r, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// A changed issued_at is another command under the same ID.
	seed := rand.Uint64()
	t.Logf("conflicting-retry sample seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	for range 100 {
		n := rng.IntN(appenders * each)
		r := clients[n%2].Call(t, http.MethodPost, path, p.files.ServiceKey, "", startCommand(n, "2026-11-29T10:00:00.124Z"))
		executiontest.Want(t, r, http.StatusConflict, siteprotocol.ProblemConflictingRetry)
	}
	st := executiontest.Decode[siteprotocol.StreamState](t, p.a.Call(t, http.MethodGet, "/site/v1/streams/alpha-k8s", key, install, nil))
	if st.HeadSequence != appenders*each {
		t.Fatalf("head %d after retries, want %d", st.HeadSequence, appenders*each)
	}
}

// TestExactResultReplayAndInstallationFencingAcrossServerProcesses is the
// Must-hold on real PostgreSQL across two server processes: a result re-sent
// byte-identical after acknowledgement gets the same acknowledgement (from
// the other process too); a different result for the sequence is 409
// result-conflict and the recorded result is unchanged; a second
// installation pulling the bound stream is 409 installation-mismatch and can
// acknowledge nothing until the stream is rebound.
func TestExactResultReplayAndInstallationFencingAcrossServerProcesses(t *testing.T) {
	p := startExecutionPair(t)
	key := p.files.EnvironmentKeys["alpha-k8s"]
	const first, second = "6a0f3c1e-0000-4000-8000-0000000000a1", "6a0f3c1e-0000-4000-8000-0000000000b2"
	for n := range 3 {
		executiontest.Want(t, p.a.Call(t, http.MethodPost, "/execution/v1/streams/alpha-k8s/commands", p.files.ServiceKey, "", startCommand(n, issuedAt)), http.StatusCreated, "")
	}
	page := executiontest.Decode[siteprotocol.Pull](t, p.a.Call(t, http.MethodGet, "/site/v1/streams/alpha-k8s/commands?after=0", key, first, nil))
	results := make([][]byte, len(page.Commands))
	for i, raw := range page.Commands {
		c, err := siteprotocol.ParsePulled(raw)
		dbtest.Must(t, err)
		_, results[i], err = siteprotocol.NewResult(c, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated, "Job created", map[string]string{"state": "queued"},
			[]siteprotocol.NativeRef{{Kind: "Job", Namespace: "project-0a1b", Name: fmt.Sprintf("attempt-%d", i), UID: "u"}})
		dbtest.Must(t, err)
	}
	ack := func(c executiontest.Client, install string, seq int, body []byte) executiontest.Reply {
		return c.Call(t, http.MethodPut, fmt.Sprintf("/site/v1/streams/alpha-k8s/commands/%d/result", seq), key, install, body)
	}

	// The second installation is fenced on both processes.
	executiontest.Want(t, p.b.Call(t, http.MethodGet, "/site/v1/streams/alpha-k8s/commands?after=0", key, second, nil), http.StatusConflict, siteprotocol.ProblemInstallationMismatch)
	executiontest.Want(t, ack(p.a, second, 1, results[0]), http.StatusConflict, siteprotocol.ProblemInstallationMismatch)
	executiontest.Want(t, ack(p.b, second, 1, results[0]), http.StatusConflict, siteprotocol.ProblemInstallationMismatch)

	acked := ack(p.a, first, 1, results[0])
	executiontest.Want(t, acked, http.StatusOK, "")
	executiontest.Want(t, ack(p.a, first, 2, results[1]), http.StatusOK, "")
	for _, c := range []executiontest.Client{p.a, p.b} {
		replay := ack(c, first, 1, results[0])
		if replay.Status != http.StatusOK || !bytes.Equal(replay.Body, acked.Body) {
			t.Fatalf("byte-identical replay: got %s, want %s", replay, acked)
		}
	}
	c0, err := siteprotocol.ParsePulled(page.Commands[0])
	dbtest.Must(t, err)
	_, other, err := siteprotocol.NewResult(c0, siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError, "quota exceeded", map[string]string{"state": "failed"}, nil)
	dbtest.Must(t, err)
	executiontest.Want(t, ack(p.b, first, 1, other), http.StatusConflict, siteprotocol.ProblemResultConflict)
	rec := executiontest.Decode[struct {
		Result json.RawMessage `json:"result"`
	}](t, p.b.Call(t, http.MethodGet, "/execution/v1/streams/alpha-k8s/commands/"+commandID(0), p.files.ServiceKey, "", nil))
	if !bytes.Equal(rec.Result, results[0]) {
		t.Fatalf("recorded result after a conflicting one: %s, want %s", rec.Result, results[0])
	}

	// The second installation acknowledges nothing until an operator rebinds.
	executiontest.Want(t, ack(p.b, second, 3, results[2]), http.StatusConflict, siteprotocol.ProblemInstallationMismatch)
	st := executiontest.Decode[siteprotocol.StreamState](t, p.b.Call(t, http.MethodGet, "/site/v1/streams/alpha-k8s", key, first, nil))
	if st.AcknowledgedSequence != 2 || st.InstallationID != first {
		t.Fatalf("state before rebind: %+v", st)
	}
	rb := p.a.Call(t, http.MethodPost, "/execution/v1/streams/alpha-k8s/rebind", p.files.ServiceKey, "", []byte(`{"installation_id":"`+second+`","reason":"Runtime reinstalled on a new volume"}`))
	executiontest.Want(t, rb, http.StatusOK, "")
	if !strings.Contains(string(rb.Body), `"principal":"service:execution"`) {
		t.Fatalf("rebind answer does not record who: %s", rb)
	}
	executiontest.Want(t, ack(p.b, first, 3, results[2]), http.StatusConflict, siteprotocol.ProblemInstallationMismatch)
	executiontest.Want(t, ack(p.b, second, 3, results[2]), http.StatusOK, "")
}

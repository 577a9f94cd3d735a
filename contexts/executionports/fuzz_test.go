package executionports_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	"github.com/pharos-metallo/metallo/platform/fuzzlane"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// FuzzExecutionBodies posts fuzzed bodies to every JSON body route of the
// execution role (append, result, rebind, plans) over SQLite and fails on
// any 5xx, on a 4xx that is not a problem document, and on a refused body
// that moved the stream (docs/architecture.md#one-answer-per-fault).
func FuzzExecutionBodies(f *testing.F) {
	fuzzlane.Mark(f)
	s := startServer(f, options{})
	executiontest.Want(f, s.Call(f, http.MethodPost, "/execution/v1/streams/alpha-k8s/commands", s.serviceKey, "", observe(1, issued)), http.StatusCreated, "")
	page := executiontest.Decode[siteprotocol.Pull](f, s.Call(f, http.MethodGet, "/site/v1/streams/alpha-k8s/commands", s.alphaKey, installA, nil))
	cmd, err := siteprotocol.ParsePulled(page.Commands[0])
	if err != nil {
		f.Fatal(err)
	}
	_, result, err := siteprotocol.NewResult(cmd, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonObserved, "done", map[string]string{"state": "running"}, nil)
	if err != nil {
		f.Fatal(err)
	}
	routes := []struct{ method, path, key, installation string }{
		{http.MethodPost, "/execution/v1/streams/alpha-k8s/commands", s.serviceKey, ""},
		{http.MethodPut, "/site/v1/streams/alpha-k8s/commands/1/result", s.alphaKey, installA},
		{http.MethodPost, "/execution/v1/streams/alpha-k8s/rebind", s.serviceKey, ""},
		{http.MethodPost, "/execution/v1/plans", s.serviceKey, ""},
	}
	f.Add(uint8(0), observe(2, issued))
	f.Add(uint8(0), []byte(strings.Replace(string(observe(3, issued)), `"family":"batch"`, `"family":"batch","payload":{"x":1e30}`, 1)))
	f.Add(uint8(1), result)
	f.Add(uint8(1), []byte(strings.Replace(string(result), `"sequence":1`, `"sequence":1.5`, 1)))
	f.Add(uint8(2), []byte(`{"installation_id":"`+installA+`","reason":"same"}`))
	f.Add(uint8(2), []byte(`{"unbind":null,"reason":"x"}`))
	f.Add(uint8(3), []byte(`{"project":"`+uuid(7)+`","environment":"alpha-k8s","demand":{"cpu":1000}}`))
	f.Add(uint8(3), []byte(`{"project":"`+uuid(7)+`","environment":"alpha-k8s","demand":{"cpu":18446744073709551616,"ram":-1}}`))
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		r := routes[int(route)%len(routes)]
		// The stream as installation A reads it; a fuzzed rebind that was
		// accepted may have bound it to another, and then A reads nothing.
		state := func() (siteprotocol.StreamState, bool) {
			r := s.Call(t, http.MethodGet, "/site/v1/streams/alpha-k8s", s.alphaKey, installA, nil)
			if r.Status != http.StatusOK {
				return siteprotocol.StreamState{}, false
			}
			return executiontest.Decode[siteprotocol.StreamState](t, r), true
		}
		before, readable := state()
		reply := s.Call(t, r.method, r.path, r.key, r.installation, body)
		switch {
		case reply.Status >= 500:
			t.Fatalf("%s %s %q: %s", r.method, r.path, body, reply)
		case reply.Status >= 400:
			if reply.Reason() == "" {
				t.Fatalf("%s %s %q: %s is not a problem with a reason", r.method, r.path, body, reply)
			}
			if after, ok := state(); readable && (!ok || after != before) {
				t.Fatalf("%s %s %q was refused (%s) but the stream moved from %+v to %+v", r.method, r.path, body, reply, before, after)
			}
		}
	})
}

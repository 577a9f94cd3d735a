package executionports_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/httpapi"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// A plan whose owner fails answers a fixed sentence naming the owner; the
// transport's or the remote's text never reaches the answer.
func TestAnUnavailablePlanNeverEchoesTheOwnersError(t *testing.T) {
	secret := "failed to connect to `user=postgres database=trial_api`: 127.0.0.1:5432 SQLSTATE 3D000"
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, secret, http.StatusInternalServerError)
	}))
	defer owner.Close()
	for name, url := range map[string]string{"failing owner": owner.URL, "unreachable owner": "http://127.0.0.1:1"} {
		t.Run(name, func(t *testing.T) {
			s := startServer(t, options{ownerURL: url})
			r := s.call(t, http.MethodPost, "/execution/v1/plans", s.serviceKey, "", []byte(`{"project":"`+uuid(7)+`","environment":"alpha-k8s","demand":{"cpu":1000}}`))
			wantStatus(t, r, http.StatusOK, "")
			p := decode[map[string]any](t, r)
			if p["answer"] != "unavailable" || p["detail"] != httpapi.UnavailableDetail {
				t.Fatalf("plan: %s", r)
			}
			for _, leak := range []string{"trial_api", "SQLSTATE", "5432", "127.0.0.1", "refused", "500", "GET "} {
				if strings.Contains(string(r.Body), leak) {
					t.Errorf("the answer leaks %q: %s", leak, r)
				}
			}
		})
	}
}

// Only a pull binds a stream: a result from an installation on an unbound
// stream (never pulled, or unbound by an operator) is refused and binds
// nothing.
func TestAResultNeverBindsAnUnboundStream(t *testing.T) {
	s := startServer(t, options{})
	wantStatus(t, s.appendCommand(t, "alpha-k8s", observe(1, issued)), http.StatusCreated, "")
	wantStatus(t, s.appendCommand(t, "alpha-k8s", observe(2, issued)), http.StatusCreated, "")
	page := decode[siteprotocol.Pull](t, s.call(t, http.MethodGet, "/site/v1/streams/alpha-k8s/commands?after=0&bind=false", s.alphaKey, installA, nil))
	r1, r2 := resultFor(t, page.Commands[0], "one"), resultFor(t, page.Commands[1], "two")

	wantStatus(t, s.ack(t, "alpha-k8s", s.alphaKey, installB, 1, r1), http.StatusConflict, siteprotocol.ProblemInstallationMismatch)
	if st := s.state(t, "alpha-k8s", s.alphaKey, installA); st.InstallationID != "" || st.AcknowledgedSequence != 0 {
		t.Fatalf("a result on an unbound stream changed it: %+v", st)
	}
	wantStatus(t, s.pull(t, "alpha-k8s", s.alphaKey, installA, 0, 10, 0), http.StatusOK, "")
	wantStatus(t, s.ack(t, "alpha-k8s", s.alphaKey, installA, 1, r1), http.StatusOK, "")

	// After an operator's unbind the same holds, and the binding records
	// the unbind as "unbound".
	rb := s.rebind(t, "alpha-k8s", `{"unbind":true,"reason":"Runtime uninstalled"}`)
	wantStatus(t, rb, http.StatusOK, "")
	if b := decode[struct {
		Binding struct {
			Action string `json:"action"`
		} `json:"binding"`
	}](t, rb); b.Binding.Action != "unbound" {
		t.Fatalf("unbind recorded as %q: %s", b.Binding.Action, rb)
	}
	wantStatus(t, s.ack(t, "alpha-k8s", s.alphaKey, installB, 2, r2), http.StatusConflict, siteprotocol.ProblemInstallationMismatch)
	if st := s.state(t, "alpha-k8s", s.alphaKey, installA); st.InstallationID != "" || st.AcknowledgedSequence != 1 {
		t.Fatalf("a result after the unbind changed the stream: %+v", st)
	}
}

// A result whose body names another sequence than the path is an identity
// mismatch, also when the path's sequence is already acknowledged.
func TestAResultForAnotherSequenceIsAnIdentityMismatch(t *testing.T) {
	s := startServer(t, options{})
	wantStatus(t, s.appendCommand(t, "alpha-k8s", observe(1, issued)), http.StatusCreated, "")
	wantStatus(t, s.appendCommand(t, "alpha-k8s", observe(2, issued)), http.StatusCreated, "")
	page := decode[siteprotocol.Pull](t, s.pull(t, "alpha-k8s", s.alphaKey, installA, 0, 10, 0))
	r1, r2 := resultFor(t, page.Commands[0], "one"), resultFor(t, page.Commands[1], "two")
	wantStatus(t, s.ack(t, "alpha-k8s", s.alphaKey, installA, 1, r1), http.StatusOK, "")
	wantStatus(t, s.ack(t, "alpha-k8s", s.alphaKey, installA, 1, r2), http.StatusConflict, siteprotocol.ProblemIdentityMismatch)
}

// Bodies of exactly the protocol's limit are read; one byte more is 413
// naming the protocol's limit, not the limit plus one.
func TestBodyLimitsAreTheProtocols(t *testing.T) {
	s := startServer(t, options{})
	for name, tc := range map[string]struct {
		path, key, installation string
		method                  string
		limit                   int
	}{
		"append": {"/execution/v1/streams/alpha-k8s/commands", s.serviceKey, "", http.MethodPost, siteprotocol.MaxCommandBytes},
		"result": {"/site/v1/streams/alpha-k8s/commands/1/result", s.alphaKey, installA, http.MethodPut, httpapi.MaxResultBytes},
		"plan":   {"/execution/v1/plans", s.serviceKey, "", http.MethodPost, httpapi.MaxRequestBytes},
		"rebind": {"/execution/v1/streams/alpha-k8s/rebind", s.serviceKey, "", http.MethodPost, httpapi.MaxRequestBytes},
	} {
		t.Run(name, func(t *testing.T) {
			exact := append([]byte(`"`), bytes.Repeat([]byte("a"), tc.limit-2)...)
			exact = append(exact, '"')
			r, _ := s.send(t, tc.method, tc.path, tc.key, tc.installation, "application/json", exact)
			if r.Status == http.StatusRequestEntityTooLarge {
				t.Fatalf("a body of exactly %d bytes: %s", tc.limit, r)
			}
			r, _ = s.send(t, tc.method, tc.path, tc.key, tc.installation, "application/json", append(exact, ' '))
			wantStatus(t, r, http.StatusRequestEntityTooLarge, "payload-too-large")
			if want := strconv.Itoa(tc.limit) + " bytes"; !strings.Contains(string(r.Body), want) || strings.Contains(string(r.Body), strconv.Itoa(tc.limit+1)) {
				t.Fatalf("413 does not name the limit %d: %s", tc.limit, r)
			}
		})
	}
}

// Messages name the member and the rule in plain words: no Go type names,
// no library text, no echo of the whole body or enclosing object.
func TestProblemsArePlainAndLocated(t *testing.T) {
	s := startServer(t, options{})
	observeCmd := string(observe(1, issued))
	for name, tc := range map[string]struct {
		path     string
		body     string
		status   int
		location string
		forbid   []string
	}{
		"payload of the wrong type": {"/execution/v1/streams/alpha-k8s/commands", strings.Replace(observeCmd, `{`, `{"payload":"x",`, 1), 422, "body.payload", []string{"siteprotocol", "Go value", "EmptyPayload"}},
		"a number out of range":     {"/execution/v1/streams/alpha-k8s/commands", strings.Replace(observeCmd, `{`, `{"payload":{"x":1e400},`, 1), 0, "", []string{"strconv", "ParseFloat"}},
		"an overflowing demand":     {"/execution/v1/plans", `{"project":"` + uuid(7) + `","environment":"alpha-k8s","demand":{"cpu":99999999999999999999999}}`, 422, "body.demand.cpu", []string{uuid(7), "alpha-k8s"}},
		"an unknown plan member":    {"/execution/v1/plans", `{"project":"` + uuid(7) + `","environment":"alpha-k8s","demand":{"cpu":1},"colour":"blue"}`, 422, "body.colour", []string{uuid(7)}},
		"an unknown rebind member":  {"/execution/v1/streams/alpha-k8s/rebind", `{"installation_id":"` + installB + `","reason":"x","force":true}`, 422, "body.force", []string{installB}},
	} {
		t.Run(name, func(t *testing.T) {
			r := s.call(t, http.MethodPost, tc.path, s.serviceKey, "", []byte(tc.body))
			if tc.status != 0 && r.Status != tc.status || r.Status < 400 || r.Status >= 500 {
				t.Fatalf("got %s, want %d", r, tc.status)
			}
			for _, f := range tc.forbid {
				if strings.Contains(string(r.Body), f) {
					t.Errorf("the problem shows %q: %s", f, r)
				}
			}
			if tc.location != "" && !strings.Contains(string(r.Body), `"location":"`+tc.location+`"`) {
				t.Errorf("no error located at %s: %s", tc.location, r)
			}
		})
	}
}

// A too_large CPU demand shows whole cores (the design's comparison: the
// demand rounded up, the limit rounded down) and the millicores as given.
func TestATooLargeCPUDemandShowsItsMillicores(t *testing.T) {
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"allocations":[{"id":"g","site":"alpha","lifecycle":"ready","fresh":true,"applied_limits":{"cpu":32000}}]}`))
	}))
	defer owner.Close()
	s := startServer(t, options{ownerURL: owner.URL})
	r := s.call(t, http.MethodPost, "/execution/v1/plans", s.serviceKey, "", []byte(`{"project":"`+uuid(7)+`","environment":"alpha-k8s","demand":{"cpu":32001}}`))
	wantStatus(t, r, http.StatusOK, "")
	p := decode[httpapi.PlanBody](t, r)
	want := httpapi.Excess{Resource: "cpu", Unit: "cores", Demand: 33, Limit: 32, CanonicalUnit: "millicores", CanonicalDemand: 32001, CanonicalLimit: 32000}
	if p.Reason != "too_large" || len(p.TooLarge) != 1 || p.TooLarge[0] != want {
		t.Fatalf("plan: %s", r)
	}
}

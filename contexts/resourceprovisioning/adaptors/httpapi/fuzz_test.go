package httpapi_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/platform/fuzzlane"
)

// fuzzBody posts each fuzzed body to path with key on one API over SQLite
// and fails on any 5xx, on an answer that is not 2xx or a problem
// document, and on a refused body that stored something (an allocation, a
// change); docs/resource-provisioning.md#bad-input.
func fuzzBody(f *testing.F, path, key string, seeds ...string) {
	fuzzlane.Mark(f)
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	h := newHarness(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		before := h.count(t)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, h.base+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		switch {
		case res.StatusCode >= 500:
			t.Fatalf("%q: %d %s", body, res.StatusCode, raw)
		case res.StatusCode >= 400:
			if !strings.HasPrefix(res.Header.Get("Content-Type"), "application/problem+json") {
				t.Fatalf("%q: %d is not a problem document: %s", body, res.StatusCode, raw)
			}
			if after := h.count(t); after != before {
				t.Fatalf("%q was refused (%d %s) but the store moved from %v to %v", body, res.StatusCode, raw, before, after)
			}
		case res.StatusCode != 200:
			t.Fatalf("%q: %d %s", body, res.StatusCode, raw)
		}
	})
}

// count is how many allocations and changes the store holds.
func (h *harness) count(t *testing.T) [2]int {
	a, err := h.svc.Allocations(t.Context(), "", application.MaxPageLimit)
	if err != nil {
		t.Fatal(err)
	}
	c, err := h.svc.Changes(t.Context(), 0, application.MaxPageLimit)
	if err != nil {
		t.Fatal(err)
	}
	return [2]int{len(a.Allocations), len(c.Changes)}
}

// FuzzReportBody fuzzes the report intake's body.
func FuzzReportBody(f *testing.F) {
	fuzzBody(f, "/alpha/reports", "alpha",
		reports(report("r1")),
		reports(report("r1")+`,"applied_limits":{"cpu":1000},"native_scope":"ns"`),
		reports(strings.Replace(report("r1"), `{"cpu":1000}`, `{"cpu":1.5,"ram":5,"memory":-1}`, 1)+`,"applied_limits":{"memory":1e30}`),
		reports(strings.Replace(report("r1"), `"OK"`, `"Terminated"`, 1)),
		`{"reports":[]}`, `{"reports":null}`, `[]`, `{"reports":[{`)
}

// FuzzBetoEventBody fuzzes the Beto event intake's body.
func FuzzBetoEventBody(f *testing.F) {
	fuzzBody(f, "/events/beto", "beto",
		event,
		strings.Replace(event, `"provider_bindings":[]`, `"provider_bindings":[{"provider":"waldur","instance":"https://waldur.example.org","external_id":"pp"}]`, 1),
		`{"event_id":"e2","type":"party.PartyProviderBindingChanged","occurred_at":"2026-08-20T10:00:00Z","binding":{"id":"e41f0a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b","party_id":"9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d","revision":1,"provider":"site","instance":"alpha-k8s","external_id":"alice","state":"verified","generation":1}}`,
		strings.Replace(event, `"revision":1`, `"revision":1.5`, 1))
}

// FuzzAccountsBody fuzzes the account report intake's body.
func FuzzAccountsBody(f *testing.F) {
	fuzzBody(f, "/alpha/accounts", "alpha",
		`{"provider_resource_id":"r1","observed_at":"2026-08-20T10:00:00Z","accounts":[]}`,
		`{"provider_resource_id":"r1","observed_at":"2026-08-20T10:00:00Z","accounts":[{"party_id":"9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d","account":"member-9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d","uid":"u1","binding_id":"edf0dbce-a8c3-5a1d-8d34-0e0ff66583ab","generation":1,"state":"ready"}]}`)
}

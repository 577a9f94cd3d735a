package httpapi_test

import (
	"slices"
	"strings"
	"testing"
)

// TestOne422NamesEveryBadField: numbers that do not fit their integer
// field, schema failures (a wrong type, an enum) and the intake's own rules
// (a negative amount, an unknown limit key, an ID that is not a UUID, the
// clock skew) are named together in one 422, each at its location, and
// nothing is stored (docs/resource-provisioning.md#bad-input).
func TestOne422NamesEveryBadField(t *testing.T) {
	h := newHarness(t)
	withLimits := func(limits, applied string) string {
		return reports(strings.Replace(report("r1"), `{"cpu":1000}`, limits, 1) + `,"applied_limits":` + applied)
	}
	account := `{"party_id":"9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d","account":"member-9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d","uid":"u1",` +
		`"binding_id":"edf0dbce-a8c3-5a1d-8d34-0e0ff66583ab","generation":1,"state":"ready"}`
	for _, c := range []struct {
		name, path, key, body string
		want                  []string
	}{
		{"two fractions", "/alpha/reports", "alpha", withLimits(`{"cpu":1.5}`, `{"memory":1.5}`),
			[]string{"body.reports[0].limits.cpu", "body.reports[0].applied_limits.memory"}},
		{"fractions beside a negative amount and an unknown key", "/alpha/reports", "alpha", withLimits(`{"cpu":1.5,"ram":5,"memory":-1}`, `{"memory":1e30}`),
			[]string{"body.reports[0].limits.cpu", "body.reports[0].applied_limits.memory", "body.reports[0].limits.memory", "body.reports[0].limits.ram"}},
		{"a wrong type and an enum beside the domain's rules", "/alpha/reports", "alpha",
			strings.Replace(withLimits(`{"cpu":"x","ram":5,"memory":-1}`, `{"memory":100000000000000000000}`), `"OK"`, `"Running"`, 1),
			[]string{"body.reports[0].limits.cpu", "body.reports[0].state", "body.reports[0].applied_limits.memory", "body.reports[0].limits.memory", "body.reports[0].limits.ram"}},
		{"two reports, beyond the clock skew", "/alpha/reports", "alpha",
			`{"reports":[{` + strings.Replace(report("r1"), `10:00:00Z`, `11:00:00Z`, 1) + `},{` + strings.Replace(report("r2"), `{"cpu":1000}`, `{"cpu":1e3}`, 1) + `}]}`,
			[]string{"body.reports[0].observed_at", "body.reports[1].limits.cpu"}},
		{"event: a fraction beside an ID that is not a UUID", "/events/beto", "beto",
			strings.Replace(strings.Replace(event, `"revision":1`, `"revision":1.5`, 1), "9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d", "party-1", 1),
			[]string{"body.project.revision", "body.project.memberships[0].party_id"}},
		{"accounts: a generation beyond 64 bits beside a bad state and account name", "/alpha/accounts", "alpha",
			`{"provider_resource_id":"r1","observed_at":"2026-08-20T10:00:00Z","accounts":[` +
				strings.Replace(strings.Replace(account, `"generation":1`, `"generation":18446744073709551616`, 1), `"ready"`, `"done"`, 1) + `,` +
				strings.Replace(strings.Replace(account, "9c2e5d1a", "1c2e5d1a", 1), `"uid":"u1"`, `"uid":"u2"`, 1) + `]}`,
			[]string{"body.accounts[0].generation", "body.accounts[0].state", "body.accounts[1].account"}},
		{"member names in another case (encoding/json would fold them)", "/alpha/reports", "alpha",
			`{"Reports":[{` + strings.Replace(report("r1"), `"provider_resource_id"`, `"Provider_Resource_ID"`, 1) + `}]}`,
			[]string{"body.Reports"}},
		{"a report's member in another case", "/alpha/reports", "alpha",
			reports(strings.Replace(report("r1"), `"provider_resource_id"`, `"Provider_Resource_ID"`, 1)),
			[]string{"body.reports[0].Provider_Resource_ID"}},
		{"event: its type and revision in another case", "/events/beto", "beto",
			strings.Replace(strings.Replace(event, `"type"`, `"Type"`, 1), `"revision"`, `"Revision"`, 1),
			[]string{"body.Type", "body.project.Revision"}},
	} {
		code, p, raw := h.send(t, c.path, c.key, c.body)
		if code != 422 || p.Reason != "validation-failed" {
			t.Errorf("%s: %d %q, want 422 validation-failed: %s", c.name, code, p.Reason, raw)
			continue
		}
		var got []string
		for _, e := range p.Errors {
			got = append(got, e.Location)
		}
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("%s: no error at %s: %s", c.name, w, raw)
			}
		}
	}
	if a, ch := h.stored(t); a != 0 || ch != 0 {
		t.Fatalf("refused bodies stored %d allocations and %d changes", a, ch)
	}
}

package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

const (
	party     = "9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"
	siteBound = "e41f0a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b"
)

var memberBinding = domain.BindingKey{PartyID: party, ProjectID: project, Environment: "alpha-k8s"}.ID()

// accountsBody is an account report of resource r1 observed at `at` with
// accounts (JSON members without brackets).
func accountsBody(at, accounts string) string {
	return `{"provider_resource_id":"r1","observed_at":"` + at + `","accounts":[` + accounts + `]}`
}

func account(uid string, gen int) string {
	return fmt.Sprintf(`{"party_id":%q,"account":"member-%s","uid":%q,"binding_id":%q,"generation":%d,"state":"ready"}`, party, party, uid, memberBinding, gen)
}

// bound posts a verified site binding of party at alpha-k8s (username
// alice), the Project with party as member bound to Waldur Project pp, and
// a report of allocation r1 in pp.
func (h *harness) bound(t *testing.T) {
	t.Helper()
	for _, body := range []string{
		`{"event_id":"b1","type":"party.PartyProviderBindingChanged","occurred_at":"2026-08-20T09:00:00Z","binding":{"id":"` + siteBound +
			`","party_id":"` + party + `","revision":1,"provider":"site","instance":"alpha-k8s","external_id":"alice","state":"verified","generation":1}}`,
		`{"event_id":"p1","type":"project.ProjectChanged","occurred_at":"2026-08-20T09:00:00Z","project":{"id":"` + project +
			`","revision":1,"state":"active","provider_bindings":[{"provider":"waldur","instance":"https://waldur.example.org","external_id":"pp"}],` +
			`"memberships":[{"party_id":"` + party + `","role":"member"}]}}`,
	} {
		if code, _, raw := h.send(t, "/events/beto", "beto", body); code != 200 {
			t.Fatalf("event: %d %s", code, raw)
		}
	}
	if code, _, raw := h.send(t, "/alpha/reports", "alpha", reports(strings.Replace(report("r1"), "10:00:00Z", "09:59:00Z", 1))); code != 200 {
		t.Fatalf("report: %d %s", code, raw)
	}
}

// TestAgentAccountsAndLookupOverHTTP: the agent looks a username up, posts
// its accounts, Execution reads the ready account and the desired
// bindings, and the feed carries the binding's revisions.
func TestAgentAccountsAndLookupOverHTTP(t *testing.T) {
	h := newHarness(t)
	h.bound(t)
	var lookup struct {
		State      string
		Reasons    []string
		BindingID  string `json:"binding_id"`
		Generation int64
		Revision   int64
		Account    string
		ProjectID  string `json:"project_id"`
		PartyID    string `json:"party_id"`
	}
	code, _, raw := h.send(t, "/alpha/account-lookup?username=alice&provider_project=pp", "alpha", "")
	if code != 200 || json.Unmarshal(raw, &lookup) != nil || lookup.State != "bound" || lookup.BindingID != memberBinding || lookup.Generation != 1 ||
		lookup.Revision != 1 || lookup.ProjectID != project || lookup.PartyID != party || lookup.Account != "member-"+party {
		t.Fatalf("lookup (alpha has one environment): %d %s", code, raw)
	}
	var res struct {
		Outcome  string
		Revision int64
		Accounts []struct {
			Current           bool
			BindingState      string `json:"binding_state"`
			BindingGeneration int64  `json:"binding_generation"`
		}
	}
	code, _, raw = h.send(t, "/alpha/accounts", "alpha", accountsBody("2026-08-20T10:00:00Z", account("uid-1", 1)))
	if code != 200 || json.Unmarshal(raw, &res) != nil || res.Outcome != "created" || len(res.Accounts) != 1 || !res.Accounts[0].Current || res.Accounts[0].BindingState != "ready" {
		t.Fatalf("account report: %d %s", code, raw)
	}
	var accounts struct {
		Accounts []struct {
			UID, State, Site, Environment string
			Fresh                         bool
		}
	}
	code, _, raw = h.send(t, "/projects/"+project+"/accounts?site=alpha&party="+party, "exec", "")
	if code != 200 || json.Unmarshal(raw, &accounts) != nil || len(accounts.Accounts) != 1 || accounts.Accounts[0].UID != "uid-1" ||
		accounts.Accounts[0].State != "ready" || !accounts.Accounts[0].Fresh || accounts.Accounts[0].Site != "alpha" {
		t.Fatalf("ready accounts: %d %s", code, raw)
	}
	var desired struct {
		Site    string
		Entries []struct {
			Binding *struct {
				BindingID  string `json:"binding_id"`
				Namespace  string
				AccountUID string `json:"account_uid"`
				Revision   int64
			}
		}
		ChangesCursor string `json:"changes_cursor"`
	}
	code, _, raw = h.send(t, "/environments/alpha-k8s/bindings", "exec", "")
	if code != 200 || json.Unmarshal(raw, &desired) != nil || desired.Site != "alpha" || len(desired.Entries) != 1 || desired.Entries[0].Binding == nil ||
		desired.Entries[0].Binding.AccountUID != "uid-1" || desired.Entries[0].Binding.Namespace != "" || desired.Entries[0].Binding.Revision != 2 || desired.ChangesCursor == "" {
		t.Fatalf("desired bindings: %d %s", code, raw)
	}
	var feed struct {
		Changes []struct {
			Type       string
			Allocation *struct {
				AllocationID string `json:"allocation_id"`
			}
			Binding *struct {
				BindingID string `json:"binding_id"`
				Revision  int64
				State     string
			}
		}
	}
	code, _, raw = h.send(t, "/changes", "exec", "")
	if code != 200 || json.Unmarshal(raw, &feed) != nil {
		t.Fatalf("feed: %d %s", code, raw)
	}
	var kinds []string
	for _, c := range feed.Changes {
		switch {
		case c.Type == "AllocationChanged" && c.Allocation != nil && c.Binding == nil:
			kinds = append(kinds, "allocation")
		case c.Type == "MemberBindingChanged" && c.Binding != nil && c.Allocation == nil && c.Binding.BindingID == memberBinding:
			kinds = append(kinds, fmt.Sprintf("binding %d %s", c.Binding.Revision, c.Binding.State))
		default:
			t.Fatalf("feed entry %+v: %s", c, raw)
		}
	}
	if strings.Join(kinds, ", ") != "binding 1 pending, allocation, binding 2 ready" {
		t.Fatalf("feed %v", kinds)
	}
	// Out of order: the older report second is stale and changes nothing.
	code, p, raw := h.send(t, "/alpha/accounts", "alpha", accountsBody("2026-08-20T09:59:59Z", account("uid-0", 1)))
	if code != 409 || p.Reason != "stale_report" || p.Errors[0].Location != "body.observed_at" {
		t.Fatalf("older report: %d %s", code, raw)
	}
	var evidence struct {
		Accounts []struct{ UID, State string }
	}
	code, _, raw = h.send(t, "/allocations/"+domain.AllocationID("alpha", "r1")+"/accounts", "exec", "")
	if code != 200 || json.Unmarshal(raw, &evidence) != nil || len(evidence.Accounts) != 1 || evidence.Accounts[0].UID != "uid-1" || evidence.Accounts[0].State != "ready" {
		t.Fatalf("allocation accounts: %d %s", code, raw)
	}
	h.check(t, []bodyCase{
		{"an environment not configured", "/environments/gamma-k8s/bindings", "exec", "", 404, "unknown-environment", ""},
		{"a forged binding cursor", "/environments/alpha-k8s/bindings?cursor=YjE6eA", "exec", "", 400, "invalid-cursor", "query.cursor"},
		{"another Site's environment in a lookup", "/alpha/account-lookup?environment=beta-k8s&username=alice&provider_project=pp", "alpha", "", 422, "validation-failed", "query.environment"},
		{"a lookup without its parameters", "/alpha/account-lookup", "alpha", "", 422, "validation-failed", "query.provider_project"},
		{"an allocation ID that is not one", "/allocations/r1/accounts", "exec", "", 422, "validation-failed", "path.allocation"},
		{"a party that is not a canonical ID", "/projects/" + project + "/accounts?party=bob", "exec", "", 422, "validation-failed", "query.party"},
		{"an account naming an unknown binding", "/alpha/accounts", "alpha", accountsBody("2026-08-20T10:00:01Z", strings.Replace(account("uid-1", 1), memberBinding, "11111111-1111-4111-8111-111111111111", 1)), 409, "binding_mismatch", "body.accounts[0].binding_id"},
		{"an unknown allocation", "/alpha/accounts", "alpha", strings.Replace(accountsBody("2026-08-20T10:00:01Z", ""), `"r1"`, `"r9"`, 1), 409, "allocation_unknown", "body.provider_resource_id"},
	})
}

// TestAnAccountReportNamesEveryBadFieldAndStoresNothing: one 422 lists
// every bad field, the domain's and the body's alike.
func TestAnAccountReportNamesEveryBadFieldAndStoresNothing(t *testing.T) {
	h := newHarness(t)
	h.bound(t)
	body := `{"provider_resource_id":"","observed_at":"2026-08-20T10:00:00.0000001Z","accounts":[` +
		`{"party_id":"` + party + `","account":"member-bob","uid":"","binding_id":"B","generation":0,"state":"gone"},` +
		account("uid-2", 1) + `]}`
	code, p, raw := h.send(t, "/alpha/accounts", "alpha", body)
	if code != 422 || p.Reason != "validation-failed" {
		t.Fatalf("%d %s", code, raw)
	}
	got := map[string]bool{}
	for _, e := range p.Errors {
		got[e.Location] = true
	}
	for _, want := range []string{"body.provider_resource_id", "body.observed_at", "body.accounts[0].account", "body.accounts[0].uid",
		"body.accounts[0].binding_id", "body.accounts[0].generation", "body.accounts[0].state", "body.accounts[1].party_id"} {
		if !got[want] {
			t.Errorf("no error at %s: %s", want, raw)
		}
	}
	code, _, raw = h.send(t, "/allocations/"+domain.AllocationID("alpha", "r1")+"/accounts", "exec", "")
	if code != 200 || !strings.Contains(string(raw), `"accounts":[]`) {
		t.Fatalf("a refused report stored accounts: %d %s", code, raw)
	}
	h.check(t, []bodyCase{
		{"a null in an account", "/alpha/accounts", "alpha", accountsBody("2026-08-20T10:00:00Z", strings.Replace(account("u", 1), `"state":"ready"`, `"state":null`, 1)), 422, "validation-failed", "body.accounts[0].state"},
		{"a member named twice", "/alpha/accounts", "alpha", accountsBody("2026-08-20T10:00:00Z", strings.Replace(account("u", 1), `"uid":"u"`, `"uid":"u","uid":"v"`, 1)), 400, "malformed", "body.accounts[0].uid"},
		{"a generation with a fraction", "/alpha/accounts", "alpha", accountsBody("2026-08-20T10:00:00Z", strings.Replace(account("u", 1), `"generation":1`, `"generation":1.5`, 1)), 422, "validation-failed", "body.accounts[0].generation"},
		{"an unknown member", "/alpha/accounts", "alpha", accountsBody("2026-08-20T10:00:00Z", strings.Replace(account("u", 1), `"state"`, `"colour":"red","state"`, 1)), 422, "validation-failed", "body.accounts[0].colour"},
	})
}

// TestOnlyTheSitesOwnKeyReachesItsAccountRoutes: another Site's key, a
// service key or an environment key is 403 before the body is read; a Site
// key cannot read the desired bindings or the accounts.
func TestOnlyTheSitesOwnKeyReachesItsAccountRoutes(t *testing.T) {
	h := newHarness(t)
	for what, body := range map[string]string{"malformed": `{"accounts":[`, "null": `{"accounts":null}`, "valid": accountsBody("2026-08-20T10:00:00Z", "")} {
		h.check(t, []bodyCase{
			{"site beta to alpha's accounts, " + what, "/alpha/accounts", "beta", body, 403, "forbidden", ""},
			{"a service key to accounts, " + what, "/alpha/accounts", "exec", body, 403, "forbidden", ""},
			{"an environment key to accounts, " + what, "/alpha/accounts", "env", body, 403, "forbidden", ""},
		})
	}
	h.check(t, []bodyCase{
		{"site beta looking up at alpha", "/alpha/account-lookup?username=alice&provider_project=pp", "beta", "", 403, "forbidden", ""},
		{"a service key looking up", "/alpha/account-lookup?username=alice&provider_project=pp", "exec", "", 403, "forbidden", ""},
		{"a site key on desired bindings", "/environments/alpha-k8s/bindings", "alpha", "", 403, "forbidden", ""},
		{"an environment key on desired bindings", "/environments/alpha-k8s/bindings", "env", "", 403, "forbidden", ""},
		{"a site key on a Project's accounts", "/projects/" + project + "/accounts", "alpha", "", 403, "forbidden", ""},
		{"a site key on an allocation's accounts", "/allocations/" + domain.AllocationID("alpha", "r1") + "/accounts", "alpha", "", 403, "forbidden", ""},
	})
	if a, c := h.stored(t); a != 0 || c != 0 {
		t.Fatalf("refused requests stored %d allocations and %d changes", a, c)
	}
}

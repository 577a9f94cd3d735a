package app

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap/zaptest"

	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/httpserver"
)

// A member at a Slurm environment, through both central roles in one
// process and the execution role's delivery
// (docs/resource-provisioning.md#member-identity-at-a-slurm-environment,
// docs/site-protocol.md#member-identity-by-backend): a Party whose verified
// site binding at alpha-hpc names jdoe gets, after the agent's account
// report (jdoe, uid 1001), a delivered bind-member naming jdoe and 1001;
// an account report naming member-<party> there is 422 naming the field;
// a second Party whose site binding names jdoe too is listed with a reason
// and nothing is delivered for it. The Site's agent is the test (outside
// the project).

// slurmParty is the second Party naming jdoe.
const slurmParty = "1d3e6f2b-1c8a-4f4d-9b7e-3a2f1d0c9b8e"

// slurmCommand is a command of a stream as the read-only pull serves it.
type slurmCommand struct {
	Operation string `json:"operation"`
	MemberID  string `json:"member_id"`
	Payload   struct {
		Account    string `json:"account"`
		AccountUID string `json:"account_uid"`
		Namespace  string `json:"namespace"`
		BindingID  string `json:"binding_id"`
	} `json:"payload"`
}

func TestASlurmMemberIsItsSiteUsernameWithItsUnixUIDThroughDelivery(t *testing.T) {
	dir := t.TempDir()
	files := executiontest.WriteFiles(t, dir, []executiontest.Environment{{ID: "alpha-hpc", Site: "alpha", Authority: "https://metallo.example.org", Backend: "slurm"}},
		"site:alpha", "service:beto")
	clk := clock.NewManual(time.Date(2026, 8, 20, 10, 30, 0, 0, time.UTC))
	roles := []Role{
		configured(t, ProvisioningRole(), "--provisioning-database-url", "sqlite:"+filepath.Join(dir, "provisioning.sqlite"), "--waldur-instance", waldurInstance),
		configured(t, ExecutionRole(), "--execution-database-url", "sqlite:"+filepath.Join(dir, "execution.sqlite"), "--resource-owner", "in-process",
			"--binding-delivery-interval", "1h", "--binding-feed-interval", "50ms"),
	}
	var srv *httpserver.Server
	app := fxtest.New(t,
		Compose(roles, Common{Listen: "127.0.0.1:0", KeysFile: files.KeysFile, EnvironmentsFile: files.EnvironmentsFile, Migrate: true}, zaptest.NewLogger(t)),
		fx.Decorate(func(clock.Clock) clock.Clock { return clk }),
		fx.Populate(&srv),
	)
	app.RequireStart()
	defer app.RequireStop()
	c := executiontest.Client{Base: "http://" + srv.Addr()}
	beto, site := files.ExtraKeys["service:beto"], files.ExtraKeys["site:alpha"]
	siteBinding := func(event, id, party, at string) string {
		return `{"event_id":"` + event + `","type":"party.PartyProviderBindingChanged","occurred_at":"` + at + `","binding":{"id":"` + id + `",` +
			`"party_id":"` + party + `","revision":1,"provider":"site","instance":"alpha-hpc","external_id":"jdoe","state":"verified","generation":1}}`
	}
	for _, ev := range []string{
		siteBinding("b1", "e41f0a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b", memberParty, "2026-08-20T10:00:00Z"),
		`{"event_id":"p1","type":"project.ProjectChanged","occurred_at":"2026-08-20T10:00:00Z","project":{"id":"` + memberProject + `","revision":1,"state":"active",` +
			`"provider_bindings":[{"provider":"waldur","instance":"` + waldurInstance + `","external_id":"` + memberWaldur + `"}],` +
			`"memberships":[{"party_id":"` + memberParty + `","role":"member"},{"party_id":"` + slurmParty + `","role":"member"}]}}`,
	} {
		executiontest.Want(t, c.Call(t, http.MethodPost, "/resource-provisioning/events/beto", beto, "", []byte(ev)), http.StatusOK, "")
	}
	executiontest.Want(t, c.Call(t, http.MethodPost, "/resource-provisioning/alpha/reports", site, "", []byte(`{"reports":[{"provider_resource_id":"r1","offering_id":"o",`+
		`"provider_project_id":"`+memberWaldur+`","state":"OK","paused":false,"limits":{"cpu":1000},"applied_limits":{"cpu":1000},"native_scope":"proj-a","observed_at":"2026-08-20T10:29:00Z"}]}`)), http.StatusOK, "")
	r := c.Call(t, http.MethodGet, "/resource-provisioning/alpha/account-lookup?username=jdoe&provider_project="+memberWaldur, site, "", nil)
	executiontest.Want(t, r, http.StatusOK, "")
	lookup := executiontest.Decode[struct {
		State     string `json:"state"`
		Account   string `json:"account"`
		BindingID string `json:"binding_id"`
	}](t, r)
	if lookup.State != "bound" || lookup.Account != "jdoe" {
		t.Fatalf("lookup of jdoe: %s", r)
	}
	report := func(at, account, uid string) []byte {
		return fmt.Appendf(nil, `{"provider_resource_id":"r1","observed_at":%q,"accounts":[{"party_id":%q,"account":%q,"uid":%q,"binding_id":%q,"generation":1,"state":"ready"}]}`,
			at, memberParty, account, uid, lookup.BindingID)
	}
	r = c.Call(t, http.MethodPost, "/resource-provisioning/alpha/accounts", site, "", report("2026-08-20T10:29:30Z", "member-"+memberParty, "1001"))
	executiontest.Want(t, r, http.StatusUnprocessableEntity, "validation-failed")
	if !strings.Contains(string(r.Body), "body.accounts[0].account") {
		t.Fatalf("member-<party> at a slurm environment: %s, want the field named", r)
	}
	// The second Party's site binding names jdoe too.
	executiontest.Want(t, c.Call(t, http.MethodPost, "/resource-provisioning/events/beto", beto, "",
		[]byte(siteBinding("b2", "f52a1b3c-4d5e-4f6a-9b0c-1d2e3f4a5b6c", slurmParty, "2026-08-20T10:01:00Z"))), http.StatusOK, "")
	executiontest.Want(t, c.Call(t, http.MethodPost, "/resource-provisioning/alpha/accounts", site, "", report("2026-08-20T10:29:30Z", "jdoe", "1001")), http.StatusOK, "")

	envKey := files.EnvironmentKeys["alpha-hpc"]
	deadline := time.Now().Add(feedDeliveryTimeout)
	var cmds []slurmCommand
	for {
		cmds = readSlurmStream(t, c, envKey)
		if len(cmds) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(cmds) != 1 {
		t.Fatalf("alpha-hpc's stream %+v, want one bind-member", cmds)
	}
	if b := cmds[0]; b.Operation != "bind-member" || b.MemberID != memberParty || b.Payload.Account != "jdoe" || b.Payload.AccountUID != "1001" ||
		b.Payload.Namespace != "proj-a" || b.Payload.BindingID != lookup.BindingID {
		t.Fatalf("delivered %+v, want bind-member of jdoe with uid 1001 in proj-a", b)
	}
	r = c.Call(t, http.MethodGet, "/resource-provisioning/inconsistencies", files.ServiceKey, "", nil)
	executiontest.Want(t, r, http.StatusOK, "")
	conflicts := executiontest.Decode[struct {
		AccountConflicts []struct {
			PartyID string   `json:"party_id"`
			Account string   `json:"account"`
			Reasons []string `json:"reasons"`
		} `json:"account_conflicts"`
	}](t, r).AccountConflicts
	if len(conflicts) != 1 || conflicts[0].PartyID != slurmParty || conflicts[0].Account != "jdoe" || fmt.Sprint(conflicts[0].Reasons) != "[account_taken]" {
		t.Fatalf("account conflicts %+v, want the second Party on jdoe", conflicts)
	}
	// A full reconcile now (the delivery status read is one) delivers
	// nothing for the second Party.
	r = c.Call(t, http.MethodGet, "/execution/v1/streams/alpha-hpc/bindings", files.ServiceKey, "", nil)
	executiontest.Want(t, r, http.StatusOK, "")
	if cmds := readSlurmStream(t, c, envKey); len(cmds) != 1 {
		t.Fatalf("alpha-hpc's stream %+v, want only the first Party's bind-member", cmds)
	}
}

// readSlurmStream reads alpha-hpc's stream with a read-only pull.
func readSlurmStream(t *testing.T, c executiontest.Client, envKey string) []slurmCommand {
	t.Helper()
	r := c.Call(t, http.MethodGet, "/site/v1/streams/alpha-hpc/commands?after=0&limit=100&bind=false", envKey, "test-reader", nil)
	executiontest.Want(t, r, http.StatusOK, "")
	var page struct {
		Commands []slurmCommand `json:"commands"`
	}
	if err := json.Unmarshal(r.Body, &page); err != nil {
		t.Fatal(err)
	}
	return page.Commands
}

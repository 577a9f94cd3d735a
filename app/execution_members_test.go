package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap/zaptest"

	"github.com/pharos-metallo/metallo/contexts/executionports"
	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/inprocessowners"
	epapp "github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	rpapp "github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/httpserver"
)

// The member owner ports' adaptors against the real provisioning role:
// composed in the same process as the execution role (the in-process
// adaptor on its service) and as an app of its own read over HTTP (the
// adaptor the execution role builds for --resource-owner http). The ports
// are private to the execution_ports module, so the tests build the same
// adaptors from the public pieces the module builds them from.

const (
	memberParty   = "9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"
	memberProject = "7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"
	memberWaldur  = "0a1b2c3d4e5f40718293a4b5c6d7e8f9"
)

// memberUID is the i-th Kubernetes UID (a lower-case UUID, as bind-member's
// account_uid must be) of memberParty's account.
func memberUID(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

// memberPorts are the execution role's member ports.
type memberPorts struct {
	accounts epapp.MemberAccounts
	bindings epapp.MemberBindings
	feed     epapp.BindingFeed
}

// seedMembers drives the provisioning API at c as Beto and Site alpha's
// agent: a verified site binding of memberParty at alpha-k8s, its Project
// with the Party as member, an allocation, the agent's lookup and its
// account report. It returns the binding ID the lookup answered.
func seedMembers(t *testing.T, c executiontest.Client, files executiontest.Files) string {
	t.Helper()
	beto, site := files.ExtraKeys["service:beto"], files.ExtraKeys["site:alpha"]
	for _, ev := range []string{
		`{"event_id":"b1","type":"party.PartyProviderBindingChanged","occurred_at":"2026-08-20T10:00:00Z","binding":{"id":"e41f0a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b",` +
			`"party_id":"` + memberParty + `","revision":1,"provider":"site","instance":"alpha-k8s","external_id":"alice","state":"verified","generation":1}}`,
		`{"event_id":"p1","type":"project.ProjectChanged","occurred_at":"2026-08-20T10:00:00Z","project":{"id":"` + memberProject + `","revision":1,"state":"active",` +
			`"provider_bindings":[{"provider":"waldur","instance":"` + waldurInstance + `","external_id":"` + memberWaldur + `"}],"memberships":[{"party_id":"` + memberParty + `","role":"member"}]}}`,
	} {
		executiontest.Want(t, c.Call(t, http.MethodPost, "/resource-provisioning/events/beto", beto, "", []byte(ev)), http.StatusOK, "")
	}
	executiontest.Want(t, c.Call(t, http.MethodPost, "/resource-provisioning/alpha/reports", site, "", []byte(`{"reports":[{"provider_resource_id":"r1","offering_id":"o",`+
		`"provider_project_id":"`+memberWaldur+`","state":"OK","paused":false,"limits":{"cpu":1000},"applied_limits":{"cpu":1000},"native_scope":"ns-alpha","observed_at":"2026-08-20T10:29:00Z"}]}`)), http.StatusOK, "")
	r := c.Call(t, http.MethodGet, "/resource-provisioning/alpha/account-lookup?username=alice&provider_project="+memberWaldur, site, "", nil)
	executiontest.Want(t, r, http.StatusOK, "")
	lookup := executiontest.Decode[struct {
		State      string `json:"state"`
		BindingID  string `json:"binding_id"`
		Generation int64  `json:"generation"`
	}](t, r)
	if lookup.State != "bound" || lookup.Generation != 1 {
		t.Fatalf("lookup %s", r)
	}
	body := fmt.Sprintf(`{"provider_resource_id":"r1","observed_at":"2026-08-20T10:29:30Z","accounts":[{"party_id":%q,"account":"member-%s","uid":%q,"binding_id":%q,"generation":1,"state":"ready"}]}`,
		memberParty, memberParty, memberUID(1), lookup.BindingID)
	executiontest.Want(t, c.Call(t, http.MethodPost, "/resource-provisioning/alpha/accounts", site, "", []byte(body)), http.StatusOK, "")
	return lookup.BindingID
}

// checkMemberPorts asserts what the ports answer after seedMembers.
func checkMemberPorts(t *testing.T, p memberPorts, binding string) {
	t.Helper()
	ctx := context.Background()
	a, err := p.accounts.ReadyAccount(ctx, memberParty, memberProject, "alpha")
	if err != nil || a.UID != memberUID(1) || a.BindingID != binding || a.Generation != 1 || a.Namespace != "ns-alpha" || a.Environment != "alpha-k8s" || a.Account != "member-"+memberParty || !a.Fresh {
		t.Fatalf("ready account %+v %v", a, err)
	}
	var nre *epapp.NoReadyAccountError
	if _, err := p.accounts.ReadyAccount(ctx, memberParty, memberProject, "beta"); !errors.As(err, &nre) || nre.Reasons[0] != epapp.ReasonNoBinding {
		t.Fatalf("at a Site without the member's binding: %v", err)
	}
	d, err := p.bindings.DesiredBindings(ctx, "alpha-k8s")
	if err != nil || d.Site != "alpha" || d.ChangesCursor == "" || len(d.Bindings) != 1 || len(d.Unbound) != 0 {
		t.Fatalf("desired bindings %+v %v", d, err)
	}
	if b := d.Bindings[0]; b.BindingID != binding || b.Retired || b.Generation != 1 || b.Revision != 2 || b.AccountUID != memberUID(1) || b.Namespace != "ns-alpha" ||
		b.BindingID != (domain.BindingKey{PartyID: memberParty, ProjectID: memberProject, Environment: "alpha-k8s"}).ID() {
		t.Fatalf("binding %+v", b)
	}
	if _, err := p.bindings.DesiredBindings(ctx, "gamma-k8s"); !errors.Is(err, epapp.ErrResourceLookupUnavailable) {
		t.Fatalf("an environment the owner does not know: %v", err)
	}
	checkFeed(t, p.feed, binding, d.ChangesCursor)
}

// checkFeed asserts what the feed port answers after seedMembers: its head
// is the desired-binding read's changes cursor, nothing is after it, and
// from the feed's start the binding's changes come in revision order
// (allocation changes passed over); a cursor the owner did not issue is
// unavailable, never a restart.
func checkFeed(t *testing.T, feed epapp.BindingFeed, binding, changesCursor string) {
	t.Helper()
	ctx := context.Background()
	head, err := feed.FeedHead(ctx)
	if err != nil || head != changesCursor {
		t.Fatalf("feed head %q %v, want the desired read's %q", head, err, changesCursor)
	}
	if p, err := feed.BindingChanges(ctx, head); err != nil || len(p.Changes) != 0 || p.Next != head || p.More {
		t.Fatalf("after the head: %+v %v", p, err)
	}
	p, err := feed.BindingChanges(ctx, rpapp.FeedCursor(0))
	if err != nil || p.Next != head || p.More {
		t.Fatalf("from the start: %+v %v", p, err)
	}
	want := []epapp.BindingChange{{Environment: "alpha-k8s", BindingID: binding, Revision: 1}, {Environment: "alpha-k8s", BindingID: binding, Revision: 2}}
	if fmt.Sprint(p.Changes) != fmt.Sprint(want) {
		t.Fatalf("binding changes %+v, want %+v", p.Changes, want)
	}
	if _, err := feed.BindingChanges(ctx, "bm90LWEtY3Vyc29y"); !errors.Is(err, epapp.ErrResourceLookupUnavailable) {
		t.Fatalf("a cursor the owner did not issue: %v", err)
	}
}

func TestMemberPortsReadTheProvisioningRoleInProcess(t *testing.T) {
	dir := t.TempDir()
	files := executiontest.WriteFiles(t, dir, []executiontest.Environment{{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org"}},
		"site:alpha", "service:beto")
	roles := []Role{
		configured(t, ProvisioningRole(), "--provisioning-database-url", "sqlite:"+filepath.Join(dir, "provisioning.sqlite"), "--waldur-instance", waldurInstance),
		configured(t, ExecutionRole(), "--execution-database-url", "sqlite:"+filepath.Join(dir, "execution.sqlite"),
			"--resource-owner", "in-process"),
	}
	var (
		srv   *httpserver.Server
		owner *rpapp.Service
	)
	app := fxtest.New(t,
		Compose(roles, Common{Listen: "127.0.0.1:0", KeysFile: files.KeysFile, EnvironmentsFile: files.EnvironmentsFile, Migrate: true}, zaptest.NewLogger(t)),
		fx.Decorate(func(clock.Clock) clock.Clock { return clock.NewManual(time.Date(2026, 8, 20, 10, 30, 0, 0, time.UTC)) }),
		fx.Populate(&srv, &owner),
	)
	app.RequireStart()
	defer app.RequireStop()
	o, err := inprocessowners.FromFx(inprocessowners.Params{Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	p := memberPorts{accounts: o, bindings: o, feed: o}
	binding := seedMembers(t, executiontest.Client{Base: "http://" + srv.Addr()}, files)
	checkMemberPorts(t, p, binding)
}

func TestMemberPortsReadTheProvisioningRoleOverHTTPAndAreUnavailableWhenItIsGone(t *testing.T) {
	dir := t.TempDir()
	files := executiontest.WriteFiles(t, dir, []executiontest.Environment{{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org"}},
		"site:alpha", "service:beto")
	clk := clock.NewManual(time.Date(2026, 8, 20, 10, 30, 0, 0, time.UTC))
	prov := startProvisioningOwner(t, dir, files, clk)
	provSrv := prov.srv
	o, err := executionports.NewHTTPOwner("http://"+provSrv.Addr(), prov.keyFile, "")
	if err != nil {
		t.Fatal(err)
	}
	p := memberPorts{accounts: o, bindings: o, feed: o}
	binding := seedMembers(t, executiontest.Client{Base: "http://" + provSrv.Addr()}, files)
	checkMemberPorts(t, p, binding)
	clk.Advance(16 * time.Minute) // the owner judges freshness when execution reads
	if a, err := p.accounts.ReadyAccount(context.Background(), memberParty, memberProject, "alpha"); err != nil || a.Fresh || a.UID != memberUID(1) {
		t.Fatalf("an account not confirmed for 16 minutes: %+v %v", a, err)
	}
	prov.app.RequireStop()
	if _, err := p.accounts.ReadyAccount(context.Background(), memberParty, memberProject, "alpha"); !errors.Is(err, epapp.ErrResourceLookupUnavailable) || errors.Is(err, epapp.ErrNoReadyAccount) {
		t.Fatalf("owner gone: %v", err)
	}
	if d, err := p.bindings.DesiredBindings(context.Background(), "alpha-k8s"); !errors.Is(err, epapp.ErrResourceLookupUnavailable) || d.Bindings != nil {
		t.Fatalf("owner gone: %+v %v", d, err)
	}
	if _, err := p.feed.FeedHead(context.Background()); !errors.Is(err, epapp.ErrResourceLookupUnavailable) {
		t.Fatalf("owner gone: feed head %v", err)
	}
	if _, err := p.feed.BindingChanges(context.Background(), rpapp.FeedCursor(0)); !errors.Is(err, epapp.ErrResourceLookupUnavailable) {
		t.Fatalf("owner gone: feed %v", err)
	}
}

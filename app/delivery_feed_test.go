package app

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap/zaptest"

	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
	"github.com/pharos-metallo/metallo/platform/httpserver"
)

// Binding delivery follows the owner's change feed
// (docs/execution-ports.md#following-the-change-feed): with the full
// reconcile an hour apart, a binding change made after the start's full
// reconcile is delivered all the same, read from the feed — in process on
// both engines of the execution database, and over HTTP from a provisioning
// role of its own.

// feedDeliveryTimeout bounds the wait for an append; generous, since it is
// no speed assertion: without the feed nothing would be appended for an
// hour.
const feedDeliveryTimeout = time.Minute

// awaitBindRevision waits until the stream of alpha-k8s at base carries
// binding's bind-member of revision rev with account UID uid, exactly once,
// and the stream has no other command of a revision above it.
func awaitBindRevision(t *testing.T, base, envKey, binding string, rev int64, uid string) {
	t.Helper()
	deadline := time.Now().Add(feedDeliveryTimeout)
	var last []streamCommand
	for time.Now().Before(deadline) {
		cmds, ok := readStream(base, envKey)
		if ok {
			last = cmds
			n := 0
			for _, c := range cmds {
				if c.Operation == "bind-member" && c.Payload.BindingID == binding && c.Payload.Revision == rev {
					if c.Payload.AccountUID != uid {
						t.Fatalf("revision %d carries account_uid %q, want %q", rev, c.Payload.AccountUID, uid)
					}
					n++
				}
			}
			if n > 1 {
				t.Fatalf("revision %d appended %d times: %+v", rev, n, cmds)
			}
			if n == 1 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("bind-member of revision %d not appended within %s (the full reconcile is an hour away); stream %+v", rev, feedDeliveryTimeout, last)
}

// recreateAccount posts Site alpha's account report of memberParty's
// account under a new UID: a new binding revision on the feed.
func recreateAccount(t *testing.T, c executiontest.Client, files executiontest.Files, clk *clock.Manual, binding, uid string) {
	t.Helper()
	clk.Advance(time.Second)
	body := fmt.Sprintf(`{"provider_resource_id":"r1","observed_at":%q,"accounts":[{"party_id":%q,"account":"member-%s","uid":%q,"binding_id":%q,"generation":1,"state":"ready"}]}`,
		clk.Now().Add(-time.Second).Format(time.RFC3339Nano), memberParty, memberParty, uid, binding)
	executiontest.Want(t, c.Call(t, http.MethodPost, "/resource-provisioning/alpha/accounts", files.ExtraKeys["site:alpha"], "", []byte(body)), http.StatusOK, "")
}

func TestDeliveryFollowsTheChangeFeedInProcess(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			dir := t.TempDir()
			files := executiontest.WriteFiles(t, dir, []executiontest.Environment{{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org"}},
				"site:alpha", "service:beto")
			dbURL := "sqlite:" + filepath.Join(dir, "execution.sqlite")
			if engine == "postgres" {
				dbURL = dbtest.NewPostgres(t)
			}
			clk := clock.NewManual(time.Date(2026, 8, 20, 10, 30, 0, 0, time.UTC))
			roles := []Role{
				configured(t, ProvisioningRole(), "--provisioning-database-url", "sqlite:"+filepath.Join(dir, "provisioning.sqlite"), "--waldur-instance", waldurInstance),
				configured(t, ExecutionRole(), "--execution-database-url", dbURL, "--resource-owner", "in-process",
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
			base := "http://" + srv.Addr()
			checkFeedDelivery(t, executiontest.Client{Base: base}, base, files, clk)
		})
	}
}

func TestDeliveryFollowsTheChangeFeedOverHTTP(t *testing.T) {
	dir := t.TempDir()
	files := executiontest.WriteFiles(t, dir, []executiontest.Environment{{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org"}},
		"site:alpha", "service:beto")
	clk := clock.NewManual(time.Date(2026, 8, 20, 10, 30, 0, 0, time.UTC))
	var provSrv *httpserver.Server
	prov := fxtest.New(t,
		Compose([]Role{configured(t, ProvisioningRole(), "--provisioning-database-url", "sqlite:"+filepath.Join(dir, "provisioning.sqlite"), "--waldur-instance", waldurInstance)},
			Common{Listen: "127.0.0.1:0", KeysFile: files.KeysFile, EnvironmentsFile: files.EnvironmentsFile, Migrate: true}, zaptest.NewLogger(t)),
		fx.Decorate(func(clock.Clock) clock.Clock { return clk }),
		fx.Populate(&provSrv),
	)
	prov.RequireStart()
	defer prov.RequireStop()
	provBase := "http://" + provSrv.Addr()
	keyFile := filepath.Join(dir, "provisioning.key")
	dbtest.Must(t, os.WriteFile(keyFile, []byte(files.ServiceKey+"\n"), 0o600))
	var execSrv *httpserver.Server
	exec := fxtest.New(t,
		Compose([]Role{configured(t, ExecutionRole(), "--execution-database-url", "sqlite:"+filepath.Join(dir, "execution.sqlite"),
			"--resource-owner", "http", "--provisioning-url", provBase, "--provisioning-key-file", keyFile,
			"--binding-delivery-interval", "1h", "--binding-feed-interval", "50ms")},
			Common{Listen: "127.0.0.1:0", KeysFile: files.KeysFile, EnvironmentsFile: files.EnvironmentsFile, Migrate: true}, zaptest.NewLogger(t)),
		fx.Populate(&execSrv),
	)
	exec.RequireStart()
	defer exec.RequireStop()
	checkFeedDelivery(t, executiontest.Client{Base: provBase}, "http://"+execSrv.Addr(), files, clk)
}

// checkFeedDelivery seeds the member at the provisioning API prov after the
// execution role at execBase started (its start's full reconcile found
// nothing, or found the seeded member: either way revision 2 arrives), then makes
// the account again under new UIDs: each new revision is appended once,
// read from the feed, the full reconcile being an hour away.
func checkFeedDelivery(t *testing.T, prov executiontest.Client, execBase string, files executiontest.Files, clk *clock.Manual) {
	t.Helper()
	envKey := files.EnvironmentKeys["alpha-k8s"]
	binding := seedMembers(t, prov, files)
	awaitBindRevision(t, execBase, envKey, binding, 2, memberUID(1))
	for i, uid := range []string{memberUID(2), memberUID(3)} {
		recreateAccount(t, prov, files, clk, binding, uid)
		awaitBindRevision(t, execBase, envKey, binding, int64(3+i), uid)
	}
	cmds, _ := readStream(execBase, envKey)
	var revs []int64
	for _, c := range cmds {
		revs = append(revs, c.Payload.Revision)
	}
	if fmt.Sprint(revs) != "[2 3 4]" {
		t.Fatalf("the stream's binding revisions %v, want [2 3 4] once each, in order", revs)
	}
}

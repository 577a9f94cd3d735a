package app

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
	"github.com/pharos-metallo/metallo/platform/testsetup"
)

// The delivery of member bindings under kills (docs/execution-ports.md#delivery-of-member-bindings):
// two real `metallo serve --role execution` processes on one PostgreSQL
// database, each SIGKILLed and restarted again and again, deliver the
// bindings of a real provisioning role (read over HTTP) while its
// account's UID changes and the member is finally removed.

// spawned is an execution process started off the test goroutine.
func spawnExecution(bin string, args []string) (*servedProcess, error) {
	args = append([]string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", ""}, args...)
	p := &servedProcess{cmd: exec.Command(bin, args...), logDone: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), "METALLO_LOG_LEVEL=info")
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	addr := make(chan string, 1)
	go p.readLog(stderr, addr)
	select {
	case a := <-addr:
		p.base = "http://" + a
	case <-time.After(2 * time.Minute):
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		return nil, fmt.Errorf("execution did not start serving:\n%s", p.logText())
	}
	return p, nil
}

type streamCommand struct {
	ID        string `json:"id"`
	Sequence  int64  `json:"sequence"`
	Operation string `json:"operation"`
	IssuedAt  string `json:"issued_at"`
	Payload   struct {
		BindingID  string `json:"binding_id"`
		Revision   int64  `json:"revision"`
		Generation int64  `json:"generation"`
		AccountUID string `json:"account_uid"`
	} `json:"payload"`
}

// readStream reads every command of alpha-k8s's stream at base with a
// read-only pull (it binds nothing), or false when base does not answer.
func readStream(base, envKey string) ([]streamCommand, bool) {
	var all []streamCommand
	after := int64(0)
	for {
		r, err := (executiontest.Client{Base: base}).Try(http.MethodGet, fmt.Sprintf("/site/v1/streams/alpha-k8s/commands?after=%d&limit=100&bind=false", after), envKey, "test-reader", nil)
		if err != nil || r.Status != http.StatusOK {
			return nil, false
		}
		var page struct {
			Commands []streamCommand `json:"commands"`
		}
		if json.Unmarshal(r.Body, &page) != nil {
			return nil, false
		}
		all = append(all, page.Commands...)
		if len(page.Commands) < 100 {
			return all, true
		}
		after = page.Commands[len(page.Commands)-1].Sequence
	}
}

func TestDeliveryUnderKillsAppendsEveryBindingRevisionOnceInOrder(t *testing.T) {
	bin := testsetup.Binary(t)
	dir := t.TempDir()
	files := executiontest.WriteFiles(t, dir, []executiontest.Environment{{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org"}},
		"site:alpha", "service:beto")
	clk := clock.NewManual(time.Date(2026, 8, 20, 10, 30, 0, 0, time.UTC))
	prov := startProvisioningOwner(t, dir, files, clk)
	defer prov.app.RequireStop()
	provSrv, keyFile := prov.srv, prov.keyFile
	provC := executiontest.Client{Base: "http://" + provSrv.Addr()}
	binding := seedMembers(t, provC, files)
	dbURL := dbtest.NewPostgres(t)
	args := []string{"--role", "execution", "--migrate", "--keys-file", files.KeysFile, "--environments-file", files.EnvironmentsFile,
		"--execution-database-url", dbURL, "--resource-owner", "http", "--provisioning-url", provC.Base, "--provisioning-key-file", keyFile,
		"--binding-delivery-interval", "50ms"}

	// Two replicas, each killed after a random while and started again,
	// until stop; every process's log is kept.
	var (
		mu     sync.Mutex
		procs  []*servedProcess
		live   = map[int]*servedProcess{}
		kills  int
		stop   = make(chan struct{})
		killWG sync.WaitGroup
	)
	first := make(chan struct{}, 2)
	for slot := range 2 {
		killWG.Add(1)
		go func() {
			defer killWG.Done()
			for {
				p, err := spawnExecution(bin, args)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				procs = append(procs, p)
				live[slot] = p
				mu.Unlock()
				select {
				case first <- struct{}{}:
				default:
				}
				select {
				case <-stop:
					return
				case <-time.After(time.Duration(rand.IntN(150)) * time.Millisecond):
				}
				_ = p.cmd.Process.Signal(syscall.SIGKILL)
				_ = p.cmd.Wait()
				mu.Lock()
				delete(live, slot)
				kills++
				mu.Unlock()
			}
		}()
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range live {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			_ = p.cmd.Wait()
		}
	})
	<-first

	envKey := files.EnvironmentKeys["alpha-k8s"]
	// stream reads every command of the stream through any live process
	// (a read-only pull: it binds nothing).
	stream := func() ([]streamCommand, bool) {
		mu.Lock()
		var bases []string
		for _, p := range live {
			bases = append(bases, p.base)
		}
		mu.Unlock()
		for _, base := range bases {
			if all, ok := readStream(base, envKey); ok {
				return all, true
			}
		}
		return nil, false
	}
	desiredRevision := func() (int64, bool) {
		r := provC.Call(t, http.MethodGet, "/resource-provisioning/environments/alpha-k8s/bindings", files.ServiceKey, "", nil)
		executiontest.Want(t, r, http.StatusOK, "")
		page := executiontest.Decode[struct {
			Entries []struct {
				Binding *struct {
					BindingID string `json:"binding_id"`
					Revision  int64  `json:"revision"`
					State     string `json:"state"`
				} `json:"binding"`
			} `json:"entries"`
		}](t, r)
		for _, e := range page.Entries {
			if e.Binding != nil && e.Binding.BindingID == binding {
				return e.Binding.Revision, e.Binding.State == "retired"
			}
		}
		t.Fatalf("binding %s not listed: %s", binding, r)
		return 0, false
	}
	// waitFor waits until the stream's last command of the binding carries
	// revision (bind-member) or is a retirement.
	waitFor := func(want func([]streamCommand) bool, what string, bound time.Duration) {
		t.Helper()
		deadline := time.Now().Add(bound)
		for time.Now().Before(deadline) {
			if cmds, ok := stream(); ok && want(cmds) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("%s not appended within %s", what, bound)
	}
	hasRevision := func(rev int64) func([]streamCommand) bool {
		return func(cmds []streamCommand) bool {
			for _, c := range cmds {
				if c.Operation == "bind-member" && c.Payload.Revision == rev {
					return true
				}
			}
			return false
		}
	}

	site := files.ExtraKeys["site:alpha"]
	var wantRevisions []int64
	rev, _ := desiredRevision()
	wantRevisions = append(wantRevisions, rev)
	waitFor(hasRevision(rev), fmt.Sprintf("revision %d", rev), 2*time.Minute)
	const changes = 30
	killedDuring := 0
	for i := 2; i <= changes+1; i++ {
		// The account made again under its name: a new UID, a new revision.
		clk.Advance(time.Second)
		observed := clk.Now().Add(-time.Second).Format(time.RFC3339Nano)
		body := fmt.Sprintf(`{"provider_resource_id":"r1","observed_at":%q,"accounts":[{"party_id":%q,"account":"member-%s","uid":%q,"binding_id":%q,"generation":1,"state":"ready"}]}`,
			observed, memberParty, memberParty, memberUID(i), binding)
		mu.Lock()
		k0 := kills
		mu.Unlock()
		executiontest.Want(t, provC.Call(t, http.MethodPost, "/resource-provisioning/alpha/accounts", site, "", []byte(body)), http.StatusOK, "")
		rev, _ = desiredRevision()
		wantRevisions = append(wantRevisions, rev)
		waitFor(hasRevision(rev), fmt.Sprintf("revision %d", rev), 2*time.Minute)
		mu.Lock()
		if kills > k0 {
			killedDuring++
		}
		mu.Unlock()
	}
	// The member removed at Beto: the binding is retired, and a
	// retire-member is appended within the configured bound (the interval
	// plus a pass; processes are being killed, so a restart's start-up is
	// allowed for too).
	ev := `{"event_id":"p2","type":"project.ProjectChanged","occurred_at":"2026-08-20T11:00:00Z","project":{"id":"` + memberProject + `","revision":2,"state":"active",` +
		`"provider_bindings":[{"provider":"waldur","instance":"` + waldurInstance + `","external_id":"` + memberWaldur + `"}],"memberships":[]}}`
	executiontest.Want(t, provC.Call(t, http.MethodPost, "/resource-provisioning/events/beto", files.ExtraKeys["service:beto"], "", []byte(ev)), http.StatusOK, "")
	if _, retired := desiredRevision(); !retired {
		t.Fatal("the binding is not retired after the member's removal")
	}
	waitFor(func(cmds []streamCommand) bool {
		return len(cmds) > 0 && cmds[len(cmds)-1].Operation == "retire-member"
	}, "retire-member", 30*time.Second)

	close(stop)
	killWG.Wait()
	cmds, ok := stream()
	if !ok {
		// Both slots stopped right after a kill: start one to read.
		p, err := spawnExecution(bin, args)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		procs = append(procs, p)
		live[9] = p
		mu.Unlock()
		cmds, ok = stream()
		if !ok {
			t.Fatal("cannot read the stream")
		}
	}
	// The read shows the binding's desired revision delivered.
	mu.Lock()
	var base string
	for _, p := range live {
		base = p.base
	}
	mu.Unlock()
	r := (executiontest.Client{Base: base}).Call(t, http.MethodGet, "/execution/v1/streams/alpha-k8s/bindings", files.ServiceKey, "", nil)
	executiontest.Want(t, r, http.StatusOK, "")
	read := executiontest.Decode[struct {
		Bindings []struct {
			BindingID         string `json:"binding_id"`
			DesiredRevision   int64  `json:"desired_revision"`
			DesiredState      string `json:"desired_state"`
			DeliveredRevision int64  `json:"delivered_revision"`
			Operation         string `json:"operation"`
			Sequence          int64  `json:"sequence"`
		} `json:"bindings"`
	}](t, r)
	retiredRev, _ := desiredRevision()
	if len(read.Bindings) != 1 || read.Bindings[0].BindingID != binding || read.Bindings[0].DesiredRevision != retiredRev || read.Bindings[0].DesiredState != "retired" ||
		read.Bindings[0].DeliveredRevision != retiredRev || read.Bindings[0].Operation != "retire-member" || read.Bindings[0].Sequence != int64(len(cmds)) {
		t.Fatalf("the deliveries read: %s", r)
	}
	var got []int64
	seen := map[string]bool{}
	for i, c := range cmds {
		if seen[c.ID] {
			t.Fatalf("command %s appended twice", c.ID)
		}
		seen[c.ID] = true
		if i < len(cmds)-1 {
			if c.Operation != "bind-member" || c.Payload.BindingID != binding || c.Payload.AccountUID == "" {
				t.Fatalf("command %d = %+v, want a bind-member of %s with its account UID", i, c, binding)
			}
			got = append(got, c.Payload.Revision)
		}
	}
	last := cmds[len(cmds)-1]
	if last.Operation != "retire-member" || last.Payload.BindingID != binding || last.Payload.Generation != 1 {
		t.Fatalf("last command = %+v, want retire-member of generation 1", last)
	}
	if fmt.Sprint(got) != fmt.Sprint(wantRevisions) {
		t.Fatalf("bind-member revisions on the stream = %v, want each desired revision once in order %v", got, wantRevisions)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range procs {
		if log := p.logText(); strings.Contains(log, "conflicting retry") || strings.Contains(log, "delivery conflict") {
			t.Fatalf("a deliverer met a conflicting retry:\n%s", log)
		}
	}
	t.Logf("%d binding revisions and a retirement delivered by %d processes, %d SIGKILLs, %d of the revisions with a kill before they were appended", len(got), len(procs), kills, killedDuring)
	if killedDuring < changes/3 {
		t.Fatalf("only %d of %d revisions saw a kill before their append: the test did not kill during delivery", killedDuring, changes)
	}
}

package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/permissions"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/platform/testsetup"
	"github.com/pharos-metallo/metallo/standins/siteagent"
)

// BatchImage is the --batch-image of every Runtime the harness starts (a
// digest nothing pulls; KWOK runs nothing), and the Setup's Image unless
// OnTheRealNode names the real node's platform image.
const BatchImage = "registry.example/metallo-batch@sha256:0000000000000000000000000000000000000000000000000000000000000000"

// Setup is the one setup of the process tests and the native benchmarks,
// in the style of sapcc/limes' internal/test: NewSetup(t, options...) makes
// what the options ask for on the local cluster (docs/testing.md#process-and-kill-tests).
// A Site project namespace set up as the Site agent would (standins/siteagent),
// its member, the member's grants, and with Installed the execution role
// (a subprocess on a SQLite file behind the recording Proxy) and an
// installed Runtime (not started) acting with its own token.
type Setup struct {
	T testing.TB
	// Ctx ends 15 minutes after NewSetup, or when the test ends.
	Ctx context.Context
	Env *kubetest.Env
	// Namespace is the test's namespace (Env.Namespace); Project, Member
	// and Binding are fresh UUIDs: its Project, the member (Party) and the
	// member's binding.
	Namespace, Project, Member, Binding string
	// Account is the member's Kubernetes user,
	// system:serviceaccount:<namespace>:member-<Member>.
	Account string
	// Policy is the permission policy file WithGrants and Grant write (the
	// Runtime's --permissions policy:<file> when Installed).
	Policy string
	// Image is the batch and platform image: BatchImage, or the real
	// node's platform image (OnTheRealNode).
	Image string
	// Node is the real node (OnTheRealNode), else nil.
	Node *kubetest.RealNode
	// RuntimeFlags are what the Setup's options add to the Runtime's
	// command line (the real node's image and scheduling); Start passes
	// them before its own.
	RuntimeFlags []string
	// Site and Runtime are the execution role and the Runtime (Installed).
	Site    *Site
	Runtime *Runtime

	runs map[string]string // attempt → its Run
}

// SetupOption asks NewSetup for one part of the Site.
type SetupOption func(*setupParams)

type setupParams struct {
	project, guarded, member, platformImage, realNode, installed, bound bool
	image                                                               string
	// grants is nil without WithGrants (the policy file stays as it is).
	grants []domain.PermissionAction
}

// WithProject labels the namespace as the Project's, guarded by the
// admission policies (siteagent.Project).
func WithProject() SetupOption {
	return func(p *setupParams) { p.project, p.guarded = true, true }
}

// WithUnguardedProject labels the namespace with the Project but leaves
// out the access-policy label, so the admission policies do not guard it.
func WithUnguardedProject() SetupOption {
	return func(p *setupParams) { p.project, p.guarded = true, false }
}

// WithMember creates the member's service account, bound to ClusterRole
// metallo-member (siteagent.Member).
func WithMember() SetupOption {
	return func(p *setupParams) { p.member = true }
}

// WithGrants writes the policy file granting the member actions on the
// Project (none: an empty policy).
func WithGrants(actions ...domain.PermissionAction) SetupOption {
	return func(p *setupParams) { p.grants = append([]domain.PermissionAction{}, actions...) }
}

// WithPlatformImage names the Setup's Image in the namespace's ConfigMap
// metallo-site, as the Site agent does (siteagent.PlatformImage).
func WithPlatformImage() SetupOption {
	return func(p *setupParams) { p.platformImage = true }
}

// WithImage makes image the Setup's Image (the platform image
// WithPlatformImage names) in place of BatchImage.
func WithImage(image string) SetupOption {
	return func(p *setupParams) { p.image = image }
}

// OnTheRealNode renders the Runtime's Pods onto the real node: Image is
// its platform image and RuntimeFlags carry it and the node's scheduling.
func OnTheRealNode() SetupOption {
	return func(p *setupParams) { p.realNode = true }
}

// Installed starts the execution role and installs a Runtime (runtime
// install) whose kubeconfig holds a token of the Runtime's service
// account; the Runtime does not run until Start.
func Installed() SetupOption {
	return func(p *setupParams) { p.installed = true }
}

// Bound appends the member's binding to the namespace (bind-member,
// revision 1) to the stream; it implies Installed.
func Bound() SetupOption {
	return func(p *setupParams) { p.installed, p.bound = true, true }
}

// NewSetup makes the Site the options ask for; it fails t on any error.
func NewSetup(t testing.TB, opts ...SetupOption) *Setup {
	t.Helper()
	var p setupParams
	for _, o := range opts {
		o(&p)
	}
	e := kubetest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	t.Cleanup(cancel)
	s := &Setup{T: t, Ctx: ctx, Env: e, Namespace: e.Namespace, Project: uuid.NewString(), Member: uuid.NewString(), Binding: uuid.NewString(),
		Image: BatchImage, runs: map[string]string{}}
	s.Account = "system:serviceaccount:" + s.Namespace + ":" + siteprotocol.MemberAccount(s.Member)
	s.Policy = filepath.Join(t.TempDir(), "policy.yaml")
	if p.image != "" {
		s.Image = p.image
	}
	if p.realNode {
		s.Node = e.RealNode()
		s.Image = s.Node.Image(t, kubetest.ImagePlatform)
		s.RuntimeFlags = append([]string{"--batch-image", s.Image}, s.Node.RuntimeFlags()...)
	}
	if p.project {
		s.must(siteagent.Project(ctx, e.Client, s.Namespace, s.Project, p.guarded))
	}
	if p.member {
		s.must(siteagent.Member(ctx, e.Client, s.Namespace, s.Member))
	}
	if p.platformImage {
		s.must(siteagent.PlatformImage(ctx, e.Client, s.Namespace, s.Image))
	}
	if p.installed {
		s.install()
	}
	if p.grants != nil {
		s.Grant(p.grants...)
	}
	if p.bound {
		bind := s.Envelope(siteprotocol.OpBindMember)
		bind["payload"] = map[string]any{"party_id": s.Member, "namespace": s.Namespace, "account": siteprotocol.MemberAccount(s.Member),
			"binding_id": s.Binding, "revision": 1, "generation": 1}
		s.Append(bind)
	}
	return s
}

func (s *Setup) must(err error) {
	s.T.Helper()
	if err != nil {
		s.T.Fatal(err)
	}
}

// install starts the execution role and installs the Runtime; its policy
// file becomes the Setup's.
func (s *Setup) install() {
	s.T.Helper()
	dir := s.T.TempDir()
	bin := testsetup.Binary(s.T)
	site, err := NewSite(bin, dir)
	s.must(err)
	s.T.Cleanup(site.Close)
	s.must(site.StartServer("execution.sqlite", ""))
	rt, err := NewRuntime(bin, site, filepath.Join(dir, "runtime"))
	s.must(err)
	token, err := siteagent.RuntimeToken(s.Ctx, s.Env.Client, time.Hour)
	s.must(err)
	s.must(siteagent.WriteKubeconfig(rt.Kubeconfig, s.Env.Config, token))
	s.Site, s.Runtime, s.Policy = site, rt, rt.Policy
	if out, err := rt.Install(); err != nil {
		s.T.Fatal(out, err)
	}
}

// Grant replaces the policy file's grants: the member may take actions on
// the Project (none: nothing is granted).
func (s *Setup) Grant(actions ...domain.PermissionAction) {
	s.T.Helper()
	var grants []permissions.Grant
	if len(actions) > 0 {
		grants = []permissions.Grant{{Member: s.Member, Project: s.Project, Actions: actions}}
	}
	b, err := json.Marshal(grants)
	s.must(err)
	s.must(os.WriteFile(s.Policy, b, 0o600))
}

// Envelope is a command of operation op by the member in the Project,
// with a fresh ID.
func (s *Setup) Envelope(op siteprotocol.Operation) map[string]any {
	return map[string]any{"id": uuid.NewString(), "operation": op, "issued_at": "2026-11-29T10:00:00Z", "member_id": s.Member, "project_id": s.Project}
}

// Append appends command c to the stream (Installed) and returns its ID.
func (s *Setup) Append(c map[string]any) string {
	s.T.Helper()
	raw, err := json.Marshal(c)
	s.must(err)
	_, err = s.Site.Append(raw)
	s.must(err)
	return c["id"].(string)
}

// Command appends a workload command of family for the Attempt (its Run
// stays the same across the Attempt's commands: a start names the Run its
// workspace was prepared for) through the member's binding, with payload
// unless nil, and returns its ID.
func (s *Setup) Command(family siteprotocol.Family, op siteprotocol.Operation, attempt string, payload any) string {
	s.T.Helper()
	if s.runs[attempt] == "" {
		s.runs[attempt] = uuid.NewString()
	}
	c := s.Envelope(op)
	c["family"], c["run_id"], c["attempt_id"] = family, s.runs[attempt], attempt
	c["account_ref"] = map[string]any{"binding_id": s.Binding, "generation": 1}
	if payload != nil {
		c["payload"] = payload
	}
	return s.Append(c)
}

// Start starts the Runtime with failpoints armed (empty: none) and the
// Setup's RuntimeFlags before flags; it is killed when the test ends.
func (s *Setup) Start(failpoints string, flags ...string) *Process {
	s.T.Helper()
	p, err := s.Runtime.Start(failpoints, append(append([]string(nil), s.RuntimeFlags...), flags...)...)
	s.must(err)
	s.T.Cleanup(p.Kill)
	return p
}

// Acknowledged reports whether the command has a recorded result.
func (s *Setup) Acknowledged(id string) bool {
	rec, err := s.Site.Command(id)
	return err == nil && len(rec.Result) > 0
}

// WaitAcknowledged waits up to 3 minutes for the command's result while p
// runs; it fails the test when p exits first or the time runs out.
func (s *Setup) WaitAcknowledged(p *Process, id string) {
	s.T.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !s.Acknowledged(id) {
		if p.Exited() || time.Now().After(deadline) {
			s.T.Fatalf("command %s not acknowledged:\n%s", id, p.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// RunUntilAcknowledged starts the Runtime without failpoints, waits for
// the command's result and stops it.
func (s *Setup) RunUntilAcknowledged(id string, flags ...string) {
	s.T.Helper()
	p := s.Start("", flags...)
	s.WaitAcknowledged(p, id)
	s.must(p.Stop(30 * time.Second))
}

// KillLine is the line a Runtime logs when a failpoint kills it; its
// submatch is the failpoint.
var KillLine = regexp.MustCompile(`failpoint ([a-z-]+): hit \d+, killing the process with SIGKILL`)

// KillUntilAcknowledged starts the Runtime with failpoint armed at its
// first hit again and again, each run until it dies or last is
// acknowledged, and returns how many runs the failpoint killed. It fails
// the test when a run exits without being killed there, neither dies nor
// finishes within 2 minutes, or more than maxRuns runs do not finish.
func (s *Setup) KillUntilAcknowledged(failpoint, last string, maxRuns int, flags ...string) int {
	s.T.Helper()
	kills := 0
	for run := 1; ; run++ {
		if run > maxRuns {
			s.T.Fatalf("%d runs without completing (%d kills)", run, kills)
		}
		p := s.Start(failpoint+"@1", flags...)
		done := false
		deadline := time.Now().Add(2 * time.Minute)
		for !p.Exited() && !done {
			if time.Now().After(deadline) {
				s.T.Fatalf("run %d neither died nor finished within 2 minutes:\n%s", run, p.Output())
			}
			select {
			case <-p.Done():
			case <-time.After(50 * time.Millisecond):
				done = s.Acknowledged(last)
			}
		}
		if !p.Exited() {
			s.must(p.Stop(30 * time.Second))
			return kills
		}
		m := KillLine.FindStringSubmatch(p.Output())
		if !p.Killed() || m == nil || m[1] != failpoint {
			s.T.Fatalf("run %d exited (%v) without being killed at %s:\n%s", run, p.ExitErr(), failpoint, p.Output())
		}
		kills++
	}
}

// Result returns the command's recorded result, parsed and as recorded
// (the bytes every result sent for its sequence must equal).
func (s *Setup) Result(id string) (siteprotocol.Result, []byte) {
	s.T.Helper()
	rec, err := s.Site.Command(id)
	s.must(err)
	r, err := siteprotocol.ParseResult(rec.Result)
	s.must(err)
	return r, rec.Result
}

// CheckSentResultsAreRecorded fails the test when a result the Runtime
// sent through the Proxy for a sequence of recorded differs from the
// recorded bytes.
func (s *Setup) CheckSentResultsAreRecorded(recorded map[int64][]byte) {
	s.T.Helper()
	for _, put := range s.Site.Proxy.Puts() {
		if want, ok := recorded[put.Sequence]; ok && !bytes.Equal(put.Body, want) {
			s.T.Fatalf("sequence %d: a sent result differs from the recorded one:\n%s\n%s", put.Sequence, put.Body, want)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/standins/githost"
	"github.com/pharos-metallo/metallo/standins/grantprovider"
	"github.com/pharos-metallo/metallo/standins/irismodel"
	"github.com/pharos-metallo/metallo/standins/siteagent"
)

// repositoryCA is the ConfigMap of the project namespace holding the Git
// host's CA (key ca.pem), which the Runtime mounts into the workspace
// helper (--repository-ca-configmap).
const repositoryCA = "repository-ca"

// The Run's repository: README.md, weights.bin and the member's iris
// model (standins/irismodel, at irismodel.Path), both in LFS, at the exact
// commit; the branch head changes README.md and removes the model.
const (
	readmeAtCommit = "model v1: the exact commit the Run asks for\n"
	readmeAtHead   = "model v2: the branch head, which the Run must not see; the model removed\n"
)

// weightsAtCommit is the LFS object of the exact commit (80 KiB).
var weightsAtCommit = bytes.Repeat([]byte("the weights of model v1\n"), 3414)

// gitHost is the repository a Run's workspace is checked out from and the
// grant provider the Runtime asks for a credential.
type gitHost struct {
	owner    *hostOwner
	host     *githost.Host
	provider *grantprovider.Provider
	member   githost.User
	repo     githost.Repo
	// exact is the commit "model v1", which holds the model; head the
	// branch head "model v2", which does not.
	exact, head string
}

// repositoryHost starts, before the Runtime, the Site's repository host and
// grant provider. The host is Gitea over HTTPS with LFS (standins/githost,
// docs/testing.md#the-git-host-lane) on a database of the local PostgreSQL
// server, listening at the real node's bridge
// address, where its Pods reach this machine, with a certificate of a CA
// made for it; the lab's private repository holds two commits, and the
// member's own Gitea user may read it. The grant provider is outside
// Metallo (docs/site-runtime.md#repository-grants): standins/grantprovider stands in
// for it, serving the provider's HTTP contract on loopback and minting
// each grant as a real access token of the member's Gitea user (scope
// read:repository), deleted at Gitea when the Runtime revokes the grant.
// The CA goes into the project namespace as the ConfigMap repository-ca,
// and the platform image into its ConfigMap metallo-site, as the Site
// agent would put them there.
func (d *demo) repositoryHost(ctx context.Context, ns, member string) error {
	d.section("The Site's repository host and grant provider (stand-ins: neither is part of Metallo)")
	if d.realNode.HostIP == "" {
		return errors.New("cluster.json names no hostIP of the real node (it predates it): make cluster-down, then make cluster-up")
	}
	o, err := newHostOwner(d.path("githost"))
	if err != nil {
		return err
	}
	var providerListener net.Listener
	var providerCert tls.Certificate
	if d.runtimeMode == runtimePod {
		l, pair, err := d.bridgeListener()
		if err != nil {
			return err
		}
		if providerCert, err = tls.X509KeyPair(pair.CertPEM, pair.KeyPEM); err != nil {
			_ = l.Close()
			return err
		}
		providerListener = l
	}
	g := &gitHost{owner: o}
	d.git = g
	dbURL, err := d.gitHostDatabase(ctx, o)
	if err != nil {
		return err
	}
	if err := o.call(func() {
		g.host = githost.Start(o, githost.Options{DatabaseURL: dbURL, ReachableAt: d.realNode.HostIP})
		lab := g.host.CreateUser("lab")
		g.repo = g.host.CreateRepo(lab, "model")
		g.member = g.host.CreateUser("member-" + member[:8])
		g.host.AddReader(g.repo, g.member)
		w := g.host.NewWorkTree()
		w.TrackLFS("*.bin")
		w.TrackLFS("*.joblib")
		w.Write("weights.bin", weightsAtCommit)
		w.Write(irismodel.Path, irismodel.Model())
		w.Write("README.md", []byte(readmeAtCommit))
		g.exact = w.Commit("model v1")
		w.Git("rm", "-q", irismodel.Path)
		w.Write("README.md", []byte(readmeAtHead))
		g.head = w.Commit("model v2")
		w.Push(g.repo, true)
		members := map[string]githost.User{member: g.member}
		if d.runtimeMode == runtimePod {
			// A Runtime in a Pod reaches the bridge's host address, over HTTPS.
			g.provider = grantprovider.NewTLS(o, g.host, members, providerListener, providerCert)
		} else {
			g.provider = grantprovider.New(o, g.host, members)
		}
	}); err != nil {
		return fmt.Errorf("the Git host: %w (its log in %s)", err, rel(o.logPath))
	}
	ca, err := os.ReadFile(g.host.CAFile)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: repositoryCA}, Data: map[string]string{kube.CAKey: string(ca)}}
	if _, err := d.admin.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return err
	}
	// The Site agent names the Site's fixed platform image for the admission
	// policy metallo-workspace-helpers; without it every helper is refused.
	if err := siteagent.PlatformImage(ctx, d.admin, ns, d.realNode.Images[platformImage]); err != nil {
		return err
	}
	d.say("Gitea at %s (HTTPS, LFS; the real node's bridge address, so its Pods reach it; log %s)", g.host.URL, rel(o.logPath))
	d.say("private repository %s: main is at \"model v2\"; the Run asks for \"model v1\", %s, which is no branch head", g.repo.URL, g.exact)
	d.say("at that commit README.md says %q; weights.bin is an LFS object of %d bytes (sha256 %s…)", strings.TrimSpace(readmeAtCommit), len(weightsAtCommit), weightsDigest()[:16])
	d.say("and %s, the member's trained iris classifier (scikit-learn, joblib), an LFS object of %d bytes; \"model v2\" (%s) removes it", irismodel.Path, len(irismodel.Model()), g.head[:12])
	d.say("member user %s at Gitea may read it (a collaborator); it holds no access token", g.member.Name)
	d.say("the grant provider at %s: each grant a token of the member's Gitea user, scope read:repository, revoked by deleting it", g.provider.URL)
	d.say("the host's CA in ConfigMap %s/%s (key %s), which the Runtime mounts into the workspace helper", ns, repositoryCA, kube.CAKey)
	d.say("the Site agent's ConfigMap %s/%s names the platform image, the only image a workspace helper may run (admission policy metallo-workspace-helpers)", ns, siteagent.SiteConfigMap)
	return nil
}

// repositoryGrants is the Runtime's grant provider (the value of
// --repository-grants) and the ConfigMap of the CA its workspace helpers
// trust (--repository-ca-configmap), and what to say about them.
func (d *demo) repositoryGrants() (provider, caConfigMap, about string) {
	provider = "http:" + d.git.provider.URL
	if d.runtimeMode == runtimePod {
		return provider, repositoryCA, fmt.Sprintf("repository grants from the provider at %s (HTTPS on the bridge's host address, a certificate of the local cluster's CA); the helper trusts the CA of ConfigMap %s", d.git.provider.URL, repositoryCA)
	}
	return provider, repositoryCA, fmt.Sprintf("repository grants from the provider at %s (plain http only to loopback); the helper trusts the CA of ConfigMap %s", d.git.provider.URL, repositoryCA)
}

// close stops the Git host and the grant provider (nothing when the demo
// never started them).
func (g *gitHost) close() {
	if g != nil {
		g.owner.close()
	}
}

// repository is the batch prepare's repository: the exact commit, with
// its LFS objects.
func (g *gitHost) repository() siteprotocol.Repository { return g.repositoryAt(g.exact) }

// repositoryAt is the repository at commit, with its LFS objects.
func (g *gitHost) repositoryAt(commit string) siteprotocol.Repository {
	return siteprotocol.Repository{URL: g.repo.URL, Commit: commit, LFS: true}
}

func weightsDigest() string {
	sum := sha256.Sum256(weightsAtCommit)
	return hex.EncodeToString(sum[:])
}

// checkoutScript is what the Job runs before training: it reads the
// checkout (in repo/ of its workspace).
const checkoutScript = `echo "repo/README.md: $(cat repo/README.md)"
echo "repo/weights.bin: $(wc -c < repo/weights.bin) bytes, sha256 $(sha256sum repo/weights.bin | cut -d' ' -f1)"
`

// readCheckout checks that the Job's log shows the files of the exact
// commit: README.md's content there and the LFS object's digest.
func (g *gitHost) readCheckout(log string) error {
	if !strings.Contains(log, "repo/README.md: "+strings.TrimSpace(readmeAtCommit)) ||
		!strings.Contains(log, fmt.Sprintf("repo/weights.bin: %d bytes, sha256 %s", len(weightsAtCommit), weightsDigest())) ||
		strings.Contains(log, strings.TrimSpace(readmeAtHead)) {
		return fmt.Errorf("the Job's log does not show the checkout of %s (README.md and the LFS object weights.bin)", g.exact)
	}
	return nil
}

// preparedCheckout sends the batch prepare (by prepare) while it watches
// the Attempt's helper Pod and credential Secret, then checks, before the
// Run may start, what prepare promises (docs/site-runtime.md#the-workspace-helper): the helper ran
// metallo workspace-init on the real node and reported the exact commit,
// one grant was issued, its token is gone at Gitea and refused there, and
// the API server has neither the Secret nor the helper any more.
func (d *demo) preparedCheckout(ctx context.Context, ns, attempt string, prepare func() (siteprotocol.Result, error)) error {
	g := d.git
	helperName, secretName := domain.AttemptObjectName(attempt, domain.SuffixHelper), domain.AttemptObjectName(attempt, domain.SuffixCredential)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	helper, err := d.watchObject(wctx, ns, "pods", helperName)
	if err != nil {
		return err
	}
	secret, err := d.watchObject(wctx, ns, "secrets", secretName)
	if err != nil {
		return err
	}
	tokensBefore, err := g.host.Tokens(ctx, g.member)
	if err != nil {
		return fmt.Errorf("the member's tokens at Gitea: %w", err)
	}
	r, err := prepare()
	if err != nil || r.Outcome != siteprotocol.OutcomeSucceeded {
		return failed("prepare", r, err)
	}
	// Give the watches the events the API server sent before prepare's
	// answer (the deletions are in them).
	if err := helper.deletedWithin(ctx, 10*time.Second); err != nil {
		return err
	}
	if err := secret.deletedWithin(ctx, 10*time.Second); err != nil {
		return err
	}
	pod, ok := helper.seen().(*corev1.Pod)
	if !ok {
		return fmt.Errorf("the helper Pod %s was never seen", helperName)
	}
	if pod.Spec.NodeName != d.realNode.Name {
		return fmt.Errorf("the helper Pod ran on %q, not the real node %s", pod.Spec.NodeName, d.realNode.Name)
	}
	var term *corev1.ContainerStateTerminated
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == kube.HelperContainer && cs.State.Terminated != nil {
			term = cs.State.Terminated
		}
	}
	if term == nil || term.ExitCode != 0 {
		return fmt.Errorf("the helper's container did not end with exit code 0: %+v", term)
	}
	outcome, err := domain.ParseCheckoutOutcome([]byte(term.Message))
	if err != nil {
		return fmt.Errorf("the helper's termination message: %w", err)
	}
	if outcome.Outcome != siteprotocol.OutcomeSucceeded || outcome.Commit != g.exact || outcome.LFSObjects != 2 {
		return fmt.Errorf("the helper's outcome %+v; want %s with its two LFS objects (weights.bin and %s)", outcome, g.exact, irismodel.Path)
	}
	command := pod.Spec.Containers[0].Command
	if len(command) < 2 || command[1] != "workspace-init" {
		return fmt.Errorf("the helper ran %q", command)
	}
	d.say("the helper Pod %s (uid %s) ran on %s, the real node, as the member's service account %s, in image %s:", pod.Name, pod.UID, pod.Spec.NodeName, pod.Spec.ServiceAccountName, pod.Spec.Containers[0].Image)
	d.say("  %s", strings.Join(command, " "))
	d.say("its termination message: %s, %s fetch, commit %s, %d LFS objects, %d bytes", outcome.Outcome, outcome.Fetch, outcome.Commit, outcome.LFSObjects, outcome.Bytes)
	s, ok := secret.seen().(*corev1.Secret)
	if !ok {
		return fmt.Errorf("the credential Secret %s was never seen", secretName)
	}
	d.say("the credential: Secret %s (uid %s, keys %s), mounted read-only only in the helper", s.Name, s.UID, strings.Join(keys(s.Data), ", "))
	issued := g.provider.Grants()
	if len(tokensBefore) != 0 || len(issued) != 1 || issued[0].User != g.member {
		return fmt.Errorf("grants issued %d (want 1, for %s); the member held %d tokens before", len(issued), g.member.Name, len(tokensBefore))
	}
	grant := issued[0]
	d.say("the grant: %s, a Gitea token of %s with scope read:repository (id %d), minted for this prepare", grant.GrantID, grant.User.Name, grant.TokenID)
	// At Gitea: the token is deleted, and refused.
	tokens, err := g.host.Tokens(ctx, g.member)
	if err != nil {
		return fmt.Errorf("the member's tokens at Gitea: %w", err)
	}
	if len(tokens) != 0 {
		return fmt.Errorf("after prepare the member still holds tokens at Gitea: %+v", tokens)
	}
	status, err := g.tokenStatus(ctx, grant.Token)
	if err != nil {
		return err
	}
	if status != http.StatusUnauthorized {
		return fmt.Errorf("the revoked token: Gitea answered %d, want 401", status)
	}
	d.say("revoked before prepare answered: at Gitea the member holds no token, and the grant's token is refused (%d)", status)
	// At the API server: neither object exists.
	if _, err := d.admin.CoreV1().Pods(ns).Get(ctx, helperName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return fmt.Errorf("after prepare the helper Pod: %v; want it gone", err)
	}
	if _, err := d.admin.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return fmt.Errorf("after prepare the credential Secret: %v; want it gone", err)
	}
	d.say("gone before prepare answered: the API server has neither the Secret nor the helper (404 each; the watch saw both deleted)")
	return nil
}

// tokenStatus is Gitea's answer to a request authenticated with token.
func (g *gitHost) tokenStatus(ctx context.Context, token string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.host.URL+"/api/v1/user", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "token "+token)
	resp, err := g.host.Client().Do(req)
	if err != nil {
		return 0, fmt.Errorf("gitea: %w", err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// seen is the object's last state the watch saw.
func (o *watched) seen() any {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last
}

// watched is what a watch of one object saw: its last state before it
// was deleted, and whether it was.
type watched struct {
	mu      sync.Mutex
	last    any
	deleted chan struct{}
	closed  bool
}

// watchObject watches the object name of resource (pods or secrets) in ns
// until ctx ends.
func (d *demo) watchObject(ctx context.Context, ns, resource, name string) (*watched, error) {
	opts := metav1.ListOptions{FieldSelector: "metadata.name=" + name}
	var (
		w   watch.Interface
		err error
	)
	switch resource {
	case "pods":
		w, err = d.admin.CoreV1().Pods(ns).Watch(ctx, opts)
	case "secrets":
		w, err = d.admin.CoreV1().Secrets(ns).Watch(ctx, opts)
	default:
		return nil, fmt.Errorf("watch %s", resource)
	}
	if err != nil {
		return nil, fmt.Errorf("watch %s %s: %w", resource, name, err)
	}
	o := &watched{deleted: make(chan struct{})}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			o.mu.Lock()
			switch ev.Type {
			case watch.Added, watch.Modified:
				o.last = ev.Object
			case watch.Deleted:
				o.last = ev.Object
				if !o.closed {
					o.closed = true
					close(o.deleted)
				}
			}
			o.mu.Unlock()
		}
	}()
	return o, nil
}

// deletedWithin waits until the watch saw the deletion.
func (o *watched) deletedWithin(ctx context.Context, wait time.Duration) error {
	select {
	case <-o.deleted:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		return errors.New("the watch saw no deletion of the helper Pod or the credential Secret")
	}
}

// gitHostDatabase creates the Git host's database, metallo_demo_githost on
// the local PostgreSQL server (METALLO_DEMO_DATABASE_URL names another
// server), dropping one a killed demo left first; o drops it when the demo
// ends.
func (d *demo) gitHostDatabase(ctx context.Context, o *hostOwner) (string, error) {
	admin := os.Getenv("METALLO_DEMO_DATABASE_URL")
	if admin == "" {
		admin = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	const name = "metallo_demo_githost"
	if err := database.DropPostgres(ctx, admin, name); err != nil {
		return "", fmt.Errorf("the Git host's database (make demo starts the local PostgreSQL server): %w", err)
	}
	url, drop, err := database.CreatePostgres(ctx, admin, name)
	if err != nil {
		return "", fmt.Errorf("the Git host's database: %w", err)
	}
	o.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := drop(ctx); err != nil {
			o.Logf("drop database %s: %v", name, err)
		}
	})
	return url, nil
}

// hostOwner owns the demo's Git host and grant provider as a test owns
// them (githost.TB): its log goes to githost.log, its temporary
// directories under the demo's githost/, its cleanups run at close (when
// the demo ends), and a Fatal panics with hostFailure, which call turns
// into an error.
type hostOwner struct {
	dir, logPath string
	log          *os.File
	mu           sync.Mutex
	n            int
	cleanups     []func()
	failed       bool
}

type hostFailure string

func newHostOwner(dir string) (*hostOwner, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	o := &hostOwner{dir: dir, logPath: filepath.Join(dir, "githost.log")}
	f, err := os.Create(o.logPath)
	if err != nil {
		return nil, err
	}
	o.log = f
	return o, nil
}

// call runs f, which uses the host; a Fatal in it is its error.
func (o *hostOwner) call(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			msg, ok := r.(hostFailure)
			if !ok {
				panic(r)
			}
			err = errors.New(string(msg))
		}
	}()
	f()
	return nil
}

// close runs the cleanups, the last registered first (Gitea stopped, its
// database dropped, the provider closed).
func (o *hostOwner) close() {
	o.mu.Lock()
	cleanups := o.cleanups
	o.cleanups = nil
	o.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	_ = o.log.Close()
}

func (o *hostOwner) Helper() {}

func (o *hostOwner) Log(args ...any) { o.Logf("%s", fmt.Sprint(args...)) }

func (o *hostOwner) Logf(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.log, time.Now().UTC().Format(time.RFC3339)+" "+format+"\n", args...)
}

func (o *hostOwner) Errorf(format string, args ...any) {
	o.mu.Lock()
	o.failed = true
	o.mu.Unlock()
	o.Logf(format, args...)
}

func (o *hostOwner) Fatal(args ...any) { o.Fatalf("%s", fmt.Sprint(args...)) }

func (o *hostOwner) Fatalf(format string, args ...any) {
	o.Errorf(format, args...)
	panic(hostFailure(fmt.Sprintf(format, args...)))
}

func (o *hostOwner) Cleanup(f func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.cleanups = append(o.cleanups, f)
}

func (o *hostOwner) TempDir() string {
	o.mu.Lock()
	o.n++
	dir := filepath.Join(o.dir, fmt.Sprintf("tmp%d", o.n))
	o.mu.Unlock()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		o.Fatalf("temporary directory: %v", err)
	}
	return dir
}

func (o *hostOwner) Failed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failed
}

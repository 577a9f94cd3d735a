package kube_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/grants"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/gittest"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/standins/githost"
	"github.com/pharos-metallo/metallo/standins/grantprovider"
)

// lazyGrants is the grant provider's client, set once the Git host is up.
type lazyGrants struct{ g application.RepositoryGrants }

func (l *lazyGrants) Issue(ctx context.Context, r domain.GrantRequest) (domain.RepositoryGrant, error) {
	return l.g.Issue(ctx, r)
}
func (l *lazyGrants) Revoke(ctx context.Context, id string) error { return l.g.Revoke(ctx, id) }

// A batch Attempt whose workspace is a real repository at an exact commit,
// on the real node: prepare's helper Pod runs `metallo workspace-init` in
// the platform image on the real node, fetching over HTTPS from the Git
// host (listening at the bridge address, its CA from the namespace's
// ConfigMap), LFS objects included, with a token the grant provider
// double minted at the host;
// prepare answers prepared only after the token is deleted at the host and
// the helper and the Secret are gone; then the Job reads the checked-out
// files (the LFS object's digest too), whose content is in its log, and
// writes the workspace beside the checkout and into it, all in a
// namespace that enforces Pod Security restricted (the helper and the Job
// run restricted, as the platform image's user 65532). Real: everything but the grant
// provider (a double minting real tokens): the kubelet, containerd, runc,
// Gitea, git.
func TestAPrepareWithARepositoryOnTheRealNodeChecksItOutAndTheJobReadsAndWritesIt(t *testing.T) {
	t.Parallel()
	lazy := &lazyGrants{}
	members := map[string]githost.User{}
	var host *githost.Host
	var provider *grantprovider.Provider
	var node *kubetest.RealNode
	s := newSite(t, siteOptions{grants: lazy, checkoutCA: "repository-ca", realNode: func(e *kubetest.Env) (string, kube.Scheduling) {
		node = e.RealNode()
		host = gittest.StartReachableAt(t, node.HostIP)
		provider = grantprovider.New(t, host, members)
		lazy.g = grants.NewHTTP(grants.HTTPConfig{BaseURL: provider.URL, Bound: 20 * time.Second}, systemClock{})
		return node.Image(t, kubetest.ImagePlatform), kube.Scheduling{NodeSelector: node.NodeSelector(), Tolerations: node.Tolerations()}
	}})
	owner := host.CreateUser("lab")
	repo := host.CreateRepo(owner, "model")
	reader := host.CreateUser("reader")
	host.AddReader(repo, reader)
	members[s.member] = reader
	wt := host.NewWorkTree()
	wt.TrackLFS("*.bin")
	weights := bytes.Repeat([]byte("weights of model v1\n"), 4096)
	wt.Write("weights.bin", weights)
	wt.Write("README.md", []byte("model v1 at the exact commit\n"))
	exact := wt.Commit("v1")
	wt.Write("README.md", []byte("model v2, the branch head\n"))
	wt.Commit("v2")
	wt.Push(repo, true)
	ctx := testContext(t)
	ca, err := os.ReadFile(host.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "repository-ca"}, Data: map[string]string{kube.CAKey: string(ca)}}
	if _, err := s.e.Client.CoreV1().ConfigMaps(s.ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(host.URL, "https://"+node.HostIP+":") || !strings.HasPrefix(repo.URL, host.URL+"/") {
		t.Fatalf("the repository's URL %s is not at the bridge address %s (host %s)", repo.URL, node.HostIP, host.URL)
	}

	attempt := uuid.NewString()
	prep := s.execute(s.command(siteprotocol.OpPrepare, attempt, map[string]any{"workspace_size_bytes": 64 << 20,
		"repository": map[string]any{"url": repo.URL, "commit": exact, "lfs": true}}))
	want(t, prep, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	t.Logf("prepare: %s", prep.Message)
	for _, get := range []func() error{
		func() error {
			_, err := s.e.Client.CoreV1().Pods(s.ns).Get(ctx, domain.AttemptObjectName(attempt, domain.SuffixHelper), metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := s.e.Client.CoreV1().Secrets(s.ns).Get(ctx, domain.AttemptObjectName(attempt, domain.SuffixCredential), metav1.GetOptions{})
			return err
		},
	} {
		if err := get(); !apierrors.IsNotFound(err) {
			t.Fatalf("after prepare: %v; want the helper and the Secret gone", err)
		}
	}
	if tokens, err := host.Tokens(ctx, reader); err != nil || len(tokens) != 0 || len(provider.Grants()) != 1 {
		t.Fatalf("after prepare the member holds tokens %+v (%v); grants issued %d", tokens, err, len(provider.Grants()))
	}

	// The Job writes the workspace beside the checkout and into it (the
	// platform image's user, as the helper's), in a namespace that enforces
	// Pod Security restricted.
	write := "set -e; cat /workspace/repo/README.md; sha256sum /workspace/repo/weights.bin; ls -a /workspace/repo; " +
		"echo written beside > /workspace/out.txt; echo written into >> /workspace/repo/README.md; mkdir /workspace/repo/results; " +
		"echo result > /workspace/repo/results/r.txt; cat /workspace/out.txt /workspace/repo/results/r.txt; tail -n 1 /workspace/repo/README.md; id -u"
	want(t, s.startArgv(attempt, 300, []string{"sh", "-c", write}, nil), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	done := s.observeUntil(attempt, "succeeded", func(r siteprotocol.Result) bool {
		st := state(t, r)
		if st == siteprotocol.StateFailed {
			t.Fatalf("the Attempt failed: %s", r.Detail)
		}
		return st == siteprotocol.StateSucceeded
	})
	want(t, done, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonObserved)
	pod := s.podOf(attempt)
	log := s.e.PodLogs(s.ns, pod.Name, kube.ContainerName)
	digest := sha256.Sum256(weights)
	if !strings.Contains(log, "model v1 at the exact commit") || !strings.Contains(log, hex.EncodeToString(digest[:])) || pod.Spec.NodeName != node.Name ||
		!strings.Contains(log, "written beside") || !strings.Contains(log, "result\nwritten into") || !strings.Contains(log, "65532") {
		t.Fatalf("the Job on %s read:\n%s", pod.Spec.NodeName, log)
	}
	t.Logf("the Job's log on %s:\n%s", pod.Spec.NodeName, log)
}

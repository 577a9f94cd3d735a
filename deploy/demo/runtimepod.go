package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/runtimepod"
	"github.com/pharos-metallo/metallo/standins/certauthority"
	"github.com/pharos-metallo/metallo/standins/siteagent"
)

// The two ways the demo runs its Runtime (--runtime, METALLO_DEMO_RUNTIME).
const (
	// runtimeProcess: a process of this machine with a kubeconfig and a token file.
	runtimeProcess = "process"
	// runtimePod: deploy/runtime applied to the local cluster (deploy/localcluster/runtime):
	// the install hook Job, then the Deployment's Pod on the real node, authenticated by its
	// projected service-account token, reaching the API server as kubernetes.default.
	runtimePod = "pod"
	// demoFieldManager is the demo's field manager for server-side apply.
	demoFieldManager = "metallo-demo"
)

// runtimeImage is the Runtime's image in the cluster's image manifest (deploy/images).
const runtimeImage = "runtime"

// siteAPIListen is where the central roles listen and the base URL the Runtime is given: plain
// HTTP on loopback for a process Runtime; for a Pod, HTTPS on the bridge's host address (a Pod
// reaches it, and the central roles serve plain HTTP on loopback only) with a certificate the
// local cluster's CA issues for that address, which the demo's own client trusts too
// (docs/operations.md#tls).
func (d *demo) siteAPIListen() (listen string, extra []string, err error) {
	if d.runtimeMode != runtimePod {
		port, err := freePort()
		if err != nil {
			return "", nil, err
		}
		listen = fmt.Sprintf("127.0.0.1:%d", port)
		d.base, d.client = "http://"+listen, http.DefaultClient
		return listen, nil, nil
	}
	l, pair, err := d.bridgeListener()
	if err != nil {
		return "", nil, err
	}
	listen = l.Addr().String()
	_ = l.Close()
	cert, key := d.path("site-api.crt"), d.path("site-api.key")
	if err := pair.WriteFiles(cert, key); err != nil {
		return "", nil, err
	}
	ca := d.ca
	d.caFile = ca.CAFile
	d.base = "https://" + listen
	d.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}}}
	return listen, []string{"--tls-cert-file", cert, "--tls-key-file", key}, nil
}

// bridgeListener listens on a free port of the real node's bridge address, where the
// cluster's Pods reach this machine, and issues a serving pair for that address with the local
// cluster's CA (read once, kept in d.ca).
func (d *demo) bridgeListener() (net.Listener, certauthority.Pair, error) {
	host := d.realNode.HostIP
	if host == "" {
		return nil, certauthority.Pair{}, errors.New("cluster.json names no host address of the real node's bridge (make cluster-down, then make cluster-up)")
	}
	if d.ca == nil {
		ca, err := certauthority.ReadCA(filepath.Join(d.clusterDir, "pki", "ca.crt"), filepath.Join(d.clusterDir, "pki", "ca.key"))
		if err != nil {
			return nil, certauthority.Pair{}, fmt.Errorf("the local cluster's CA: %w", err)
		}
		d.ca = ca
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, certauthority.Pair{}, fmt.Errorf("listen on the bridge's host address %s: %w", host, err)
	}
	pair, err := d.ca.IssuePair(host)
	if err != nil {
		_ = l.Close()
		return nil, certauthority.Pair{}, err
	}
	return l, pair, nil
}

// startRuntimePod installs the Runtime as a Site does: deploy/localcluster/runtime under the
// demo's own overlay (var/demo/runtime/overlay: images by digest, the authority, the CA, the
// permission provider's policy), server-side applied; the install hook Job run to its end and
// deleted; then the Deployment, whose Pod must run on the real node and have its first
// request accepted by the Site API (its projected token reviewed by TokenReview).
func (d *demo) startRuntimePod(ctx context.Context, grants []byte) error {
	d.section("The Site Runtime as a Pod: deploy/runtime applied (install hook, Deployment), its projected token")
	if d.realNode.Images[runtimeImage] == "" {
		return fmt.Errorf("the real node has no %s image (make image)", runtimeImage)
	}
	if err := siteagent.EnsureRuntimeIdentity(ctx, d.admin); err != nil {
		return err
	}
	ca, err := os.ReadFile(d.caFile)
	if err != nil {
		return err
	}
	provider, caConfigMap, repositoryAbout := d.repositoryGrants()
	base, err := filepath.Abs(filepath.Join("deploy", "localcluster", "runtime"))
	if err != nil {
		return err
	}
	overlay := runtimepod.Overlay{Base: base, Namespace: siteagent.RuntimeNamespace, Image: d.realNode.Images[runtimeImage],
		Environment: environment, Authority: d.base, BatchImage: d.realNode.Images[platformImage],
		CAPEM: ca, Policy: grants, Literals: []string{"METALLO_PULL_WAIT=2s", "METALLO_SERVING_RUNTIMES=" + servingRuntimes,
			// The grant provider over HTTPS on the bridge's host address; its certificate is
			// the local cluster CA's, which --repository-grants-ca-file makes the Runtime trust
			// for it (the Site API's through --ca-file, the same file).
			"METALLO_REPOSITORY_GRANTS=" + provider, "METALLO_REPOSITORY_CA_CONFIGMAP=" + caConfigMap,
			"METALLO_REPOSITORY_GRANTS_CA_FILE=/etc/metallo/site-api-ca/ca.crt"}}
	dir := d.path("runtime/overlay")
	objs, err := overlay.Render(dir)
	if err != nil {
		return err
	}
	applier, err := runtimepod.NewApplier(d.adminCfg, demoFieldManager)
	if err != nil {
		return err
	}
	// A previous demo's Runtime (its Deployment, claim and records) goes first: this one
	// starts on fresh journals, as the central roles do.
	if err := d.removeRuntimePod(ctx); err != nil {
		return err
	}
	d.podInstalled = true
	if err := applier.ApplyKinds(ctx, objs, "Namespace", "ServiceAccount", "Role", "RoleBinding", "ConfigMap", "PersistentVolumeClaim"); err != nil {
		return err
	}
	d.say("kustomize build of %s (over deploy/localcluster/runtime, over deploy/runtime), applied server-side as %s", rel(dir), demoFieldManager)
	var job batchv1.Job
	if err := convert(objs, "Job", runtimepod.InstallJob, &job); err != nil {
		return err
	}
	log, err := runtimepod.Install(ctx, d.admin, siteagent.RuntimeNamespace, &job, 4*time.Minute)
	if err != nil {
		return err
	}
	d.say("install hook Job %s ran on the real node and was deleted (as Argo CD's HookSucceeded does): %s", job.Name, lastLine(log))
	rec, err := d.admin.CoreV1().ConfigMaps(siteagent.RuntimeNamespace).Get(ctx, runtimepod.Record, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("the install hook recorded no installation: %w", err)
	}
	d.say("installation record: ConfigMap %s/%s (journals on claim %s)", siteagent.RuntimeNamespace, rec.Name, runtimepod.JournalsClaim)
	if err := applier.ApplyKinds(ctx, objs, "Deployment"); err != nil {
		return err
	}
	pod, err := runtimepod.RunningPod(ctx, d.admin, siteagent.RuntimeNamespace, runtimepod.Deployment, "", 4*time.Minute)
	if err != nil {
		return err
	}
	if pod.Spec.NodeName != d.realNode.Name {
		return fmt.Errorf("the Runtime's Pod %s runs on %s, not the real node", pod.Name, pod.Spec.NodeName)
	}
	d.podName = pod.Name
	// Its first request the Site API accepted: the Pod's projected token passed the TokenReview.
	const accepted = "metallo_runtime_last_accepted_request_timestamp_seconds"
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if v, err := gauge(ctx, net.JoinHostPort(pod.Status.PodIP, "9090"), accepted); err == nil && v > 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Runtime's Pod %s made no accepted request to the Site API within 2 minutes; see %s", pod.Name, rel(d.path("runtime.log")))
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	d.say("Deployment %s: Pod %s on %s (image %s), serve --role runtime with its in-cluster configuration (kubernetes.default through kube-proxy)",
		runtimepod.Deployment, pod.Name, pod.Spec.NodeName, d.realNode.Images[runtimeImage])
	d.say("its Site API token: the projected service-account token (audience metallo) of %s, accepted after a TokenReview;", siteagent.RuntimeUser())
	d.say("it trusts the Site API's certificate by the local cluster's CA (--ca-file from ConfigMap metallo-site-api-ca)")
	d.say("permissions from the policy file of ConfigMap metallo-runtime-permissions (standalone Site): the member may start, read and cancel")
	d.say("%s", repositoryAbout)
	d.say("its log is saved to %s when the demo ends", rel(d.path("runtime.log")))
	return nil
}

// removeRuntimePod saves the Runtime Pod's log (when there is one) to var/demo/runtime.log and
// removes what the install created in metallo-runtime but the namespace, the service account
// and the RBAC objects (the cluster's other users keep them).
func (d *demo) removeRuntimePod(ctx context.Context) error {
	if d.podName != "" {
		b, err := d.admin.CoreV1().Pods(siteagent.RuntimeNamespace).GetLogs(d.podName, &corev1.PodLogOptions{Container: "runtime"}).DoRaw(ctx)
		if err != nil {
			b = []byte(fmt.Sprintf("(the log of Pod %s/%s: %v)\n", siteagent.RuntimeNamespace, d.podName, err))
		}
		if err := os.WriteFile(d.path("runtime.log"), b, 0o600); err != nil {
			return err
		}
	}
	return runtimepod.Remove(ctx, d.admin, siteagent.RuntimeNamespace, func(name string) bool {
		return name == runtimepod.Deployment || name == runtimepod.Record || strings.HasPrefix(name, "metallo-site-api-ca") || strings.HasPrefix(name, "metallo-runtime-permissions")
	})
}

// stopRuntimePod removes the demo's Runtime Pod and its install when the demo ends.
func (d *demo) stopRuntimePod() {
	if !d.podInstalled {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := d.removeRuntimePod(ctx); err != nil {
		fmt.Fprintf(d.out, "    (removing the Runtime's Pod: %v)\n", err)
	}
}

// convert sets out to the rendered object of kind and name.
func convert(objs []*unstructured.Unstructured, kind, name string, out any) error {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, out)
		}
	}
	return fmt.Errorf("deploy/localcluster/runtime renders no %s %s", kind, name)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// gauge scrapes the metrics listener at addr (host:port, /metrics in the
// Prometheus text format) and returns the value of the gauge name without
// labels; an error when the scrape fails or the gauge is absent.
func gauge(ctx context.Context, addr, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("the metrics of %s: %w", addr, err)
	}
	f, ok := families[name]
	if !ok || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetGauge() == nil {
		return 0, fmt.Errorf("%s serves no gauge %s", addr, name)
	}
	return f.GetMetric()[0].GetGauge().GetValue(), nil
}

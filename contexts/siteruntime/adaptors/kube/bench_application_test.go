package kube_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	kubeapp "github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/families/appservice"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// BenchmarkApplicationStart measures application Attempts started per
// second against the local cluster: one start command through the
// registry and the application executor (the binding, the namespace's
// label, the policy-file permission, the services.sqlite records before
// and after each create, the Deployment and then the Service created by
// impersonating the member), one at a time as the ordered worker performs
// them. Baseline in the same run: raw client-go creates of the same
// Deployment and Service as the administrator, one pair at a time, in an
// unguarded namespace of the same cluster. The paths alternate for 3
// rounds of 40; prepares are done before timing. KWOK simulates the
// Nodes. METALLO_BENCH_APP_REPORT names a file that receives the
// BENCHMARKS.md section.
func BenchmarkApplicationStart(b *testing.B) {
	s := newAppSite(b, appOptions{})
	raw := newAppSite(b, appOptions{siteOptions: siteOptions{noPolicy: true}})
	var rows []benchRow
	for round := 1; round <= benchRounds; round++ {
		row := benchRow{round: round}
		type pair struct {
			dep *appsv1.Deployment
			svc *corev1.Service
		}
		unguarded := make([]pair, benchAttempts)
		for i := range unguarded {
			unguarded[i].dep, unguarded[i].svc = raw.renderApp(uuid.NewString())
		}
		row.raw, row.rawP99 = measure(benchAttempts, func(i int) {
			if _, err := raw.e.Client.AppsV1().Deployments(raw.ns).Create(testContext(b), unguarded[i].dep, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			if _, err := raw.e.Client.CoreV1().Services(raw.ns).Create(testContext(b), unguarded[i].svc, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		})
		attempts := make([]string, benchAttempts)
		for i := range attempts {
			attempts[i] = uuid.NewString()
			want(b, s.prepareApp(attempts[i]), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
		}
		row.starts, row.startP99 = measure(benchAttempts, func(i int) {
			want(b, s.simple(siteprotocol.OpStart, attempts[i]), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
		})
		rows = append(rows, row)
		b.Logf("round %d: %.1f raw Deployment+Service creates/s, %.1f application Attempts started/s", round, row.raw, row.starts)
	}
	report := appBenchReport(rows)
	fmt.Print(report)
	if path := os.Getenv("METALLO_BENCH_APP_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// renderApp renders the Deployment and Service an application prepare of
// attempt saves (the same renderer and inputs), with the spec digest
// stamped as Create stamps it.
func (s *site) renderApp(attempt string) (*appsv1.Deployment, *corev1.Service) {
	s.t.Helper()
	spec := application.ApplicationServiceSpec{
		Identity:  application.ObjectIdentity{RunID: runOf(attempt), AttemptID: attempt, MemberID: s.member, ProjectID: s.project, CommandID: uuid.NewString()},
		Namespace: s.ns, ServiceAccount: s.account(), Image: serviceImage, Port: 8080,
		Readiness: &siteprotocol.Readiness{Path: "/healthz", PeriodSeconds: 5}, Demand: map[string]int64{"cpu": 200, "memory": 128 << 20},
		WorkspaceClaim: domain.AttemptObjectName(attempt, domain.SuffixWorkspace), ProgressDeadlineSeconds: 600,
	}
	d, err := kubeapp.NewRenderer(s.renderer).RenderDeployment(spec)
	if err != nil {
		s.t.Fatal(err)
	}
	v, err := kubeapp.NewRenderer(s.renderer).RenderService(spec)
	if err != nil {
		s.t.Fatal(err)
	}
	var dep appsv1.Deployment
	var svc corev1.Service
	if err := json.Unmarshal(d.Spec, &dep); err != nil {
		s.t.Fatal(err)
	}
	if err := json.Unmarshal(v.Spec, &svc); err != nil {
		s.t.Fatal(err)
	}
	dep.Annotations = map[string]string{kube.AnnotationSpecDigest: siteprotocol.Digest(d.Spec)}
	dep.Spec.Template.Annotations = map[string]string{kube.AnnotationSpecDigest: siteprotocol.Digest(d.Spec)}
	svc.Annotations = map[string]string{kube.AnnotationSpecDigest: siteprotocol.Digest(v.Spec)}
	return &dep, &svc
}

func appBenchReport(rows []benchRow) string {
	var w bytes.Buffer
	fmt.Fprintf(&w, "## Application start\n\n")
	fmt.Fprintf(&w, "Application Attempts started per second against the local cluster: one `start` command at a time\n")
	fmt.Fprintf(&w, "through the Runtime's registry and application executor (binding from the journal, the namespace's\n")
	fmt.Fprintf(&w, "`project-id` label, the policy-file permission, the `services.sqlite` records before and after each\n")
	fmt.Fprintf(&w, "create, the Deployment and then the Service created by impersonating the member), as the ordered worker\n")
	fmt.Fprintf(&w, "performs them. Baseline, same run, same cluster: raw client-go creates of the same Deployment and\n")
	fmt.Fprintf(&w, "Service as the administrator, one pair at a time, in a namespace the admission policies do not guard.\n")
	fmt.Fprintf(&w, "The paths alternate for %d rounds of %d; prepares are done before timing; KWOK runs the Pods on fake\n", benchRounds, benchAttempts)
	fmt.Fprintf(&w, "Nodes meanwhile.\n\n")
	fmt.Fprintf(&w, "| round | raw admin Deployment+Service creates/s | p99 | application Attempts started/s | p99 | started / raw |\n")
	fmt.Fprintf(&w, "| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rows {
		fmt.Fprintf(&w, "| %d | %.1f | %s | %.1f | %s | %.2f |\n", r.round, r.raw, r.rawP99, r.starts, r.startP99, r.starts/r.raw)
	}
	med := func(f func(benchRow) float64) float64 {
		v := make([]float64, len(rows))
		for i, r := range rows {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	raw, starts := med(func(r benchRow) float64 { return r.raw }), med(func(r benchRow) float64 { return r.starts })
	fmt.Fprintf(&w, "| **median** | **%.1f** | | **%.1f** | | **%.2f** |\n\n", raw, starts, starts/raw)
	fmt.Fprintf(&w, "A start makes one namespace read, one account read and one permission check (one access check per\n")
	fmt.Fprintf(&w, "command, its identity serving both creates), two\n")
	fmt.Fprintf(&w, "impersonated creates with their admission policies and four durable `services.sqlite` commits.\n\n")
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(&w, "- Machine: %d CPUs (%s, %s/%s), shared with other work: load average %s at the end of the run.\n", runtime.NumCPU(), cpuModel(), runtime.GOOS, runtime.GOARCH, strings.Join(strings.Fields(string(load))[:min(3, len(strings.Fields(string(load))))], " "))
	fmt.Fprintf(&w, "- Date: %s.\n", time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&w, "- Command: `make bench-native` (`go test -run '^$' -bench '^BenchmarkApplicationStart$' -benchtime=1x ./contexts/siteruntime/adaptors/kube/`).\n")
	return w.String()
}

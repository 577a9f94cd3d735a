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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	kubeinference "github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/families/inference"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// BenchmarkInferenceStart measures inference Attempts started per second
// against the local cluster: one start command through the registry and
// the inference executor (the binding, the namespace's label, the
// policy-file permission, the services.sqlite records before and after the
// create, the InferenceService created by impersonating the member,
// through KServe's webhooks), one at a time as the ordered worker performs
// them. Baseline in the same run: raw client-go creates of the same
// InferenceService as the administrator, one at a time, in an unguarded
// namespace of the same cluster. The paths alternate for 3 rounds of 40;
// prepares are done before timing. KServe's controller reconciles them
// meanwhile; KWOK simulates the Nodes. METALLO_BENCH_INFERENCE_REPORT names
// a file that receives the BENCHMARKS.md section.
func BenchmarkInferenceStart(b *testing.B) {
	s := newIsvcSite(b, isvcOptions{})
	raw := newIsvcSite(b, isvcOptions{siteOptions: siteOptions{noPolicy: true}})
	var rows []benchRow
	for round := 1; round <= benchRounds; round++ {
		row := benchRow{round: round}
		unguarded := make([]*unstructured.Unstructured, benchAttempts)
		for i := range unguarded {
			unguarded[i] = raw.renderIsvc(uuid.NewString())
		}
		row.raw, row.rawP99 = measure(benchAttempts, func(i int) {
			if _, err := raw.e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(raw.ns).Create(testContext(b), unguarded[i], metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		})
		attempts := make([]string, benchAttempts)
		for i := range attempts {
			attempts[i] = uuid.NewString()
			want(b, s.execute(s.command(siteprotocol.OpPrepare, attempts[i], isvcPrepare())), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
		}
		row.starts, row.startP99 = measure(benchAttempts, func(i int) {
			want(b, s.simple(siteprotocol.OpStart, attempts[i]), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
		})
		rows = append(rows, row)
		b.Logf("round %d: %.1f raw InferenceService creates/s, %.1f inference Attempts started/s", round, row.raw, row.starts)
	}
	report := inferenceBenchReport(rows)
	fmt.Print(report)
	if path := os.Getenv("METALLO_BENCH_INFERENCE_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// renderIsvc renders the InferenceService an inference prepare of attempt
// saves (the same renderer and inputs), with the spec digest stamped as
// Create stamps it.
func (s *site) renderIsvc(attempt string) *unstructured.Unstructured {
	s.t.Helper()
	obj, err := kubeinference.NewRenderer(s.renderer).RenderInferenceService(application.InferenceServiceSpec{
		Identity:  application.ObjectIdentity{RunID: runOf(attempt), AttemptID: attempt, MemberID: s.member, ProjectID: s.project, CommandID: uuid.NewString()},
		Namespace: s.ns, ServiceAccount: s.account(), DeploymentMode: application.DeploymentModeStandard, ModelFormat: "huggingface",
		Runtime: kubetest.HuggingFaceRuntime, Args: caseModelArgs, Demand: map[string]int64{"cpu": 1000, "memory": 2 << 30},
		WorkspaceClaim: domain.AttemptObjectName(attempt, domain.SuffixWorkspace),
	})
	if err != nil {
		s.t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(obj.Spec, &u.Object); err != nil {
		s.t.Fatal(err)
	}
	ann := u.GetAnnotations()
	ann[kube.AnnotationSpecDigest] = siteprotocol.Digest(obj.Spec)
	u.SetAnnotations(ann)
	return u
}

func inferenceBenchReport(rows []benchRow) string {
	var w bytes.Buffer
	fmt.Fprintf(&w, "## Inference start\n\n")
	fmt.Fprintf(&w, "Inference Attempts started per second against the local cluster: one `start` command at a time\n")
	fmt.Fprintf(&w, "through the Runtime's registry and inference executor (binding from the journal, the namespace's\n")
	fmt.Fprintf(&w, "`project-id` label, the policy-file permission, the `services.sqlite` records before and after the\n")
	fmt.Fprintf(&w, "create, the InferenceService created by impersonating the member through KServe's webhooks), as the\n")
	fmt.Fprintf(&w, "ordered worker performs them. Baseline, same run, same cluster: raw client-go creates of the same\n")
	fmt.Fprintf(&w, "InferenceService as the administrator, one at a time, in a namespace the admission policies do not guard.\n")
	fmt.Fprintf(&w, "The paths alternate for %d rounds of %d; prepares are done before timing; KServe's controller reconciles\n", benchRounds, benchAttempts)
	fmt.Fprintf(&w, "them and KWOK runs the predictor Pods on fake Nodes meanwhile.\n\n")
	fmt.Fprintf(&w, "| round | raw admin InferenceService creates/s | p99 | inference Attempts started/s | p99 | started / raw |\n")
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
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(&w, "- Machine: %d CPUs (%s, %s/%s), shared with other work: load average %s at the end of the run.\n", runtime.NumCPU(), cpuModel(), runtime.GOOS, runtime.GOARCH, strings.Join(strings.Fields(string(load))[:min(3, len(strings.Fields(string(load))))], " "))
	fmt.Fprintf(&w, "- Date: %s.\n", time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&w, "- Command: `make bench-native` (`go test -run '^$' -bench '^BenchmarkInferenceStart$' -benchtime=1x ./contexts/siteruntime/adaptors/kube/`).\n")
	return w.String()
}

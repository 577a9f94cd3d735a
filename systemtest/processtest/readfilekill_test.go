package processtest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/systemtest/harness"
)

// readFileSteps are the durable steps of a read-file that finds no reader
// left, in order, as the failpoint that follows each (name@n in a process
// that starts with that read): the record creating, the create, the record
// created, the record deleting, the delete, the record removed
// (docs/site-runtime.md#the-workspace-reader).
var readFileSteps = []string{
	application.FailAfterNativeRecord + "@1", application.FailAfterNativeCall + "@1", application.FailAfterNativeRecord + "@2",
	application.FailAfterNativeRecord + "@3", application.FailAfterNativeCall + "@2", application.FailAfterNativeRecord + "@4",
}

// TestKilledAtEachDurableStepOfAReadFileEveryReadAnswersTheExactBytesAndNoReaderIsLeft
// is the kill test of read-file on the real node: the metallo binary's
// runtime role renders every Pod onto the real node; a batch Job's real
// container writes a file into its workspace; then one read-file of it per
// durable step is appended, the Runtime is SIGKILLed by that step's
// failpoint (between the record before the reader's create, the create,
// the record after it, the record before its delete, the delete and the
// record after it) and restarted without failpoints, which recovers the
// read. Every read is acknowledged with the file's exact bytes (the
// recovery adopted the reader it left and read it, or removed a reader
// being removed by UID and read again), every sent
// result is byte-identical to the recorded one, and no reader is left.
// Real: the processes, the API server, admission, the scheduler, the
// kubelet, containerd, the volume, pods/log; KWOK is not involved.
func TestKilledAtEachDurableStepOfAReadFileEveryReadAnswersTheExactBytesAndNoReaderIsLeft(t *testing.T) {
	s := harness.NewSetup(t, harness.WithProject(), harness.WithMember(), harness.OnTheRealNode(), harness.WithPlatformImage(),
		harness.WithGrants(domain.ActionStart, domain.ActionRead), harness.Bound())
	e, ctx, site, attempt := s.Env, s.Ctx, s.Site, uuid.NewString()
	flags := []string{"--read-file-timeout", "1m"}
	workload := func(op siteprotocol.Operation, payload any) string {
		return s.Command(siteprotocol.FamilyBatch, op, attempt, payload)
	}
	workload(siteprotocol.OpPrepare, map[string]any{"workspace_size_bytes": 1 << 20})
	start := workload(siteprotocol.OpStart, map[string]any{"demand": map[string]int64{"cpu": 100, "memory": 64 << 20}, "time_limit_seconds": 600,
		"argv": []string{"sh", "-c", `printf 'read me \377\376 exactly\n' > /workspace/result.txt`}})
	p := s.Start("", flags...)
	s.WaitAcknowledged(p, start)
	e.WaitForJob(domain.AttemptObjectName(attempt, ""), 3*time.Minute, "Complete", func(j *batchv1.Job) bool {
		_, ok := kubetest.JobCondition(j, batchv1.JobComplete)
		return ok
	})
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(workspaceDir(ctx, t, e, attempt), "result.txt"))
	if err != nil || len(want) == 0 {
		t.Fatalf("the container's file: %q (%v)", want, err)
	}

	var reads []string
	for i, fp := range readFileSteps {
		id := workload(siteprotocol.OpReadFile, map[string]any{"path": "result.txt", "max_bytes": 4096})
		reads = append(reads, id)
		killed := s.Start(fp, flags...)
		select {
		case <-killed.Done():
		case <-time.After(3 * time.Minute):
			t.Fatalf("step %d (%s): the Runtime was not killed within 3 minutes:\n%s", i, fp, killed.Output())
		}
		if m := killLine.FindStringSubmatch(killed.Output()); !killed.Killed() || m == nil {
			t.Fatalf("step %d (%s): exited (%v) without being killed:\n%s", i, fp, killed.ExitErr(), killed.Output())
		}
		if rec, err := site.Command(id); err == nil && len(rec.Result) > 0 {
			t.Fatalf("step %d (%s): the read was acknowledged before the kill", i, fp)
		}
		s.RunUntilAcknowledged(id, flags...)
	}

	recorded := map[int64][]byte{}
	for i, id := range reads {
		rec, err := site.Command(id)
		if err != nil {
			t.Fatal(err)
		}
		r, err := siteprotocol.ParseResult(rec.Result)
		if err != nil {
			t.Fatal(err)
		}
		recorded[r.Sequence] = rec.Result
		if r.Outcome != siteprotocol.OutcomeSucceeded || r.Reason != siteprotocol.ReasonRead {
			t.Fatalf("read %d (killed at %s): %s", i, readFileSteps[i], rec.Result)
		}
		var d siteprotocol.ReadFileDetail
		if err := json.Unmarshal(r.Detail, &d); err != nil {
			t.Fatal(err)
		}
		if got, err := base64.StdEncoding.DecodeString(d.ContentBase64); err != nil || !bytes.Equal(got, want) || d.Truncated {
			t.Fatalf("read %d (killed at %s): %q truncated %v; the file holds %q", i, readFileSteps[i], got, d.Truncated, want)
		}
	}
	s.CheckSentResultsAreRecorded(recorded)
	if _, err := e.Client.CoreV1().Pods(e.Namespace).Get(ctx, domain.AttemptObjectName(attempt, domain.SuffixReader), metav1.GetOptions{}); err == nil {
		t.Fatal("a reader is left")
	}
	t.Logf("%d read-files, each killed at one durable step and recovered: exact bytes, no reader left", len(reads))
}

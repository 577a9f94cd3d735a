package application

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Errors of the WorkloadPods port (docs/site-runtime.md#private-reads).
var (
	// ErrNativeIdentityMismatch is returned (wrapped, naming the broken
	// link) when the Attempt's native identity is not exact: the object
	// under the recorded name has another UID, a Pod labelled with the
	// Attempt has a controller chain that does not end at the recorded
	// object by UID, or an object of the chain lacks the Attempt's
	// identity labels. The read is refused native-identity-mismatch and
	// reads nothing.
	ErrNativeIdentityMismatch = errors.New("native identity mismatch")
	// ErrWorkloadGone is returned (wrapped) when the recorded object no
	// longer exists: the read fails native-missing.
	ErrWorkloadGone = errors.New("workload gone")
	// ErrNoWorkloadPod is returned (wrapped) when the recorded object
	// exists without a Pod (none yet, or none any more): read-logs fails
	// native-missing, proxy endpoint-unavailable.
	ErrNoWorkloadPod = errors.New("no workload pod")
	// ErrEndpointUnavailable is returned (wrapped) by ServiceProxy when the
	// API server could not reach an endpoint of the Service (none ready,
	// none reachable): proxy fails endpoint-unavailable.
	ErrEndpointUnavailable = errors.New("endpoint unavailable")
	// ErrLogUnavailable is returned (wrapped, with the native system's
	// message) when the kubelet has no log of the container to give (it
	// has not started yet, or the node is unreachable): the read fails
	// native-error.
	ErrLogUnavailable = errors.New("log unavailable")
)

// WorkloadPod is the Pod a private read reads: the one whose controller
// chain ends, by UID, at the Attempt's recorded object.
type WorkloadPod struct {
	Namespace string
	Name      string
	UID       string
	// Containers are the Pod's containers (spec.containers), in order.
	Containers []string
	// Main is the workload's own container, read when the payload names
	// none.
	Main string
	// Ready is the Pod's Ready condition.
	Ready bool
	// Node is the node the Pod is bound to (spec.nodeName; empty while
	// it is not scheduled).
	Node string
	// Started are the containers that have started, now or before
	// (running, terminated, or with a last termination): the ones with a
	// log to read.
	Started []string
}

// Ref is the Pod's native reference.
func (p WorkloadPod) Ref() siteprotocol.NativeRef {
	return siteprotocol.NativeRef{Kind: domain.KindPod, Namespace: p.Namespace, Name: p.Name, UID: p.UID}
}

// LogTail is the end of a container's log.
type LogTail struct {
	// Bytes are the log's last bytes (at most the asked tail), exactly.
	Bytes []byte
	// Truncated is true when the log held more bytes than Bytes.
	Truncated bool
}

// WorkloadPods finds and reads an Attempt's workload Pods as the Runtime
// (docs/site-runtime.md#private-reads); it never acts as the member.
type WorkloadPods interface {
	// WorkloadPod returns the Pod of root — the Attempt's recorded object
	// (a Job, a Deployment, an InferenceService) with its recorded UID,
	// whose saved specification is saved — after checking the exact
	// native identity: root's name holds root.UID; every Pod labelled with
	// the Attempt has the controller chain of root's kind (Pod → Job; Pod
	// → ReplicaSet → Deployment; Pod → ReplicaSet → Deployment →
	// InferenceService), each link the controller owner reference whose
	// UID is the next object's live UID, ending at root; every object of
	// the chain carries id's run, attempt, member and Project labels; and
	// every Pod passes the family's own rule against saved (an inference
	// Pod's private argument rule, domain.CheckInferenceArgs). Errors:
	// wrapping ErrNativeIdentityMismatch (the first broken link or rule),
	// ErrWorkloadGone (root gone), ErrNoWorkloadPod (no Pod), or any other
	// error (a failed read; nothing is known).
	WorkloadPod(ctx context.Context, root siteprotocol.NativeRef, saved []byte, id ObjectIdentity) (WorkloadPod, error)
	// PodLog returns the last tailBytes bytes of container's log in pod,
	// exactly, and whether the log held more. Errors: wrapping
	// ErrLogUnavailable when the kubelet has no log to give; any other
	// error is a failed read.
	PodLog(ctx context.Context, pod WorkloadPod, container string, tailBytes int64) (LogTail, error)
}

// PrivateReads performs a family's private reads on its Lifecycle
// (docs/site-runtime.md#private-reads): read-logs of the Attempt's
// workload Pod, and proxy to its Service (WithProxy). Before anything is
// read from the cluster:
//
//   - the Attempt's object of the family's root kind (the Job; the
//     Deployment; the InferenceService) is recorded with its UID (refused not-started), for the
//     command's Run, member and Project — another member of the Project
//     reading the Attempt is refused attempt-conflict — in the namespace
//     of the command's binding;
//   - the binding is current, its namespace belongs to the Project, the
//     member's live service account has the binding's UID and the
//     permission provider allows execution.read now (Access.Authorize: a
//     fresh answer, as for starts);
//   - the native identity is exact (WorkloadPods.WorkloadPod): otherwise
//     refused native-identity-mismatch.
//
// A read has no native effect: Recover reads again (a result that was
// never saved was never sent), so the saved result is the one sent.
type PrivateReads struct {
	life  *Lifecycle
	specs WorkspaceSpecs
	pods  WorkloadPods
	root  string
	// proxy and service (the recorded kind proxied to; empty: the
	// Service a controller makes from root) are set by WithProxy.
	proxy   ServiceProxy
	service string
	// files is set by WithFiles (read-file).
	files *fileReads
	cfg   ReadConfig
}

// ReadConfig bounds a family's private reads
// (docs/site-runtime.md#command-bounds).
type ReadConfig struct {
	// ProxyTimeout bounds a proxy's exchange with the service, from its
	// send: connecting, the answer's headers and its whole body (default
	// DefaultProxyTimeout; --proxy-timeout).
	ProxyTimeout time.Duration
	// LogsTimeout bounds a read-logs' reads of the log, from the command's
	// start (CommandStart; default DefaultReadLogsTimeout;
	// --read-logs-timeout).
	LogsTimeout time.Duration
}

func (c ReadConfig) withDefaults() ReadConfig {
	if c.ProxyTimeout <= 0 {
		c.ProxyTimeout = DefaultProxyTimeout
	}
	if c.LogsTimeout <= 0 {
		c.LogsTimeout = DefaultReadLogsTimeout
	}
	return c
}

// NewPrivateReads returns the private reads of the family whose Lifecycle
// is life, whose records' identity specs reads, over pods, bounded by cfg;
// root is the recorded kind its Pods' controller chains end at.
func NewPrivateReads(life *Lifecycle, specs WorkspaceSpecs, pods WorkloadPods, root string, cfg ReadConfig) *PrivateReads {
	return &PrivateReads{life: life, specs: specs, pods: pods, root: root, cfg: cfg.withDefaults()}
}

// ReadLogs answers read-logs: the last tail_bytes bytes of the container's
// log (the workload's main container when the payload names none), exact,
// base64, with truncated when the log held more. Refusals as PrivateReads
// says; a container the Pod does not have is invalid-payload; a recorded
// object removed (or gone, or without a Pod) fails native-missing; a
// container that never started, or a log the kubelet cannot give, fails
// native-error; reads that have not ended ReadConfig.LogsTimeout after
// the command's start fail deadline-exceeded
// (docs/site-runtime.md#command-bounds). Errors are failed reads.
func (r *PrivateReads) ReadLogs(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error) {
	p, err := siteprotocol.DecodePayload[siteprotocol.ReadLogsPayload](cmd)
	if err != nil {
		return domain.Refused(siteprotocol.ReasonInvalidPayload, "read-logs payload: %v", err), nil
	}
	if p.TailBytes < 1 || p.TailBytes > siteprotocol.MaxReadBytes {
		return domain.Refused(siteprotocol.ReasonInvalidPayload, "read-logs payload: tail_bytes must be between 1 and %d", siteprotocol.MaxReadBytes), nil
	}
	rec, id, refusal, err := r.check(ctx, cmd)
	if refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	pod, refusal, err := r.pod(ctx, *rec, id, noPodMissing)
	if refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	container := p.Container
	if container == "" {
		container = pod.Main
	}
	if !slices.Contains(pod.Containers, container) {
		return domain.Refused(siteprotocol.ReasonInvalidPayload, "Pod %s of attempt %s has no container %q; its containers are %v",
			pod.Name, cmd.AttemptID, container, pod.Containers), nil
	}
	if !slices.Contains(pod.Started, container) {
		// The API server answers an unscheduled Pod's log with nothing at
		// all: a container that never started has no log to give.
		where := "its Pod is not scheduled to a node"
		if pod.Node != "" {
			where = "it is waiting to start on node " + pod.Node
		}
		return domain.Answer{Outcome: siteprotocol.OutcomeFailed, Reason: siteprotocol.ReasonNativeError,
			Message:    fmt.Sprintf("container %s of Pod %s/%s has not started, so it has no log (%s)", container, pod.Namespace, pod.Name, where),
			NativeRefs: []siteprotocol.NativeRef{pod.Ref()}}, nil
	}
	// The log's reads are bounded from the command's start, also after a
	// restart (docs/site-runtime.md#command-bounds).
	until := commandDeadline(ctx, r.cfg.LogsTimeout)
	lctx, cancel := context.WithDeadline(ctx, until)
	end := beginWait(ctx, fmt.Sprintf("the log of container %s of Pod %s/%s", container, pod.Namespace, pod.Name), until)
	tail, err := r.pods.PodLog(lctx, pod, container, p.TailBytes)
	atBound := err != nil && ctx.Err() == nil && lctx.Err() != nil
	cancel()
	if atBound {
		end(waitAtBound)
	} else {
		end(waitDone)
	}
	switch {
	case atBound:
		return domain.Answer{Outcome: siteprotocol.OutcomeFailed, Reason: siteprotocol.ReasonDeadlineExceeded,
			Message: fmt.Sprintf("the log of container %s of Pod %s/%s was not read within %s of the read's start, the read's bound; nothing is answered",
				container, pod.Namespace, pod.Name, r.cfg.LogsTimeout),
			NativeRefs: []siteprotocol.NativeRef{pod.Ref()}}, nil
	case errors.Is(err, ErrLogUnavailable):
		return domain.Answer{Outcome: siteprotocol.OutcomeFailed, Reason: siteprotocol.ReasonNativeError,
			Message:    fmt.Sprintf("the log of container %s of Pod %s/%s cannot be read: %v", container, pod.Namespace, pod.Name, err),
			NativeRefs: []siteprotocol.NativeRef{pod.Ref()}}, nil
	case err != nil:
		return domain.Answer{}, fmt.Errorf("read the log of container %s of Pod %s/%s: %w", container, pod.Namespace, pod.Name, err)
	}
	msg := fmt.Sprintf("the last %d bytes of the log of container %s of Pod %s", len(tail.Bytes), container, pod.Name)
	if !tail.Truncated {
		msg = fmt.Sprintf("the whole log (%d bytes) of container %s of Pod %s", len(tail.Bytes), container, pod.Name)
	}
	return domain.Succeeded(siteprotocol.ReasonRead, msg, siteprotocol.ReadLogsDetail{
		Container: container, ContentBase64: base64.StdEncoding.EncodeToString(tail.Bytes), Truncated: tail.Truncated,
	}, RecordRef(*rec), pod.Ref()), nil
}

// check runs the checks of PrivateReads before anything is read from the
// cluster, and returns the Attempt's root record and its identity.
func (r *PrivateReads) check(ctx context.Context, cmd siteprotocol.Command) (*domain.NativeRecord, ObjectIdentity, *domain.Answer, error) {
	rec, id, _, refusal, err := r.checkAccess(ctx, cmd)
	return rec, id, refusal, err
}

// checkAccess is check, also returning the command's access check
// (performed, with action execution.read) for what a read creates.
func (r *PrivateReads) checkAccess(ctx context.Context, cmd siteprotocol.Command) (*domain.NativeRecord, ObjectIdentity, *StartAccess, *domain.Answer, error) {
	records, err := r.life.Records(ctx, cmd.AttemptID)
	if err != nil {
		return nil, ObjectIdentity{}, nil, nil, err
	}
	rec := domain.FindRecord(records, r.root)
	if rec == nil || rec.UID == "" {
		a := domain.Refused(siteprotocol.ReasonNotStarted, "attempt %s has no workload to read", cmd.AttemptID)
		return nil, ObjectIdentity{}, nil, &a, nil
	}
	id, err := r.specs.Identity(rec.Spec)
	if err != nil {
		return nil, ObjectIdentity{}, nil, nil, fmt.Errorf("read the identity of attempt %s's %s record: %w", cmd.AttemptID, rec.Kind, err)
	}
	if id.RunID != cmd.RunID || id.MemberID != cmd.MemberID || id.ProjectID != cmd.ProjectID {
		// Whose work it is is not said: a refusal names nothing of another
		// member (docs/site-runtime.md#private-reads).
		a := domain.Refused(siteprotocol.ReasonAttemptConflict,
			"attempt %s is not the work of member %s in project %s for run %s; nothing was read", cmd.AttemptID, cmd.MemberID, cmd.ProjectID, cmd.RunID)
		return nil, ObjectIdentity{}, nil, &a, nil
	}
	b, refusal, err := r.life.Access().Binding(ctx, cmd)
	if refusal != nil || err != nil {
		return nil, ObjectIdentity{}, nil, refusal, err
	}
	if rec.Namespace != b.Namespace {
		a := domain.Refused(siteprotocol.ReasonAttemptConflict, "attempt %s's %s is in namespace %s; binding %s names namespace %s",
			cmd.AttemptID, rec.Kind, rec.Namespace, b.BindingID, b.Namespace)
		return nil, ObjectIdentity{}, nil, &a, nil
	}
	access := r.life.Access().Read(cmd, b)
	if _, refusal, err := access.Identity(ctx); refusal != nil || err != nil {
		return nil, ObjectIdentity{}, nil, refusal, err
	}
	return rec, id, access, nil, nil
}

// withoutPod is what a private read does with a recorded workload that has
// no Pod (none yet, or none any more).
type withoutPod int

const (
	// noPodMissing fails the read native-missing (read-logs).
	noPodMissing withoutPod = iota
	// noPodUnavailable fails it endpoint-unavailable (proxy).
	noPodUnavailable
	// noPodAllowed answers the zero WorkloadPod and no refusal (read-file:
	// the reader is then placed by the scheduler alone).
	noPodAllowed
)

// pod finds the Attempt's workload Pod by its exact native identity: a
// record removed (or being removed) or a workload gone is native-missing,
// a broken identity native-identity-mismatch, and a workload without a
// Pod as noPod says.
func (r *PrivateReads) pod(ctx context.Context, rec domain.NativeRecord, id ObjectIdentity, noPod withoutPod) (WorkloadPod, *domain.Answer, error) {
	ref := RecordRef(rec)
	if rec.Phase == domain.PhaseRemoved || rec.Phase == domain.PhaseDeleting {
		a := domain.Answer{Outcome: siteprotocol.OutcomeFailed, Reason: siteprotocol.ReasonNativeMissing,
			Message:    fmt.Sprintf("%s %s/%s (uid %s) was removed by command %s; nothing is left to read", ref.Kind, ref.Namespace, ref.Name, ref.UID, rec.CommandID),
			NativeRefs: []siteprotocol.NativeRef{ref}}
		return WorkloadPod{}, &a, nil
	}
	pod, err := r.pods.WorkloadPod(ctx, ref, rec.Spec, id)
	switch {
	case errors.Is(err, ErrNoWorkloadPod) && noPod == noPodAllowed:
		return WorkloadPod{}, nil, nil
	case errors.Is(err, ErrNativeIdentityMismatch):
		a := domain.Answer{Outcome: siteprotocol.OutcomeRefused, Reason: siteprotocol.ReasonNativeIdentityMismatch,
			Message: fmt.Sprintf("nothing was read: %v", err), NativeRefs: []siteprotocol.NativeRef{ref}}
		return WorkloadPod{}, &a, nil
	case errors.Is(err, ErrWorkloadGone), errors.Is(err, ErrNoWorkloadPod):
		a := domain.Answer{Outcome: siteprotocol.OutcomeFailed, Reason: siteprotocol.ReasonNativeMissing,
			Message: fmt.Sprintf("nothing to read: %v", err), NativeRefs: []siteprotocol.NativeRef{ref}}
		if noPod == noPodUnavailable && errors.Is(err, ErrNoWorkloadPod) {
			a.Reason, a.Message = siteprotocol.ReasonEndpointUnavailable, fmt.Sprintf("nothing was sent: %v", err)
		}
		return WorkloadPod{}, &a, nil
	case err != nil:
		return WorkloadPod{}, nil, fmt.Errorf("find the Pod of %s %s/%s: %w", ref.Kind, ref.Namespace, ref.Name, err)
	}
	return pod, nil, nil
}

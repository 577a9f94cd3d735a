package application

import (
	"context"
	"errors"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Errors of the native ports.
var (
	// ErrPermissionUnavailable is returned (wrapped) by RuntimePermissions
	// when the provider gave no usable answer within its bound; the command
	// is refused permission-unavailable.
	ErrPermissionUnavailable = errors.New("permission provider unavailable")
	// ErrNativeRequestDenied is returned (wrapped, with the native system's
	// message) by NativeObjects.Create when the native system refused the
	// create itself — an object-count quota, RBAC, an admission policy, a
	// missing namespace — so that nothing exists. The command is refused
	// native-request-denied (Execution may retry with a new Attempt).
	ErrNativeRequestDenied = errors.New("native request denied")
	// ErrPodSecurityViolation is returned by NativeObjects.Create, wrapped
	// together with ErrNativeRequestDenied, when it created nothing because
	// the specification's Pods lack a field of Pod Security restricted (a
	// specification saved before the Runtime rendered them) and the
	// namespace enforces restricted. The command is refused
	// pod-security-violation (docs/site-runtime.md#pod-security).
	ErrPodSecurityViolation = errors.New("pod security violation")
	// ErrNativeExists is returned (wrapped) by NativeObjects.Create when an
	// object with the deterministic name already exists.
	ErrNativeExists = errors.New("native object exists")
	// ErrUnsupportedDemand is returned (wrapped) by BatchSpecs.RenderJob for
	// a demand this Site cannot express (a gpu.<vendor> without a configured
	// extended resource); the command is refused invalid-payload.
	ErrUnsupportedDemand = errors.New("unsupported demand")
)

// RuntimePermissions answers whether a member may act now
// (docs/site-runtime.md#access-before-every-native-start). It is a provider
// outside this project: an HTTP client of the documented contract, or a
// policy file for standalone Sites.
type RuntimePermissions interface {
	// Check asks the provider. It returns an error wrapping
	// ErrPermissionUnavailable when no usable answer came within the
	// adaptor's bound (retries included); other errors only when ctx ends.
	Check(ctx context.Context, q domain.PermissionQuery) (domain.Permission, error)
}

// ProjectNamespaces reads the Project a namespace belongs to.
type ProjectNamespaces interface {
	// NamespaceProject returns the namespace's project-id label; labelled is
	// false when the namespace does not exist or carries no such label.
	NamespaceProject(ctx context.Context, namespace string) (projectID string, labelled bool, err error)
	// MemberAccountUID returns the UID of the live service account
	// account in namespace; found is false when it does not exist (or the
	// Runtime may not read it). docs/site-protocol.md#the-accounts-uid-in-a-binding
	MemberAccountUID(ctx context.Context, namespace, account string) (uid string, found bool, err error)
}

// NativeObject is an object the Runtime rendered: its deterministic
// identity and its specification (JSON) as saved in the native record.
// The SHA-256 of Spec is the object's spec digest.
type NativeObject struct {
	Kind      string
	Namespace string
	Name      string
	Spec      []byte
	// Data is a Secret's content (a checkout credential's username and
	// token), written into the object at create only: it is never part of
	// Spec or its digest and never saved in a record, so a token never
	// enters a journal (docs/site-runtime.md#the-workspace-helper).
	Data map[string][]byte
}

// Ref returns the native reference of the object with uid.
func (o NativeObject) Ref(uid string) siteprotocol.NativeRef {
	return siteprotocol.NativeRef{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, UID: uid}
}

// LiveObject is what the native system holds under a rendered object's
// name (NativeIdentity.Lookup).
type LiveObject struct {
	// UID is the live object's identity, opaque (a Kubernetes
	// metadata.uid, a Slurm job ID).
	UID string
	// Deleting is true when the object carries a deletion timestamp.
	Deleting bool
	// Mismatch names the first rendered field (identity labels and spec
	// digest included) that the live object lacks or holds differently;
	// empty when the live object carries everything the Runtime rendered.
	// Defaults that the API server or a controller adds to fields the
	// Runtime did not set are not mismatches.
	Mismatch string
}

// DeleteOutcome is what an identity-bound delete found
// (NativeIdentity.Delete).
type DeleteOutcome struct {
	// Gone is true when the object with the identity no longer exists.
	Gone bool
	// Foreign is the object that holds the name with another UID; it is
	// never touched.
	Foreign *siteprotocol.NativeRef
}

// Observation is a workload's native state as observe reports it.
type Observation struct {
	State siteprotocol.State
	// Reason is the native condition's reason (e.g. the Job's
	// BackoffLimitExceeded); Message its message.
	Reason  string
	Message string
	// StartedAt and FinishedAt are the times the native object reports
	// (RFC 3339, UTC); empty when it reports none.
	StartedAt  string
	FinishedAt string
	// ExitCode is a finished batch workload's container exit code, nil
	// when none terminated or its termination is not known.
	ExitCode *int32
}

// ObjectIdentity is what every rendered object is labelled with.
type ObjectIdentity struct {
	RunID     string
	AttemptID string
	MemberID  string
	ProjectID string
	CommandID string
}

// IdentityOf returns the identity of objects cmd creates.
func IdentityOf(cmd siteprotocol.Command) ObjectIdentity {
	return ObjectIdentity{RunID: cmd.RunID, AttemptID: cmd.AttemptID, MemberID: cmd.MemberID, ProjectID: cmd.ProjectID, CommandID: cmd.ID}
}

// WorkspaceSpec is what the Attempt's private workspace claim is rendered
// from.
type WorkspaceSpec struct {
	Identity  ObjectIdentity
	Namespace string
	// SizeBytes is the requested storage in bytes.
	SizeBytes int64
}

// BatchJobSpec is what a batch Attempt's workload is rendered from.
type BatchJobSpec struct {
	Identity       ObjectIdentity
	Namespace      string
	ServiceAccount string
	// Image is the configured batch image, pinned by digest.
	Image          string
	WorkspaceClaim string
	// Demand: cpu in millicores, memory in bytes, gpu.<vendor> in devices;
	// requests and limits both equal it.
	Demand map[string]int64
	// TimeLimitSeconds is the Run's time limit, on the Pod.
	TimeLimitSeconds int64
	Argv             []string
	Env              map[string]string
}

// JobObserver reads the batch family's workload, a Kubernetes Job
// (docs/site-runtime.md#batch-on-kubernetes).
type JobObserver interface {
	// ObserveJob reports a batch workload's state; found is false when no
	// object with ref's name and UID exists.
	ObserveJob(ctx context.Context, ref siteprotocol.NativeRef) (obs Observation, found bool, err error)
}

// BatchNatives is what the batch family uses of the native system: the
// shared objects port and its own observer.
type BatchNatives interface {
	NativeObjects
	JobObserver
}

// WorkspaceSpecs renders an Attempt's private workspace claim, which every
// family's prepare creates, deterministically: the same input always gives
// the same bytes.
type WorkspaceSpecs interface {
	RenderWorkspace(s WorkspaceSpec) (NativeObject, error)
	// Identity reads the identity a saved specification was rendered
	// for; it fails when spec is not one this renderer produced.
	Identity(spec []byte) (ObjectIdentity, error)
}

// BatchSpecs renders the batch family's native objects deterministically:
// the same input always gives the same bytes.
type BatchSpecs interface {
	WorkspaceSpecs
	// RenderJob fails wrapping ErrUnsupportedDemand for a demand the Site
	// cannot express.
	RenderJob(s BatchJobSpec) (NativeObject, error)
}

// BatchImages supplies the configured batch execution image, pinned by
// digest (a command never names an image for batch).
type BatchImages interface {
	BatchImage() string
}

// DeniedReason is the reason of a refused create (err wraps
// ErrNativeRequestDenied): pod-security-violation when err also wraps
// ErrPodSecurityViolation, native-request-denied otherwise.
func DeniedReason(err error) siteprotocol.Reason {
	if errors.Is(err, ErrPodSecurityViolation) {
		return siteprotocol.ReasonPodSecurityViolation
	}
	return siteprotocol.ReasonNativeRequestDenied
}

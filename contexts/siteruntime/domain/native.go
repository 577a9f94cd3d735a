package domain

// Deterministic native names (docs/site-runtime.md#native-naming-and-identity): every
// object of an Attempt is named from the Attempt's UUID, so recovery finds
// it by name after a crash.
const (
	// SuffixWorkspace names the Attempt's private workspace claim.
	SuffixWorkspace = "-ws"
	// SuffixHelper names the repository helper Pod.
	SuffixHelper = "-git"
	// SuffixCredential names the scoped repository credential Secret.
	SuffixCredential = "-cred"
	// SuffixReader names the workspace reader Pod of a read-file
	// (docs/site-runtime.md#the-workspace-reader).
	SuffixReader = "-read"
)

// AttemptObjectName is "attempt-<attempt UUID>" followed by suffix ("" for
// the workload itself).
func AttemptObjectName(attemptID, suffix string) string { return "attempt-" + attemptID + suffix }

// Native record phases of jobs.sqlite (NativeRecord.Phase). A record is
// saved in phase creating BEFORE its create call, so recovery knows a
// create may have happened; created once the create returned its UID;
// refused when the native system refused the create (nothing exists);
// deleting before a UID-bound delete; removed once the object is gone.
// An application service's Deployment and Service are saved in phase
// prepared by prepare (rendered, not created) until start creates them.
const (
	PhasePrepared = "prepared"
	PhaseCreating = "creating"
	PhaseCreated  = "created"
	PhaseRefused  = "refused"
	PhaseDeleting = "deleting"
	PhaseRemoved  = "removed"
)

// Native kinds the Runtime records or reads (the Kubernetes kinds):
// batch's Job, every family's workspace claim, the application family's
// Deployment and Service, the inference family's KServe
// InferenceService, and the ReplicaSets a Deployment owns (read only).
const (
	KindJob              = "Job"
	KindWorkspace        = "PersistentVolumeClaim"
	KindDeployment       = "Deployment"
	KindService          = "Service"
	KindReplicaSet       = "ReplicaSet"
	KindInferenceService = "InferenceService"
)

// FindRecord returns the record of kind among records, or nil. An
// Attempt holds at most one record of each kind except Pods (the workspace
// helper and the workspace reader): find those by name (FindNamedRecord).
func FindRecord(records []NativeRecord, kind string) *NativeRecord {
	for i := range records {
		if records[i].Kind == kind {
			return &records[i]
		}
	}
	return nil
}

// FindNamedRecord returns the record of kind and name among records, or
// nil.
func FindNamedRecord(records []NativeRecord, kind, name string) *NativeRecord {
	for i := range records {
		if records[i].Kind == kind && records[i].Name == name {
			return &records[i]
		}
	}
	return nil
}

// Kinds of a repository checkout (docs/site-runtime.md#the-workspace-helper):
// the credential Secret attempt-<attempt>-cred and the helper Pod
// attempt-<attempt>-git are native objects; the grant (named by its
// idempotency key, its grant ID as the record's UID) and the helper's
// outcome (named like the helper) are records of jobs.sqlite only.
const (
	KindSecret   = "Secret"
	KindPod      = "Pod"
	KindGrant    = "RepositoryGrant"
	KindCheckout = "CheckoutOutcome"
)

// Phases of a grant record (KindGrant): issuing is saved BEFORE the
// issue call, issued with the grant ID after it, refused when the
// provider denied it or gave no answer (its spec then holds the refusal);
// revoking is saved BEFORE the revoke call, revoked once the provider
// confirmed it, unconfirmed when the provider did not confirm it within
// its bound. A checkout outcome record (KindCheckout) is saved in phase
// read once the helper's outcome is known.
const (
	PhaseIssuing     = "issuing"
	PhaseIssued      = "issued"
	PhaseRevoking    = "revoking"
	PhaseRevoked     = "revoked"
	PhaseUnconfirmed = "unconfirmed"
	PhaseRead        = "read"
)

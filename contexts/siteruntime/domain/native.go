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
// Deployment and Service, and the ReplicaSets a Deployment owns (read
// only).
const (
	KindJob        = "Job"
	KindWorkspace  = "PersistentVolumeClaim"
	KindDeployment = "Deployment"
	KindService    = "Service"
	KindReplicaSet = "ReplicaSet"
	// KindPod is a workload's Pod, read (never recorded) by the private
	// reads (docs/site-runtime.md#private-reads).
	KindPod = "Pod"
)

// FindRecord returns the record of kind among records, or nil.
func FindRecord(records []NativeRecord, kind string) *NativeRecord {
	for i := range records {
		if records[i].Kind == kind {
			return &records[i]
		}
	}
	return nil
}

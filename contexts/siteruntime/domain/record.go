package domain

// NativeRecord is a durable record of a native object the Runtime prepared,
// submitted or is removing, saved in jobs.sqlite (batch) or services.sqlite
// (application and inference services) BEFORE the delivery result that
// reports it. Recovery of an uncertain effect reads it back. Every executor
// family fills it through the lifecycle; the saved specification carries a digest
// checked on every start (docs/site-runtime.md#integrity-checks).
type NativeRecord struct {
	// AttemptID is the Attempt the object belongs to.
	AttemptID string
	// Kind is the native kind, e.g. "Job", "PersistentVolumeClaim".
	Kind string
	// Namespace and Name are the object's deterministic identity; UID is
	// set once known.
	Namespace string
	Name      string
	UID       string
	// ServiceKind is "application" or "inference" for service records.
	ServiceKind string
	// Phase is the record's progress, e.g. "submitted", "deleting",
	// "removed" (executor-defined, stable strings).
	Phase string
	// CommandID and Sequence name the command that last wrote the record.
	CommandID string
	Sequence  int64
	// Spec is the rendered specification (JSON); SpecDigest its SHA-256.
	Spec       []byte
	SpecDigest string
}

// Package kubetest gives tests a real Kubernetes API server: the local cluster of
// deploy/localcluster (kube-apiserver, kube-controller-manager, kube-scheduler and etcd built from
// the Kubernetes sources, KWOK's fake Nodes, a hostPath volume provisioner, KServe's own
// InferenceService controller and webhooks, and the project's cluster manifests from
// deploy/cluster).
//
// New attaches to the cluster running in the state directory (METALLO_CLUSTER_DIR, else
// var/localcluster at the repository root, found by walking up from the test's working
// directory), or, when none runs, starts one for the test binary with
// deploy/localcluster/cluster.sh up (the first build takes 20-35 minutes) and stops it once
// no test binary uses it any more; `make cluster-up` beforehand keeps it running. Each call
// gives the test its own namespace, labelled metallo.dev/kubetest, deleted when the test ends
// (its InferenceServices first, see below).
// Nothing starts unless a test calls New, so packages that do not use it stay fast. A test whose
// cluster cannot start FAILS with the reason; it never skips. Every test that calls New logs
// the line "metallo-lane: kubernetes", which the CI lane check counts.
//
// A test:
//
//	// Doc comment: what the test proves and what KWOK simulates for it.
//	func TestMemberJobRuns(t *testing.T) {
//		e := kubetest.New(t) // logs "metallo-lane: kubernetes", makes e.Namespace
//		member := e.ClientFor(e.ImpersonateServiceAccount(e.Namespace, "member-x"))
//		// ... create a Job through member, then
//		e.WaitForJob("train", 3*time.Minute, "Complete", func(j *batchv1.Job) bool {
//			_, ok := kubetest.JobCondition(j, batchv1.JobComplete)
//			return ok
//		})
//		if got := e.WhoCreated("jobs", e.Namespace, "train").Actor(); got != "system:serviceaccount:"+e.Namespace+":member-x" { ... }
//	}
//
// Wait on watches (Until, WaitForJob, WaitForPod, WaitForEvent, UntilGone), or Poll where one
// watch cannot say what is awaited, with generous timeouts, never on fixed sleeps: the Job
// controller, for one, backs off for up to a minute after a refused Pod create. Each wait also
// watches the fake Nodes: when a fake Node's readiness changes during it (or a fake Node is not
// Ready as it begins), it ends at once with a NodeReadinessChanged naming the Node, the change and
// the Node's Lease, not after its timeout (docs/testing.md, "What the fake Nodes' readiness
// depends on").
//
// What is real: authentication (static tokens, service-account tokens, TokenRequest,
// TokenReview), RBAC, impersonation, admission (ResourceQuota, ValidatingAdmissionPolicy with
// CEL, ...), CRDs, server-side apply and dry run, UID preconditions, foreground deletion with the
// garbage collector, the Job, Deployment and ReplicaSet controllers, the scheduler, PersistentVolume
// binding and the audit log (Metadata level), through which AuditLog tells who created an object.
//
// KServe is real too: KServe v0.16.0's InferenceService reconciler and its InferenceService
// defaulter and validator run in Standard (raw) mode, without Knative or Istio, as KServe's
// service account (KServeController in the audit log), with one ClusterServingRuntime,
// HuggingFaceRuntime. An InferenceService becomes the Deployment and Service <name>-predictor;
// the webhook refuses what KServe refuses ("update rejected: deploymentMode cannot be changed
// ..."). KServe's Pod mutator does not run (no storage-initializer). At the end of a test its
// namespace's InferenceServices are deleted and waited for before the namespace: KServe's
// controller removes its finalizer; a legacy object that KServe cannot finalize
// (LegacyDeploymentMode) is finalized by the harness as the cluster administrator; any other
// still there after 30 seconds fails the test.
//
// What is simulated: kubelets. KWOK stands in for them on fake Nodes: containers never execute
// and images are never pulled. A Pod that the scheduler binds goes Running at once, and Ready
// unless annotated AnnotationNeverReady. A Pod whose restartPolicy is Never or OnFailure (every
// Job Pod) runs for AnnotationRunSeconds seconds (default 1) and then Succeeds, or Fails with
// exit code 1 when annotated AnnotationFail; a Pod with restartPolicy Always keeps running, or,
// annotated AnnotationFail, is Ready for AnnotationRunSeconds and then has its containers
// terminate with reason Error (KServe then reports its predictor FailedToLoad).
// KWOK does not enforce activeDeadlineSeconds (assert it on the Pod spec), runs no probes, and
// mounts nothing: a PersistentVolumeClaim binds to a hostPath volume under the state directory
// and its Pod schedules, but no process ever writes to it. Services get cluster IPs but route
// nowhere.
//
// What is real on the real node (docs/testing.md#the-real-node): everything. Env.RealNode returns
// the cluster's one real node (a kubelet with containerd and runc, tainted and labelled
// localcluster.metallo.dev/real-node=true; images built locally, by digest in RealNode.Images)
// and logs "metallo-lane: realnode"; it FAILS the test, with the reason, when the cluster has no
// real node (another cluster of the machine holds it, or it was started with
// METALLO_CLUSTER_REAL_NODE=off). A test puts its Pods there with RealNode.NodeSelector and
// RealNode.Tolerations (or the Runtime's RuntimeFlags), and reads containers' logs with PodLogs.
package kubetest

// Package policytest proves the Site cluster's access rules of deploy/cluster (ClusterRoles
// metallo-member and metallo-runtime, the metallo-* ValidatingAdmissionPolicies) and the Runtime's
// kustomize base of deploy/runtime on the local cluster (platform/kube/kubetest), with the
// Runtime's and the members' own service-account tokens, and the Runtime impersonating members as
// it does in production (docs/site-runtime.md#access-before-every-native-start,
// docs/site-runtime.md#admission-policies-and-rbac). It holds tests only.
//
// Each test sets up a Site project namespace of its own as the Site agent would: the labels
// execution.pharos.dev/access-policy=pharos-site-runtime and project-id=<Project UUID>, the
// members' service accounts member-<party UUID> each bound to metallo-member by a RoleBinding,
// and the Runtime (system:serviceaccount:metallo-runtime:runtime-k8s) bound to metallo-runtime by
// a RoleBinding named metallo-runtime. Every denial is asserted with the refusing policy's name
// and message; every control is a request that must be accepted.
//
// The tests first apply deploy/cluster (server-side apply, field manager metallo-localcluster, as
// make cluster-up does) and the identity part of deploy/runtime (namespace metallo-runtime,
// service account runtime-k8s and its Role), so that a running cluster always holds what the
// working tree holds: make cluster-up applies deploy/cluster only when it starts a cluster.
//
// What is real: authentication with service-account tokens, RBAC, impersonation,
// ValidatingAdmissionPolicy with CEL and its type checking, the Job, Deployment, ReplicaSet and
// EndpointSlice controllers, the garbage collector, the namespace controller, the audit log.
// What is simulated: kubelets (KWOK runs the controllers' Pods on fake Nodes, marks a
// Deployment's Pod Ready and deletes Pods at once; nothing executes).
package policytest

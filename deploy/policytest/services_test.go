package policytest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/pharos-metallo/metallo/platform/kube/kubeconfig"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
)

// Messages of the application policies (deploy/cluster/policies/deployments.yaml, services.yaml,
// pod-origin.yaml), as the tests expect them.
const (
	msgDeploymentIdentity  = "a Deployment in a Site project namespace needs its member's identity"
	msgDeploymentIDs       = "a Deployment in a Site project namespace needs labels execution.pharos.dev/attempt and execution.pharos.dev/project"
	msgDeploymentName      = "a Deployment is its Attempt's application service, named attempt-<execution.pharos.dev/attempt>"
	msgDeploymentTemplate  = "the Deployment's Pod template must carry the Deployment's execution.pharos.dev/member, attempt and project labels"
	msgDeploymentSelector  = "the Deployment must select exactly its Attempt's Pods"
	msgDeploymentAccount   = "the Deployment's Pods must run as the member its labels name"
	msgDeploymentCreator   = "a Deployment must be created by the member its labels name"
	msgServiceCreator      = "a Service must be created by the member its execution.pharos.dev/member label names"
	msgServiceName         = "a member's Service must be its Attempt's, named attempt-<execution.pharos.dev/attempt>"
	msgServiceType         = "a member's Service is of type ClusterIP"
	msgServiceExternal     = "a member's Service carries no externalIPs and no externalName"
	msgServiceSelector     = "a member's Service must select exactly its Attempt's Pods"
	replicaSetController   = "system:serviceaccount:kube-system:replicaset-controller"
	labelPodTemplateHash   = "pod-template-hash"
	labelServiceName       = "kubernetes.io/service-name"
	applicationImageDigest = "registry.invalid/pharos-metallo/app@sha256:0000000000000000000000000000000000000000000000000000000000000000"
)

// selector is what the Attempt's Deployment and Service select: the member, Attempt and Project
// identity labels its Pods carry.
func (a attempt) selector() map[string]string {
	return map[string]string{labelAttempt: a.id, labelMember: a.member, labelProject: a.project}
}

// deployment is the Attempt's application Deployment attempt-<attempt> as the Runtime renders it:
// one replica, running as the member, its port and readiness probe, the workspace claim and
// credential mounted, selecting the Attempt's Pods. KWOK marks its Pod Ready.
func (a attempt) deployment() *appsv1.Deployment {
	one := int32(1)
	deadline := int32(600)
	spec := a.podSpec()
	spec.RestartPolicy = corev1.RestartPolicyAlways
	spec.ActiveDeadlineSeconds = nil
	spec.Containers[0].Image = applicationImageDigest
	spec.Containers[0].Command = nil
	spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
		HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")},
	}}
	return &appsv1.Deployment{
		ObjectMeta: a.meta(a.name()),
		Spec: appsv1.DeploymentSpec{
			Replicas:                &one,
			ProgressDeadlineSeconds: &deadline,
			Selector:                &metav1.LabelSelector{MatchLabels: a.selector()},
			Template:                corev1.PodTemplateSpec{ObjectMeta: a.meta(""), Spec: spec},
		},
	}
}

// service is the Attempt's ClusterIP Service attempt-<attempt>, selecting its Pods.
func (a attempt) service() *corev1.Service {
	return &corev1.Service{ObjectMeta: a.meta(a.name()), Spec: corev1.ServiceSpec{
		Type:     corev1.ServiceTypeClusterIP,
		Selector: a.selector(),
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
	}}
}

// withoutDeploymentLabel removes a label from the Deployment, its selector and its Pod template.
func withoutDeploymentLabel(d *appsv1.Deployment, key string) *appsv1.Deployment {
	delete(d.Labels, key)
	delete(d.Spec.Selector.MatchLabels, key)
	delete(d.Spec.Template.Labels, key)
	return d
}

// createDeployment and createService are requests to create the object with cs.
func createDeployment(cs kubernetes.Interface, ns string, d *appsv1.Deployment) request {
	return func(c context.Context, dryRun []string) error {
		_, err := cs.AppsV1().Deployments(ns).Create(c, d, metav1.CreateOptions{DryRun: dryRun})
		return err
	}
}

func createService(cs kubernetes.Interface, ns string, svc *corev1.Service) request {
	return func(c context.Context, dryRun []string) error {
		_, err := cs.CoreV1().Services(ns).Create(c, svc, metav1.CreateOptions{DryRun: dryRun})
		return err
	}
}

// startApplication prepares the member's Attempt and creates its Deployment and Service through
// the Runtime, and waits until the Deployment is Available with its one replica.
func startApplication(t *testing.T, s *site, a attempt) (*appsv1.Deployment, *corev1.Service) {
	t.Helper()
	prepared(t, s, a)
	cs := s.viaRuntime(t, a.member)
	d := created(t, "the Attempt's Deployment through the Runtime", func(c context.Context) (*appsv1.Deployment, error) {
		return cs.AppsV1().Deployments(s.namespace).Create(c, a.deployment(), metav1.CreateOptions{})
	})
	svc := created(t, "the Attempt's Service through the Runtime", func(c context.Context) (*corev1.Service, error) {
		return cs.CoreV1().Services(s.namespace).Create(c, a.service(), metav1.CreateOptions{})
	})
	kubetest.Until(t, long, "the Deployment Available", s.watch("deployments", d.Name), func(d *appsv1.Deployment) bool {
		for _, cond := range d.Status.Conditions {
			if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
				return d.Status.AvailableReplicas == 1
			}
		}
		return false
	})
	return d, svc
}

// applicationPod returns the Attempt's one Pod.
func applicationPod(t *testing.T, s *site, a attempt) *corev1.Pod {
	t.Helper()
	pods, err := s.e.Client.CoreV1().Pods(s.namespace).List(ctx(t), metav1.ListOptions{LabelSelector: labelAttempt + "=" + a.id})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("want one Pod of the Attempt, got %d (err %v)", len(pods.Items), err)
	}
	return &pods.Items[0]
}

// cleanUpApplication deletes the Attempt's Deployment and Service as the Runtime does — its own
// token, the exact UID, foreground — and waits until they, the Deployment's ReplicaSet and its
// Pod are gone (the garbage collector removes the ReplicaSet and the Pod first).
func cleanUpApplication(t *testing.T, s *site, a attempt, d *appsv1.Deployment, svc *corev1.Service) {
	t.Helper()
	pod := applicationPod(t, s, a)
	rs := metav1.GetControllerOf(pod)
	rt := s.asRuntime(t)
	ns := s.namespace
	accepted(t, "the Runtime's exact-UID delete of the Deployment", func(c context.Context, dryRun []string) error {
		return rt.AppsV1().Deployments(ns).Delete(c, d.Name, exactDelete(d.UID, dryRun))
	})
	accepted(t, "the Runtime's exact-UID delete of the Service", func(c context.Context, dryRun []string) error {
		return rt.CoreV1().Services(ns).Delete(c, svc.Name, exactDelete(svc.UID, dryRun))
	})
	kubetest.UntilGone(t, long, "the Deployment", s.watch("deployments", d.Name), &appsv1.Deployment{}, ns, d.Name)
	kubetest.UntilGone(t, long, "the Service", s.watch("services", svc.Name), &corev1.Service{}, ns, svc.Name)
	kubetest.UntilGone(t, long, "the ReplicaSet", s.watch("replicasets", rs.Name), &appsv1.ReplicaSet{}, ns, rs.Name)
	kubetest.UntilGone(t, long, "the Pod", s.watch("pods", pod.Name), &corev1.Pod{}, ns, pod.Name)
	c := ctx(t)
	for _, resource := range []string{"deployments", "services"} {
		ev, err := s.e.AuditLog().Find(c, func(ev kubetest.AuditEvent) bool {
			r := ev.ObjectRef
			return ev.Verb == "delete" && r != nil && r.Resource == resource && r.Namespace == ns && r.Name == d.Name && ev.Code() == 200
		})
		if err != nil || ev.User.Username != runtimeUser || ev.ImpersonatedUser != nil {
			t.Fatalf("the %s delete: want it made by %s itself, got %+v (err %v)", resource, runtimeUser, ev, err)
		}
	}
}

// The control of the application path: the Runtime, impersonating the bound member with its
// user extra, creates her Attempt's Deployment and ClusterIP Service (the audit log names alice
// as the creator of each, impersonated by the Runtime with its extra). The Deployment controller
// names its ReplicaSet attempt-<attempt>-<pod-template-hash>; the ReplicaSet controller's Pod,
// with a controller owner reference to it, passes metallo-pods and metallo-pod-origin, runs as
// alice and becomes Ready; the Deployment is Available, and the Service's EndpointSlice holds
// exactly that Pod. The Runtime's exact-UID foreground deletes then remove everything. Simulated:
// KWOK marks the Pod Running and Ready; nothing serves.
func TestBoundMembersApplicationServiceIsAcceptedServesAndIsCreatedAsTheMember(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	a := s.attempt(s.alice)
	d, svc := startApplication(t, s, a)
	c := ctx(t)
	ns := s.namespace

	pod := applicationPod(t, s, a)
	ref := metav1.GetControllerOf(pod)
	hash := pod.Labels[labelPodTemplateHash]
	if ref == nil || ref.Kind != "ReplicaSet" || ref.UID == "" || hash == "" || ref.Name != a.name()+"-"+hash {
		t.Fatalf("the Attempt's Pod %s: want a controller ReplicaSet %s-<pod-template-hash>, got %+v (hash %q)", pod.Name, a.name(), ref, hash)
	}
	rs, err := s.e.Client.AppsV1().ReplicaSets(ns).Get(c, ref.Name, metav1.GetOptions{})
	if err != nil || rs.UID != ref.UID {
		t.Fatalf("ReplicaSet %s: want UID %s, got %v (err %v)", ref.Name, ref.UID, rs, err)
	}
	if owner := metav1.GetControllerOf(rs); owner == nil || owner.Kind != "Deployment" || owner.UID != d.UID {
		t.Fatalf("ReplicaSet %s: want the controller Deployment %s (%s), got %+v", rs.Name, d.Name, d.UID, owner)
	}
	if pod.Spec.ServiceAccountName != "member-"+s.alice {
		t.Fatalf("the Attempt's Pod runs as %q, want member-%s", pod.Spec.ServiceAccountName, s.alice)
	}
	for k, v := range a.selector() {
		if pod.Labels[k] != v {
			t.Fatalf("the Attempt's Pod: label %s=%q, want %q", k, pod.Labels[k], v)
		}
	}
	// The only Pod created in the namespace; its name is generated, so the audit event of its
	// create may not carry it.
	ev, err := s.e.AuditLog().Find(c, func(ev kubetest.AuditEvent) bool {
		r := ev.ObjectRef
		return ev.Verb == "create" && r != nil && r.Resource == "pods" && r.Subresource == "" && r.Namespace == ns &&
			(r.Name == pod.Name || r.Name == "") && ev.Code() == 201
	})
	if err != nil || ev.User.Username != replicaSetController || ev.ImpersonatedUser != nil {
		t.Errorf("pod %s: want created by %s, got %+v (err %v)", pod.Name, replicaSetController, ev, err)
	}
	for _, resource := range []string{"deployments", "services"} {
		ev := s.e.WhoCreated(resource, ns, a.name())
		if ev.ImpersonatedUser == nil || ev.ImpersonatedUser.Username != s.memberUser(s.alice) || ev.User.Username != runtimeUser ||
			!slices.Equal(ev.ImpersonatedUser.Extra[extraCreatedThrough], authenticationv1.ExtraValue{extraSiteRuntime}) {
			t.Errorf("%s %s: want created by %s impersonated by %s with extra %s=%s, got user %q impersonating %+v",
				resource, a.name(), s.memberUser(s.alice), runtimeUser, extraCreatedThrough, extraSiteRuntime, ev.User.Username, ev.ImpersonatedUser)
		}
	}
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		t.Fatalf("service %s: want a ClusterIP, got type %s address %q", svc.Name, svc.Spec.Type, svc.Spec.ClusterIP)
	}
	kubetest.Until(t, long, "the Service's EndpointSlice holding exactly the Attempt's Pod", s.watch("endpointslices", ""), func(es *discoveryv1.EndpointSlice) bool {
		return es.Labels[labelServiceName] == svc.Name && len(es.Endpoints) == 1 &&
			es.Endpoints[0].TargetRef != nil && es.Endpoints[0].TargetRef.Name == pod.Name
	})
	cleanUpApplication(t, s, a, d, svc)
}

// Cancellation of an application service does not depend on the member's grants: once alice's
// RoleBinding is removed, her next Deployment and Service are refused (by RBAC), and the
// Runtime's exact-UID cleanup of her available service still succeeds
// (docs/site-runtime.md#access-before-every-native-start).
func TestRuntimeApplicationCleanupWorksAfterTheMembersGrantsAreRemoved(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	a := s.attempt(s.alice)
	d, svc := startApplication(t, s, a)
	if err := s.e.Client.RbacV1().RoleBindings(s.namespace).Delete(ctx(t), "member-"+s.alice, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	next := s.attempt(s.alice)
	waitRefusedByRBAC(t, "alice's next Deployment after her grants were removed", createDeployment(s.viaRuntime(t, s.alice), s.namespace, next.deployment()))
	waitRefusedByRBAC(t, "alice's next Service after her grants were removed", createService(s.viaRuntime(t, s.alice), s.namespace, next.service()))
	cleanUpApplication(t, s, a, d, svc)
}

// A member's own token creates no Deployment and no Service, not even its own Attempt's, and
// neither does acting as the member by impersonation without the Runtime's user extra (the
// Runtime's own token, or the administrator's); the same objects through the Runtime are
// accepted (dry runs).
func TestMembersOwnTokenCreatesNoDeploymentOrService(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	a := s.attempt(s.alice)
	rt := s.runtimeConfig(t)
	for what, cs := range map[string]kubernetes.Interface{
		"her own token": s.asMember(t, s.alice),
		"the Runtime's token impersonating her without its user extra":         s.asMemberWithout(rt, s.alice),
		"the administrator impersonating her without the Runtime's user extra": s.asMemberWithout(s.e.Config, s.alice),
	} {
		refused(t, "alice's own Deployment with "+what, "metallo-member-creates", msgThroughRuntime, createDeployment(cs, s.namespace, a.deployment()))
		refused(t, "alice's own Service with "+what, "metallo-member-creates", msgThroughRuntime, createService(cs, s.namespace, a.service()))
	}
	via := s.viaRuntime(t, s.alice)
	acceptedDryRun(t, "alice's Deployment through the Runtime", createDeployment(via, s.namespace, a.deployment()))
	acceptedDryRun(t, "alice's Service through the Runtime", createService(via, s.namespace, a.service()))
}

// A Deployment without its member's identity, for another Project, not named for its Attempt, or
// whose Pod template lacks the Deployment's identity is refused, whoever creates it.
func TestDeploymentWithoutItsAttemptsIdentityOrNameIsRefused(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	via := s.viaRuntime(t, s.alice)
	a := s.attempt(s.alice)
	refused(t, "Deployment without execution.pharos.dev/member, through the Runtime as alice", "metallo-deployments", msgDeploymentIdentity,
		createDeployment(via, s.namespace, withoutDeploymentLabel(a.deployment(), labelMember)))
	refused(t, "Deployment without execution.pharos.dev/attempt, through the Runtime as alice", "metallo-deployments", msgDeploymentIDs,
		createDeployment(via, s.namespace, withoutDeploymentLabel(a.deployment(), labelAttempt)))
	bare := a.deployment()
	bare.Labels = nil
	bare.Spec.Selector.MatchLabels = map[string]string{"app": "web"}
	bare.Spec.Template.Labels = map[string]string{"app": "web"}
	refused(t, "Deployment without identity labels, as the administrator", "metallo-deployments", msgDeploymentIdentity, createDeployment(s.e.Client, s.namespace, bare))

	other := s.attempt(s.alice)
	other.project = uuid.NewString()
	refused(t, "alice's Deployment for another Project", "metallo-deployments", msgProject, createDeployment(via, s.namespace, other.deployment()))

	for what, name := range map[string]string{"another Attempt": s.attempt(s.alice).name(), "no Attempt": "web", "its Job's claim": a.claimName()} {
		d := a.deployment()
		d.Name = name
		refused(t, "alice's Deployment named for "+what, "metallo-deployments", msgDeploymentName, createDeployment(via, s.namespace, d))
	}

	d := a.deployment()
	d.Spec.Template.Labels[labelProject] = uuid.NewString()
	delete(d.Spec.Selector.MatchLabels, labelProject) // else the API server refuses the mismatch itself
	refused(t, "alice's Deployment whose Pods are labelled with another Project", "metallo-deployments", msgDeploymentTemplate, createDeployment(via, s.namespace, d))
	d = a.deployment()
	d.Spec.Template.Labels[labelMember] = s.bob
	delete(d.Spec.Selector.MatchLabels, labelMember)
	refused(t, "alice's Deployment whose Pods are labelled bob's", "metallo-deployments", msgDeploymentTemplate, createDeployment(via, s.namespace, d))
}

// A Deployment whose Pods would run as another account than the member its labels name is
// refused: another member's account, the namespace's default account, or none.
func TestDeploymentWhosePodsRunAsAnotherAccountIsRefused(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	for _, account := range []string{"member-" + s.bob, "default", ""} {
		d := s.attempt(s.alice).deployment()
		d.Spec.Template.Spec.ServiceAccountName = account
		refused(t, fmt.Sprintf("alice's Deployment running as %q", account), "metallo-deployments", msgDeploymentAccount,
			createDeployment(s.viaRuntime(t, s.alice), s.namespace, d))
	}
}

// A Deployment is created only as the member its labels name: bob (through the Runtime or with
// his own token) cannot create alice's Deployment, nor can the administrator.
func TestDeploymentCreatedAsAnotherMemberThanItsLabelsNameIsRefused(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	for what, cs := range map[string]kubernetes.Interface{
		"the Runtime impersonating bob": s.viaRuntime(t, s.bob),
		"the administrator":             s.e.Client,
	} {
		refused(t, "alice's Deployment created by "+what, "metallo-deployments", msgDeploymentCreator,
			createDeployment(cs, s.namespace, s.attempt(s.alice).deployment()))
	}
	refusedByOneOf(t, "alice's Deployment created with bob's own token", createDeployment(s.asMember(t, s.bob), s.namespace, s.attempt(s.alice).deployment()),
		denial{"metallo-deployments", msgDeploymentCreator}, denial{"metallo-member-creates", msgThroughRuntime})
}

// A Deployment selects exactly its Attempt's Pods: a selector without the Attempt, the member or
// the Project label, with a key beyond the identity labels, or with matchExpressions is refused
// (a broader selector would let its ReplicaSet adopt, count and scale down Pods of other
// Attempts). A selector naming another Attempt or member cannot match the Pod template, which
// the API server requires; the template's labels are the previous test's.
func TestDeploymentSelectingMoreThanItsAttemptsPodsIsRefused(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	via := s.viaRuntime(t, s.alice)
	a := s.attempt(s.alice)
	for what, change := range map[string]func(*appsv1.Deployment){
		"without the attempt label": func(d *appsv1.Deployment) { delete(d.Spec.Selector.MatchLabels, labelAttempt) },
		"without the member label":  func(d *appsv1.Deployment) { delete(d.Spec.Selector.MatchLabels, labelMember) },
		"without the project label": func(d *appsv1.Deployment) { delete(d.Spec.Selector.MatchLabels, labelProject) },
		"with another key": func(d *appsv1.Deployment) {
			d.Spec.Selector.MatchLabels["app"] = "web"
			d.Spec.Template.Labels["app"] = "web"
		},
		"with matchExpressions": func(d *appsv1.Deployment) {
			d.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: labelRun, Operator: metav1.LabelSelectorOpExists}}
		},
	} {
		d := a.deployment()
		change(d)
		refused(t, "alice's Deployment selecting Pods "+what, "metallo-deployments", msgDeploymentSelector, createDeployment(via, s.namespace, d))
	}
}

// A Deployment's Pods mount only their own Attempt's workspace claim and credential, and no
// other kind of volume: bob's Deployment naming alice's claim or credential, or with a hostPath
// volume, is refused.
func TestDeploymentMountingAnotherAttemptsClaimOrCredentialIsRefused(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	via := s.viaRuntime(t, s.bob)
	alice := s.attempt(s.alice)
	d := s.attempt(s.bob).deployment()
	d.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = alice.claimName()
	refused(t, "bob's Deployment mounting alice's claim", "metallo-deployments", msgOwnClaim, createDeployment(via, s.namespace, d))
	d = s.attempt(s.bob).deployment()
	d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: "credential", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: alice.secretName()}}})
	refused(t, "bob's Deployment mounting alice's credential", "metallo-deployments", msgNoCredential, createDeployment(via, s.namespace, d))
	d = s.attempt(s.bob).deployment()
	d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: alice.secretName()}, Key: "token",
	}}}}
	refused(t, "bob's Deployment reading alice's credential into its environment", "metallo-deployments", msgNoCredential, createDeployment(via, s.namespace, d))
	d = s.attempt(s.bob).deployment()
	d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib"}}})
	refused(t, "bob's Deployment with a hostPath volume", "metallo-deployments", msgVolumeKinds, createDeployment(via, s.namespace, d))
}

// A member's Service is private to the cluster and to its Attempt: NodePort, LoadBalancer and
// ExternalName Services, externalIPs, a selector that is missing, broader than the Attempt's
// Pods or naming another Attempt, a name not its Attempt's, another Project, and a creator other
// than its labelled member (bob through the Runtime, the administrator) are refused.
func TestMembersServiceOutsideItsAttemptOrNotClusterIPIsRefused(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	via := s.viaRuntime(t, s.alice)
	a := s.attempt(s.alice)
	for what, change := range map[string]func(*corev1.Service){
		"of type NodePort":     func(svc *corev1.Service) { svc.Spec.Type = corev1.ServiceTypeNodePort },
		"of type LoadBalancer": func(svc *corev1.Service) { svc.Spec.Type = corev1.ServiceTypeLoadBalancer },
	} {
		svc := a.service()
		change(svc)
		refused(t, "alice's Service "+what, "metallo-services", msgServiceType, createService(via, s.namespace, svc))
	}
	external := a.service()
	external.Spec.Type, external.Spec.ExternalName, external.Spec.Ports = corev1.ServiceTypeExternalName, "git.example.org", nil
	refused(t, "alice's Service of type ExternalName", "metallo-services", msgServiceType, createService(via, s.namespace, external))
	withIPs := a.service()
	withIPs.Spec.ExternalIPs = []string{"192.0.2.10"}
	refused(t, "alice's ClusterIP Service with externalIPs", "metallo-services", msgServiceExternal, createService(via, s.namespace, withIPs))

	for what, change := range map[string]func(map[string]string) map[string]string{
		"without a selector":          func(map[string]string) map[string]string { return nil },
		"without the member label":    func(m map[string]string) map[string]string { delete(m, labelMember); return m },
		"without the attempt label":   func(m map[string]string) map[string]string { delete(m, labelAttempt); return m },
		"of another Attempt":          func(m map[string]string) map[string]string { m[labelAttempt] = uuid.NewString(); return m },
		"of bob":                      func(m map[string]string) map[string]string { m[labelMember] = s.bob; return m },
		"with a key beyond identity":  func(m map[string]string) map[string]string { m["app"] = "web"; return m },
		"of the whole Project's Pods": func(map[string]string) map[string]string { return map[string]string{labelProject: s.project} },
	} {
		svc := a.service()
		svc.Spec.Selector = change(svc.Spec.Selector)
		refused(t, "alice's Service selecting Pods "+what, "metallo-services", msgServiceSelector, createService(via, s.namespace, svc))
	}

	for what, name := range map[string]string{"another Attempt": s.attempt(s.alice).name(), "no Attempt": "web"} {
		svc := a.service()
		svc.Name = name
		refused(t, "alice's Service named for "+what, "metallo-services", msgServiceName, createService(via, s.namespace, svc))
	}
	other := s.attempt(s.alice)
	other.project = uuid.NewString()
	refused(t, "alice's Service for another Project", "metallo-services", msgProject, createService(via, s.namespace, other.service()))
	refused(t, "alice's Service created by the Runtime impersonating bob", "metallo-services", msgServiceCreator,
		createService(s.viaRuntime(t, s.bob), s.namespace, a.service()))
	refused(t, "alice's Service created by the administrator", "metallo-services", msgServiceCreator, createService(s.e.Client, s.namespace, a.service()))
	refusedByOneOf(t, "alice's Service created with bob's own token", createService(s.asMember(t, s.bob), s.namespace, a.service()),
		denial{"metallo-services", msgServiceCreator}, denial{"metallo-member-creates", msgThroughRuntime})
}

// attemptPod is a Pod of the Attempt as the ReplicaSet controller creates it for the Deployment:
// the Pod template's labels plus the pod-template-hash, and a controller owner reference to the
// ReplicaSet attempt-<attempt>-<hash>.
func (a attempt) attemptPod(hash string) *corev1.Pod {
	yes := true
	d := a.deployment()
	meta := d.Spec.Template.ObjectMeta
	meta.Name = a.name() + "-" + hash + "-" + strings.ToLower(uuid.NewString()[:5])
	meta.Labels[labelPodTemplateHash] = hash
	meta.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: "ReplicaSet", Name: a.name() + "-" + hash, UID: types.UID(uuid.NewString()), Controller: &yes, BlockOwnerDeletion: &yes,
	}}
	return &corev1.Pod{ObjectMeta: meta, Spec: d.Spec.Template.Spec}
}

// Pods of the ReplicaSet controller are admitted only for their Attempt's Deployment: a controller
// owner reference to a ReplicaSet (with a UID) named attempt-<attempt> plus the Pod's
// pod-template-hash. With the controller's own identity (the administrator impersonating
// system:serviceaccount:kube-system:replicaset-controller, which holds the controller's real
// grants), a Pod owned by a ReplicaSet of another Attempt's or another Deployment's name, with a
// hash other than its owner's, a non-controller owner, another kind of owner or no UID is
// refused, while the Pod as the controller makes it is accepted (dry run). The same Pod with an
// owner reference, created by the Runtime as alice or by alice's own token, is a bare Pod.
// Finally the real ReplicaSet controller gets no Pod admitted for a ReplicaSet named for no
// Attempt's Deployment (the administrator's, with alice's Pod template): its ReplicaFailure
// condition names the refusal and no Pod exists.
func TestPodsOfTheReplicaSetControllerAreAdmittedOnlyForTheirAttemptsDeployment(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	ns := s.namespace
	a := s.attempt(s.alice)
	controller := s.e.ClientFor(kubeconfig.Impersonate(s.e.Config, replicaSetController))
	acceptedDryRun(t, "the ReplicaSet controller's Pod of alice's Deployment", createPod(controller, ns, a.attemptPod("5d8f7b9c4")))
	no := false
	for what, change := range map[string]func(*corev1.Pod){
		"another Attempt's ReplicaSet":  func(p *corev1.Pod) { p.OwnerReferences[0].Name = s.attempt(s.alice).name() + "-5d8f7b9c4" },
		"a ReplicaSet of another name":  func(p *corev1.Pod) { p.OwnerReferences[0].Name = "web-5d8f7b9c4" },
		"another hash than its owner's": func(p *corev1.Pod) { p.Labels[labelPodTemplateHash] = "6c9d8b7f5" },
		"no pod-template-hash": func(p *corev1.Pod) {
			delete(p.Labels, labelPodTemplateHash)
			p.OwnerReferences[0].Name = a.name() + "-"
		},
		"a non-controller owner": func(p *corev1.Pod) { p.OwnerReferences[0].Controller = &no },
		"a Deployment owner": func(p *corev1.Pod) {
			p.OwnerReferences[0].Kind, p.OwnerReferences[0].Name = "Deployment", a.name()
		},
		"a Job owner": func(p *corev1.Pod) {
			p.OwnerReferences[0].APIVersion, p.OwnerReferences[0].Kind = "batch/v1", "Job"
		},
	} {
		p := a.attemptPod("5d8f7b9c4")
		change(p)
		refused(t, "the ReplicaSet controller's Pod owned by "+what, "metallo-pod-origin", msgBarePod, createPod(controller, ns, p))
	}
	// An owner reference without a UID never reaches admission: the API server refuses it.
	noUID := a.attemptPod("5d8f7b9c4")
	noUID.OwnerReferences[0].UID = ""
	if err := createPod(controller, ns, noUID)(ctx(t), []string{metav1.DryRunAll}); !apierrors.IsInvalid(err) {
		t.Errorf("the ReplicaSet controller's Pod owned by a ReplicaSet without UID: want 422 Invalid, got %v", err)
	}
	refused(t, "alice's Pod claiming her ReplicaSet owner, through the Runtime as alice", "metallo-pod-origin", msgBarePod,
		createPod(s.viaRuntime(t, s.alice), ns, a.attemptPod("5d8f7b9c4")))
	refusedByOneOf(t, "alice's Pod claiming her ReplicaSet owner, with her own token", createPod(s.asMember(t, s.alice), ns, a.attemptPod("5d8f7b9c4")),
		denial{"metallo-pod-origin", msgBarePod}, denial{"metallo-member-creates", msgThroughRuntime})

	prepared(t, s, a)
	d := a.deployment()
	stray := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "stray", Labels: d.Spec.Template.Labels},
		Spec:       appsv1.ReplicaSetSpec{Replicas: d.Spec.Replicas, Selector: d.Spec.Selector, Template: d.Spec.Template},
	}
	if _, err := s.e.Client.AppsV1().ReplicaSets(ns).Create(ctx(t), stray, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the administrator's ReplicaSet: %v", err)
	}
	failed := kubetest.Until(t, long, "the stray ReplicaSet's ReplicaFailure", s.watch("replicasets", stray.Name), func(rs *appsv1.ReplicaSet) bool {
		for _, c := range rs.Status.Conditions {
			if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue {
				return strings.Contains(c.Message, "metallo-pod-origin") && strings.Contains(c.Message, msgBarePod)
			}
		}
		return false
	})
	t.Logf("the stray ReplicaSet: %+v", failed.Status.Conditions)
	pods, err := s.e.Client.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{LabelSelector: labelAttempt + "=" + a.id})
	if err != nil || len(pods.Items) != 0 {
		t.Fatalf("want no Pod of the stray ReplicaSet, got %d (err %v)", len(pods.Items), err)
	}
}

// The Runtime's deletes of an application service's Deployment, Service and ReplicaSet without
// the exact UID precondition are refused (a propagation policy alone is not enough), and the
// objects stay; the exact-UID delete of the ReplicaSet is accepted (dry run).
func TestRuntimeApplicationDeleteWithoutExactUIDIsRefused(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	a := s.attempt(s.alice)
	d, svc := startApplication(t, s, a)
	rsName := metav1.GetControllerOf(applicationPod(t, s, a)).Name
	rt := s.asRuntime(t)
	ns := s.namespace
	fg := metav1.DeletePropagationForeground
	for _, opts := range []metav1.DeleteOptions{{}, {PropagationPolicy: &fg}} {
		for kind, del := range map[string]func(context.Context, metav1.DeleteOptions) error{
			"Deployment": func(c context.Context, o metav1.DeleteOptions) error {
				return rt.AppsV1().Deployments(ns).Delete(c, d.Name, o)
			},
			"Service": func(c context.Context, o metav1.DeleteOptions) error {
				return rt.CoreV1().Services(ns).Delete(c, svc.Name, o)
			},
			"ReplicaSet": func(c context.Context, o metav1.DeleteOptions) error {
				return rt.AppsV1().ReplicaSets(ns).Delete(c, rsName, o)
			},
		} {
			refused(t, fmt.Sprintf("the Runtime deleting alice's %s without a UID precondition (propagation %v)", kind, opts.PropagationPolicy),
				"metallo-runtime-deletes", msgExactUID, func(c context.Context, dryRun []string) error {
					o := opts
					o.DryRun = dryRun
					return del(c, o)
				})
		}
	}
	c := ctx(t)
	rs, err := s.e.Client.AppsV1().ReplicaSets(ns).Get(c, rsName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("alice's ReplicaSet must survive the refused deletes: %v", err)
	}
	acceptedDryRun(t, "the Runtime's exact-UID delete of the ReplicaSet", func(c context.Context, dryRun []string) error {
		return rt.AppsV1().ReplicaSets(ns).Delete(c, rsName, exactDelete(rs.UID, dryRun))
	})
	if _, err := s.e.Client.AppsV1().Deployments(ns).Get(c, d.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("alice's Deployment must survive the refused deletes: %v", err)
	}
	if _, err := s.e.Client.CoreV1().Services(ns).Get(c, svc.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("alice's Service must survive the refused deletes: %v", err)
	}
}

// Members never delete, patch or update an application service's Deployment, ReplicaSet or
// Service, and the Runtime never patches them: refused by RBAC (metallo-member grants create
// only), and by admission even when someone grants the verbs. (The Deployment and ReplicaSet
// controllers' own updates go on: the control test's Deployment becomes Available.)
func TestApplicationObjectsAreNeverDeletedByMembersNorChanged(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	a := s.attempt(s.alice)
	d, svc := startApplication(t, s, a)
	rsName := metav1.GetControllerOf(applicationPod(t, s, a)).Name
	ns := s.namespace
	own := s.asMember(t, s.alice)
	if err := own.AppsV1().Deployments(ns).Delete(ctx(t), d.Name, metav1.DeleteOptions{}); !isRBACRefusal(err) {
		t.Fatalf("alice deleting her Deployment with metallo-member alone: want 403 from RBAC, got %v", err)
	}

	verbs := []string{"update", "patch", "delete"}
	s.grant(t, s.memberUser(s.alice),
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets"}, Verbs: verbs},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: verbs})
	s.grant(t, runtimeUser,
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets"}, Verbs: []string{"patch"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"patch"}})

	rt := s.asRuntime(t)
	image := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"registry.invalid/other:1"}]}}}}`)
	open := []byte(`{"spec":{"type":"NodePort"}}`)
	scale := []byte(`{"spec":{"replicas":5}}`)
	reqs := map[string]request{}
	for who, cs := range map[string]kubernetes.Interface{"alice": own, "the Runtime": rt} {
		reqs[who+" patching the Deployment's image"] = func(c context.Context, dryRun []string) error {
			_, err := cs.AppsV1().Deployments(ns).Patch(c, d.Name, types.StrategicMergePatchType, image, metav1.PatchOptions{DryRun: dryRun})
			return err
		}
		reqs[who+" scaling the ReplicaSet"] = func(c context.Context, dryRun []string) error {
			_, err := cs.AppsV1().ReplicaSets(ns).Patch(c, rsName, types.MergePatchType, scale, metav1.PatchOptions{DryRun: dryRun})
			return err
		}
		reqs[who+" opening the Service as a NodePort"] = func(c context.Context, dryRun []string) error {
			_, err := cs.CoreV1().Services(ns).Patch(c, svc.Name, types.MergePatchType, open, metav1.PatchOptions{DryRun: dryRun})
			return err
		}
	}
	for what, req := range reqs {
		refused(t, what, "metallo-runtime-objects", msgNoUpdate, req)
	}
	for what, req := range map[string]request{
		"alice deleting her Deployment": func(c context.Context, dryRun []string) error {
			return own.AppsV1().Deployments(ns).Delete(c, d.Name, exactDelete(d.UID, dryRun))
		},
		"alice deleting her ReplicaSet": func(c context.Context, dryRun []string) error {
			return own.AppsV1().ReplicaSets(ns).Delete(c, rsName, metav1.DeleteOptions{DryRun: dryRun})
		},
		"alice deleting her Service": func(c context.Context, dryRun []string) error {
			return own.CoreV1().Services(ns).Delete(c, svc.Name, metav1.DeleteOptions{DryRun: dryRun})
		},
	} {
		refused(t, what, "metallo-runtime-objects", msgMemberDelete, req)
	}
}

package policytest

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/kube/kubeconfig"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// KServe's names of an inference Attempt's predictor (deploy/cluster/policies/deployments.yaml,
// services.yaml).
const (
	kserveNamespace, kserveAccount = "kserve", "kserve-controller-manager"
	labelApp                       = "app"
)

func (a attempt) predictorName() string { return a.name() + "-predictor" }

// inferenceOwner is the controller owner reference KServe's controller puts on the predictor
// objects of the Attempt's InferenceService attempt-<attempt>.
func (a attempt) inferenceOwner() []metav1.OwnerReference {
	yes := true
	return []metav1.OwnerReference{{APIVersion: "serving.kserve.io/v1beta1", Kind: "InferenceService", Name: a.name(),
		UID: types.UID(uuid.NewString()), Controller: &yes, BlockOwnerDeletion: &yes}}
}

// predictorDeployment is the predictor Deployment as KServe v0.16's controller makes it in
// Standard mode: named <isvc>-predictor, the InferenceService's labels (the identity) on it and its
// Pod template, the selector app: isvc.<isvc>-predictor, Pods running as the member with the
// Attempt's claim, a controller owner reference to the InferenceService.
func (a attempt) predictorDeployment() *appsv1.Deployment {
	d := a.deployment()
	d.Name = a.predictorName()
	d.OwnerReferences = a.inferenceOwner()
	sel := map[string]string{labelApp: "isvc." + a.predictorName()}
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: sel}
	d.Spec.Template.Labels[labelApp] = sel[labelApp]
	d.Spec.Template.Spec.Containers[0].Name = "kserve-container"
	return d
}

// predictorService is the predictor Service KServe's controller makes: <isvc>-predictor, ClusterIP,
// exactly one selector app: isvc.<isvc>-predictor, the identity labels, the owner reference.
func (a attempt) predictorService() *corev1.Service {
	meta := a.meta(a.predictorName())
	meta.OwnerReferences = a.inferenceOwner()
	return &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{
		Type:     corev1.ServiceTypeClusterIP,
		Selector: map[string]string{labelApp: "isvc." + a.predictorName()},
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
	}}
}

// KServe's controller, with its own service account's real token, may create an inference
// Attempt's predictor Deployment and Service (dry runs): named attempt-<attempt>-predictor, with
// the selector app: isvc.attempt-<attempt>-predictor and an InferenceService controller owner of
// the Attempt's name. The same objects are refused from another caller (the Runtime as the member,
// the ReplicaSet controller's identity), without the owner reference, with an owner of another
// Attempt's name, with a second selector, under another name, running as another account, or as a
// NodePort; the ReplicaSet controller's Pods of the predictor's ReplicaSet
// attempt-<attempt>-predictor-<hash> are admitted (docs/site-runtime.md#inference-services-on-kserve).
func TestKServesPredictorIsAdmittedOnlyFromItsControllerForItsAttemptsInferenceService(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	ns := s.namespace
	a := s.attempt(s.alice)
	kserve := s.e.ClientFor(s.e.ServiceAccountConfig(kserveNamespace, kserveAccount))
	acceptedDryRun(t, "KServe's predictor Deployment", createDeployment(kserve, ns, a.predictorDeployment()))
	acceptedDryRun(t, "KServe's predictor Service", createService(kserve, ns, a.predictorService()))

	other := s.attempt(s.alice)
	asMember := s.viaRuntime(t, a.member)
	rsController := s.e.ClientFor(kubeconfig.Impersonate(s.e.Config, replicaSetController))
	refusedByOneOf(t, "the predictor Deployment created by the Runtime as the member", createDeployment(asMember, ns, a.predictorDeployment()),
		denial{"metallo-deployments", msgDeploymentName}, denial{"metallo-deployments", msgDeploymentSelector})
	refusedByOneOf(t, "the predictor Deployment created by the cluster administrator", createDeployment(s.e.Client, ns, a.predictorDeployment()),
		denial{"metallo-deployments", msgDeploymentName}, denial{"metallo-deployments", msgDeploymentSelector}, denial{"metallo-deployments", msgDeploymentCreator})
	for what, change := range map[string]func(*appsv1.Deployment){
		"without the owner reference": func(d *appsv1.Deployment) { d.OwnerReferences = nil },
		"owned by another Attempt's InferenceService": func(d *appsv1.Deployment) {
			d.OwnerReferences = other.inferenceOwner()
		},
		"owned by a non-controller owner": func(d *appsv1.Deployment) {
			no := false
			d.OwnerReferences[0].Controller = &no
		},
		"owned by another kind": func(d *appsv1.Deployment) { d.OwnerReferences[0].Kind = "TrainedModel" },
	} {
		d := a.predictorDeployment()
		change(d)
		refusedByOneOf(t, "KServe's predictor Deployment "+what, createDeployment(kserve, ns, d),
			denial{"metallo-deployments", msgDeploymentName}, denial{"metallo-deployments", msgDeploymentSelector}, denial{"metallo-deployments", msgDeploymentCreator})
	}
	second := a.predictorDeployment()
	second.Spec.Selector.MatchLabels[labelAttempt] = a.id
	refused(t, "KServe's predictor Deployment with a second selector", "metallo-deployments", msgDeploymentSelector, createDeployment(kserve, ns, second))
	renamed := a.predictorDeployment()
	renamed.Name = a.name() + "-transformer"
	refused(t, "KServe's Deployment under another name", "metallo-deployments", msgDeploymentName, createDeployment(kserve, ns, renamed))
	account := a.predictorDeployment()
	account.Spec.Template.Spec.ServiceAccountName = "default"
	refused(t, "KServe's predictor Deployment running as another account", "metallo-deployments", msgDeploymentAccount, createDeployment(kserve, ns, account))

	refusedByOneOf(t, "the predictor Service created by the Runtime as the member", createService(asMember, ns, a.predictorService()),
		denial{"metallo-services", msgServiceName}, denial{"metallo-services", msgServiceSelector})
	refusedByOneOf(t, "the predictor Service created by the cluster administrator", createService(s.e.Client, ns, a.predictorService()),
		denial{"metallo-services", msgServiceCreator})
	for what, change := range map[string]func(*corev1.Service){
		"without the owner reference": func(svc *corev1.Service) { svc.OwnerReferences = nil },
		"owned by another Attempt's InferenceService": func(svc *corev1.Service) {
			svc.OwnerReferences = other.inferenceOwner()
		},
	} {
		svc := a.predictorService()
		change(svc)
		refusedByOneOf(t, "KServe's predictor Service "+what, createService(kserve, ns, svc),
			denial{"metallo-services", msgServiceCreator}, denial{"metallo-services", msgServiceName}, denial{"metallo-services", msgServiceSelector})
	}
	two := a.predictorService()
	two.Spec.Selector[labelAttempt] = a.id
	refused(t, "KServe's predictor Service with a second selector", "metallo-services", msgServiceSelector, createService(kserve, ns, two))
	nodePort := a.predictorService()
	nodePort.Spec.Type = corev1.ServiceTypeNodePort
	refused(t, "KServe's predictor Service as a NodePort", "metallo-services", msgServiceType, createService(kserve, ns, nodePort))
	foreign := a.predictorService()
	foreign.Labels[labelProject] = uuid.NewString()
	refused(t, "KServe's predictor Service claiming another Project", "metallo-services", "label execution.pharos.dev/project must name this namespace's Project",
		createService(kserve, ns, foreign))

	pod := a.attemptPod("7c6d5b4f8")
	pod.OwnerReferences[0].Name = a.predictorName() + "-7c6d5b4f8"
	pod.Labels[labelApp] = "isvc." + a.predictorName()
	acceptedDryRun(t, "the ReplicaSet controller's Pod of KServe's predictor", createPod(rsController, ns, pod))
	bare := a.attemptPod("7c6d5b4f8")
	bare.OwnerReferences[0].Name = a.predictorName() + "-7c6d5b4f8"
	refusedBy(t, "the predictor's Pod created by KServe's controller itself (by RBAC or as a bare Pod)", func(err error) bool {
		return isRBACRefusal(err) || denial{"metallo-pod-origin", msgBarePod}.matches(err)
	}, createPod(kserve, ns, bare))
}

// The predictor's read-only verification of its prepared checkout (the init container
// workspace-verify as the Runtime renders it in the InferenceService, kube.VerifyContainer, which
// KServe's controller carries onto the predictor Deployment) is accepted in KServe's predictor
// Deployment (KServe's controller's real token) and in the ReplicaSet controller's predictor Pod
// (dry runs); the same objects mounting the Attempt's credential for it are refused: the predictor
// exception admits no credential (docs/site-runtime.md#services-and-the-prepared-workspace).
func TestKServesPredictorVerifiesItsWorkspaceOnlyWithoutACredential(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	ns := s.namespace
	a := s.attempt(s.alice)
	kserve := s.e.ClientFor(s.e.ServiceAccountConfig(kserveNamespace, kserveAccount))
	rsController := s.e.ClientFor(kubeconfig.Impersonate(s.e.Config, replicaSetController))
	verify := kube.VerifyContainer(application.WorkspaceVerification{Image: platformImage,
		Repository: siteprotocol.Repository{URL: "https://git.example.org/lab/model.git", Commit: strings.Repeat("d", 40)}, SizeLimitBytes: 1 << 20})
	pod := func() *corev1.Pod {
		p := a.attemptPod("7c6d5b4f8")
		p.OwnerReferences[0].Name = a.predictorName() + "-7c6d5b4f8"
		p.Labels[labelApp] = "isvc." + a.predictorName()
		p.Spec.InitContainers = []corev1.Container{verify}
		return p
	}
	d := a.predictorDeployment()
	d.Spec.Template.Spec.InitContainers = []corev1.Container{verify}
	acceptedDryRun(t, "KServe's predictor Deployment verifying its workspace", createDeployment(kserve, ns, d))
	acceptedDryRun(t, "the ReplicaSet controller's predictor Pod verifying its workspace", createPod(rsController, ns, pod()))

	withCredential := verify
	withCredential.VolumeMounts = append(slices.Clone(verify.VolumeMounts), corev1.VolumeMount{Name: "credential", MountPath: "/var/run/secrets/metallo/repository"})
	credential := corev1.Volume{Name: "credential", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: a.secretName()}}}
	d = a.predictorDeployment()
	d.Spec.Template.Spec.InitContainers = []corev1.Container{withCredential}
	d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, credential)
	refused(t, "KServe's predictor Deployment verifying its workspace with the credential", "metallo-deployments", msgNoCredential, createDeployment(kserve, ns, d))
	p := pod()
	p.Spec.InitContainers = []corev1.Container{withCredential}
	p.Spec.Volumes = append(p.Spec.Volumes, credential)
	refused(t, "the predictor Pod verifying its workspace with the credential", "metallo-pods", msgHelperCredential, createPod(rsController, ns, p))
}

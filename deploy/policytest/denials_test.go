package policytest

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Messages of the policies (deploy/cluster/policies), as the tests expect them.
const (
	msgJobIdentity       = "a Job in a Site project namespace needs its member's identity"
	msgPodIdentity       = "a Pod in a Site project namespace needs its member's identity"
	msgProject           = "label execution.pharos.dev/project must name this namespace's Project"
	msgTemplateLabels    = "the Job's Pod template must carry the Job's execution.pharos.dev/member, attempt and project labels"
	msgJobAccount        = "the Job's Pods must run as the member its labels name"
	msgPodAccount        = "a Pod must run as the member its labels name"
	msgJobCreator        = "a Job must be created by the member its labels name"
	msgBarePod           = "no bare Pods in a Site project namespace"
	msgVolumeKinds       = "volumes in a Site project namespace are limited to"
	msgOwnClaim          = "a Pod may mount only its own Attempt's workspace claim"
	msgNoCredential      = "a member's workload uses no credential Secret"
	msgCredentialForm    = "a Pod uses a credential Secret attempt-<attempt>-cred only as a secret volume"
	msgHelperCredential  = "only the Attempt's workspace helper attempt-<attempt>-git mounts a credential Secret"
	msgHelperShape       = "a workspace helper has exactly one container"
	msgHelperImage       = "a workspace helper runs the Site's fixed platform image"
	msgHelperCommand     = "a workspace helper runs exactly the rendered command"
	msgThroughRuntime    = "a member creates in a Site project namespace only through the Site Runtime"
	msgClaimCreator      = "a workspace claim must be created by the member its execution.pharos.dev/member label names"
	msgClaimName         = "a member's claim must be its Attempt's workspace, named attempt-<execution.pharos.dev/attempt>-ws"
	msgFreshClaim        = "a workspace claim is always fresh"
	msgCredentialCreator = "a credential Secret must be created by the member its execution.pharos.dev/member label names"
	msgCredentialName    = "a member's Secret must be its Attempt's credential, named attempt-<execution.pharos.dev/attempt>-cred"
	msgOpaque            = "a credential Secret is of type Opaque"
	msgExactUID          = "the Runtime deletes only with the exact UID precondition"
	msgMemberDelete      = "members never delete what the Runtime created"
	msgNoUpdate          = "what the Runtime created is never patched or updated"
)

// withoutLabel removes a label from the Job and its Pod template.
func withoutLabel(j *batchv1.Job, key string) *batchv1.Job {
	delete(j.Labels, key)
	delete(j.Spec.Template.Labels, key)
	return j
}

// A Job without a member identity is refused, whoever creates it: the Runtime impersonating a
// member, or the administrator.
func TestJobWithoutMemberIdentityIsRefused(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	a := s.attempt(s.alice)
	refused(t, "Job without execution.pharos.dev/member, through the Runtime as alice", "metallo-jobs", msgJobIdentity,
		createJob(s.viaRuntime(t, s.alice), s.namespace, withoutLabel(a.job("1"), labelMember)))
	bare := a.job("1")
	bare.Labels, bare.Spec.Template.Labels = nil, nil
	refused(t, "Job without any label, as the administrator", "metallo-jobs", msgJobIdentity, createJob(s.e.Client, s.namespace, bare))
	notUUID := a.job("1")
	notUUID.Labels[labelMember], notUUID.Spec.Template.Labels[labelMember] = "alice", "alice"
	refused(t, "Job whose member label is no UUID", "metallo-jobs", msgJobIdentity, createJob(s.e.Client, s.namespace, notUUID))
}

// A Job whose Pods would run as another account than the member its labels name is refused:
// another member's account, the namespace's default account, or none.
func TestJobWhoseServiceAccountIsNotItsLabelledMemberIsRefused(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	for _, account := range []string{"member-" + s.bob, "default", ""} {
		j := s.attempt(s.alice).job("1")
		j.Spec.Template.Spec.ServiceAccountName = account
		refused(t, fmt.Sprintf("alice's Job running as %q", account), "metallo-jobs", msgJobAccount, createJob(s.viaRuntime(t, s.alice), s.namespace, j))
	}
}

// A Job is created only as the member its labels name: bob (through the Runtime or with his own
// token) cannot create alice's Job, nor can the administrator. (bob's own token breaks two rules:
// it creates nothing at all.)
func TestJobCreatedAsAnotherMemberThanItsLabelsNameIsRefused(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	for what, cs := range map[string]kubernetes.Interface{
		"the Runtime impersonating bob": s.viaRuntime(t, s.bob),
		"the administrator":             s.e.Client,
	} {
		refused(t, "alice's Job created by "+what, "metallo-jobs", msgJobCreator, createJob(cs, s.namespace, s.attempt(s.alice).job("1")))
	}
	refusedByOneOf(t, "alice's Job created with bob's own token", createJob(s.asMember(t, s.bob), s.namespace, s.attempt(s.alice).job("1")),
		denial{"metallo-jobs", msgJobCreator}, denial{"metallo-member-creates", msgThroughRuntime})
}

// A Job claiming another Project than the namespace's project-id is refused, and so is one whose
// Pod template does not carry the Job's identity.
func TestJobClaimingAnotherProjectOrWithoutIdentityOnItsPodsIsRefused(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	other := s.attempt(s.alice)
	other.project = uuid.NewString()
	refused(t, "alice's Job for another Project", "metallo-jobs", msgProject, createJob(s.viaRuntime(t, s.alice), s.namespace, other.job("1")))

	j := s.attempt(s.alice).job("1")
	j.Spec.Template.Labels[labelMember] = s.bob
	refused(t, "alice's Job whose Pods are labelled bob's", "metallo-jobs", msgTemplateLabels, createJob(s.viaRuntime(t, s.alice), s.namespace, j))
	j = s.attempt(s.alice).job("1")
	delete(j.Spec.Template.Labels, labelAttempt)
	refused(t, "alice's Job whose Pods carry no attempt label", "metallo-jobs", msgTemplateLabels, createJob(s.viaRuntime(t, s.alice), s.namespace, j))
}

// A Pod without a member identity, or running as another account than its labelled member, is
// refused (the administrator's Pod without labels; alice's helper Pod running as bob).
func TestPodWithoutMemberIdentityOrRunningAsAnotherAccountIsRefused(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	p := s.attempt(s.alice).helper()
	p.Labels = nil
	refused(t, "Pod without labels, as the administrator", "metallo-pods", msgPodIdentity, createPod(s.e.Client, s.namespace, p))
	p = s.attempt(s.alice).helper()
	delete(p.Labels, labelMember)
	refused(t, "helper Pod without a member label, through the Runtime as alice", "metallo-pods", msgPodIdentity, createPod(s.viaRuntime(t, s.alice), s.namespace, p))
	p = s.attempt(s.alice).helper()
	p.Spec.ServiceAccountName = "member-" + s.bob
	refused(t, "alice's helper Pod running as bob", "metallo-pods", msgPodAccount, createPod(s.viaRuntime(t, s.alice), s.namespace, p))
	p = s.attempt(s.alice).helper()
	p.Spec.ServiceAccountName = ""
	refused(t, "alice's helper Pod running as the default account", "metallo-pods", msgPodAccount, createPod(s.viaRuntime(t, s.alice), s.namespace, p))
}

// Members create no bare Pods: a Pod with alice's full identity that is not her Attempt's
// workspace helper is refused with her own token and through the Runtime, and the
// administrator's Pod with her identity is refused too.
func TestBarePodsAreRefused(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	shell := func() *corev1.Pod {
		a := s.attempt(s.alice)
		p := a.helper()
		p.Name = "shell"
		// A member workload's spec: no credential (metallo-pods would refuse that too).
		p.Spec = a.podSpec()
		delete(p.Labels, "execution.pharos.dev/role")
		return p
	}
	refusedByOneOf(t, "bare Pod with alice's own token", createPod(s.asMember(t, s.alice), s.namespace, shell()),
		denial{"metallo-pod-origin", msgBarePod}, denial{"metallo-member-creates", msgThroughRuntime})
	refused(t, "bare Pod through the Runtime as alice", "metallo-pod-origin", msgBarePod, createPod(s.viaRuntime(t, s.alice), s.namespace, shell()))
	refused(t, "bare Pod with alice's identity, as the administrator", "metallo-pod-origin", msgBarePod, createPod(s.e.Client, s.namespace, shell()))
	// A helper named for alice's Attempt is hers alone.
	refused(t, "alice's helper Pod created by bob", "metallo-pod-origin", msgBarePod, createPod(s.viaRuntime(t, s.bob), s.namespace, s.attempt(s.alice).helper()))
	// Naming an owner Job does not make a Pod the Job controller's.
	owned := shell()
	yes := true
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "attempt-x", UID: types.UID(uuid.NewString()), Controller: &yes}}
	refused(t, "Pod claiming a Job owner, through the Runtime as alice", "metallo-pod-origin", msgBarePod, createPod(s.viaRuntime(t, s.alice), s.namespace, owned))
}

// A Job or Pod mounts only its own Attempt's workspace claim: bob's Job and helper Pod naming
// alice's Attempt's claim are refused.
func TestMountingAnotherAttemptsWorkspaceClaimIsRefused(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	alice := s.attempt(s.alice)
	bob := s.attempt(s.bob)
	j := bob.job("1")
	j.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = alice.claimName()
	refused(t, "bob's Job mounting alice's claim", "metallo-jobs", msgOwnClaim, createJob(s.viaRuntime(t, s.bob), s.namespace, j))
	p := bob.helper()
	p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = alice.claimName()
	refused(t, "bob's helper Pod mounting alice's claim", "metallo-pods", msgOwnClaim, createPod(s.viaRuntime(t, s.bob), s.namespace, p))
}

// No member workload uses a credential Secret in any form — a secret volume, a projected volume,
// an environment variable, envFrom, an image pull secret — not even its own Attempt's; a helper
// Pod mounts only its own Attempt's credential, and only as a secret volume.
func TestUsingAnotherAttemptsCredentialIsRefused(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	foreign := s.attempt(s.alice).secretName()
	ref := corev1.LocalObjectReference{Name: foreign}
	for what, change := range map[string]func(*corev1.PodSpec){
		"secret volume": func(p *corev1.PodSpec) {
			p.Volumes = append(p.Volumes, corev1.Volume{Name: "cred2", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: foreign}}})
		},
		"projected volume": func(p *corev1.PodSpec) {
			p.Volumes = append(p.Volumes, corev1.Volume{Name: "cred2", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: ref}},
			}}}})
		},
		"environment variable": func(p *corev1.PodSpec) {
			p.Containers[0].Env = []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: ref, Key: "token"}}}}
		},
		"envFrom": func(p *corev1.PodSpec) {
			p.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref}}}
		},
		"image pull secret": func(p *corev1.PodSpec) { p.ImagePullSecrets = []corev1.LocalObjectReference{ref} },
	} {
		j := s.attempt(s.bob).job("1")
		change(&j.Spec.Template.Spec)
		refused(t, "bob's Job using alice's credential as "+what, "metallo-jobs", msgNoCredential, createJob(s.viaRuntime(t, s.bob), s.namespace, j))
		p := s.attempt(s.bob).helper()
		change(&p.Spec)
		msg := msgCredentialForm
		if what == "secret volume" {
			msg = msgHelperCredential
		}
		denials := []denial{{"metallo-pods", msg}}
		if what == "environment variable" || what == "envFrom" {
			// A helper has no environment at all (metallo-workspace-helpers).
			denials = append(denials, denial{"metallo-workspace-helpers", msgHelperToken})
		}
		refusedByOneOf(t, "bob's helper Pod using alice's credential as "+what, createPod(s.viaRuntime(t, s.bob), s.namespace, p), denials...)
	}
}

// Volumes other than the Attempt's claim, credential, ConfigMaps, emptyDir, downwardAPI and
// projected volumes are refused: a hostPath, and a generic ephemeral volume (which could clone
// another claim).
func TestVolumesOutsideTheWorkspaceAndCredentialAreRefused(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	for what, src := range map[string]corev1.VolumeSource{
		"hostPath": {HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib"}},
		"ephemeral": {Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				DataSource:  &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: s.attempt(s.bob).claimName()},
				Resources:   s.attempt(s.alice).claim().Spec.Resources,
			},
		}}},
	} {
		j := s.attempt(s.alice).job("1")
		j.Spec.Template.Spec.Volumes = append(j.Spec.Template.Spec.Volumes, corev1.Volume{Name: "extra", VolumeSource: src})
		refused(t, "alice's Job with a "+what+" volume", "metallo-jobs", msgVolumeKinds, createJob(s.viaRuntime(t, s.alice), s.namespace, j))
		p := s.attempt(s.alice).helper()
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "extra", VolumeSource: src})
		refused(t, "alice's helper Pod with a "+what+" volume", "metallo-pods", msgVolumeKinds, createPod(s.viaRuntime(t, s.alice), s.namespace, p))
	}
}

// Labelling a Job or Pod with another member's Attempt does not unlock that Attempt's claim or
// credential: with alice's claim and credential in place, bob's own token cannot create a Job or
// helper Pod labelled with her Attempt (and himself as member) that mounts them — nor anything
// else: a member's own token creates nothing in a Site project namespace. Only the Runtime creates
// as a member, with the identity labels of the Attempt it was commanded to start, for the member
// bound to it. Neither does acting as bob through impersonation without the Runtime's user extra
// (the Runtime's own token, or the administrator's) unlock them. The rule reads nothing but the
// request: no lookup of alice's claim or credential.
func TestAnotherMembersAttemptLabelDoesNotUnlockItsClaimOrCredential(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	alices := s.attempt(s.alice)
	prepared(t, s, alices)
	// bob's objects labelled with alice's Attempt
	labelled := alices
	labelled.member = s.bob
	rt := s.runtimeConfig(t)
	for what, cs := range map[string]kubernetes.Interface{
		"bob's own token": s.asMember(t, s.bob),
		"the Runtime's token impersonating bob without its user extra":         s.asMemberWithout(rt, s.bob),
		"the administrator impersonating bob without the Runtime's user extra": s.asMemberWithout(s.e.Config, s.bob),
	} {
		refused(t, "bob's Job labelled with alice's Attempt mounting its claim and credential, with "+what, "metallo-member-creates", msgThroughRuntime,
			createJob(cs, s.namespace, labelled.job("1")))
		refused(t, "bob's helper Pod labelled with alice's Attempt mounting its claim and credential, with "+what, "metallo-member-creates", msgThroughRuntime,
			createPod(cs, s.namespace, labelled.helper()))
	}
}

// A member's own token creates nothing in a Site project namespace, not even what the Runtime
// would create for it: alice's own Job, workspace claim, credential and helper Pod of her own
// Attempt, each accepted through the Runtime, are refused with her token. The token is the one
// Kubernetes mounts into her Pods; creates with it would skip the Runtime's checks of her binding
// and current permission (docs/site-runtime.md#access-before-every-native-start).
func TestMembersOwnTokenCreatesNothingInASiteProjectNamespace(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	own := s.asMember(t, s.alice)
	a := s.attempt(s.alice)
	for what, req := range map[string]request{
		"Job":             createJob(own, s.namespace, a.job("1")),
		"workspace claim": createClaim(own, s.namespace, a.claim()),
		"credential":      createSecret(own, s.namespace, a.credential()),
		"helper Pod":      createPod(own, s.namespace, a.helper()),
	} {
		refused(t, "alice's own "+what+" with her own token", "metallo-member-creates", msgThroughRuntime, req)
	}
	// The same objects through the Runtime are accepted (dry runs: nothing persists).
	rt := s.viaRuntime(t, s.alice)
	for what, req := range map[string]request{
		"workspace claim": createClaim(rt, s.namespace, a.claim()),
		"credential":      createSecret(rt, s.namespace, a.credential()),
		"helper Pod":      createPod(rt, s.namespace, a.helper()),
		"Job":             createJob(rt, s.namespace, a.job("1")),
	} {
		acceptedDryRun(t, "alice's "+what+" through the Runtime", req)
	}
}

// A member creates only its own Attempt's workspace claim and credential: one labelled for
// another member, named for another Attempt, claiming another Project, cloned from or bound to
// another volume, or a Secret of another type than Opaque (a service-account token Secret for
// alice's account above all) is refused; and nobody but the labelled member creates a claim
// named for an Attempt, not even the administrator.
func TestWorkspaceClaimOrCredentialNamedForAnotherMemberIsRefused(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	asBob := s.viaRuntime(t, s.bob)
	alice := s.attempt(s.alice)
	bob := s.attempt(s.bob)

	refused(t, "bob creating alice's workspace claim", "metallo-workspace-claims", msgClaimCreator, createClaim(asBob, s.namespace, alice.claim()))
	refused(t, "bob creating alice's credential", "metallo-credentials", msgCredentialCreator, createSecret(asBob, s.namespace, alice.credential()))
	refused(t, "the administrator creating alice's workspace claim", "metallo-workspace-claims", msgClaimCreator, createClaim(s.e.Client, s.namespace, alice.claim()))

	misnamed := bob.claim()
	misnamed.Name = alice.claimName()
	refused(t, "bob's claim named for alice's Attempt", "metallo-workspace-claims", msgClaimName, createClaim(asBob, s.namespace, misnamed))
	misnamed.Name = "scratch"
	refused(t, "bob's claim not named for an Attempt", "metallo-workspace-claims", msgClaimName, createClaim(asBob, s.namespace, misnamed))
	misnamedSecret := bob.credential()
	misnamedSecret.Name = alice.secretName()
	refused(t, "bob's credential named for alice's Attempt", "metallo-credentials", msgCredentialName, createSecret(asBob, s.namespace, misnamedSecret))

	otherProject := bob
	otherProject.project = uuid.NewString()
	refused(t, "bob's claim for another Project", "metallo-workspace-claims", msgProject, createClaim(asBob, s.namespace, otherProject.claim()))
	refused(t, "bob's credential for another Project", "metallo-credentials", msgProject, createSecret(asBob, s.namespace, otherProject.credential()))

	clone := bob.claim()
	clone.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: alice.claimName()}
	refused(t, "bob's claim cloning alice's", "metallo-workspace-claims", msgFreshClaim, createClaim(asBob, s.namespace, clone))
	bound := bob.claim()
	bound.Spec.VolumeName = "pvc-" + uuid.NewString()
	refused(t, "bob's claim binding an existing volume", "metallo-workspace-claims", msgFreshClaim, createClaim(asBob, s.namespace, bound))

	token := bob.credential()
	token.Type = corev1.SecretTypeServiceAccountToken
	token.Annotations[corev1.ServiceAccountNameKey] = "member-" + s.alice
	token.StringData = nil
	refused(t, "bob's service-account token Secret for alice's account", "metallo-credentials", msgOpaque, createSecret(asBob, s.namespace, token))
}

// The Runtime's deletes without the exact UID precondition are refused, for every kind it
// deletes (a propagation policy alone is not enough), and the objects stay.
func TestRuntimeDeleteWithoutExactUIDIsRefused(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	a := s.attempt(s.alice)
	startAttempt(t, s, a)
	rt := s.asRuntime(t)
	fg := metav1.DeletePropagationForeground
	for _, opts := range []metav1.DeleteOptions{{}, {PropagationPolicy: &fg}} {
		for kind, del := range map[string]func(context.Context, metav1.DeleteOptions) error{
			"Job": func(c context.Context, o metav1.DeleteOptions) error {
				return rt.BatchV1().Jobs(s.namespace).Delete(c, a.name(), o)
			},
			"claim": func(c context.Context, o metav1.DeleteOptions) error {
				return rt.CoreV1().PersistentVolumeClaims(s.namespace).Delete(c, a.claimName(), o)
			},
			"credential": func(c context.Context, o metav1.DeleteOptions) error {
				return rt.CoreV1().Secrets(s.namespace).Delete(c, a.secretName(), o)
			},
			"helper Pod": func(c context.Context, o metav1.DeleteOptions) error {
				return rt.CoreV1().Pods(s.namespace).Delete(c, a.helperName(), o)
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
	if _, err := s.e.Client.BatchV1().Jobs(s.namespace).Get(c, a.name(), metav1.GetOptions{}); err != nil {
		t.Fatalf("alice's Job must survive the refused deletes: %v", err)
	}
	if _, err := s.e.Client.CoreV1().PersistentVolumeClaims(s.namespace).Get(c, a.claimName(), metav1.GetOptions{}); err != nil {
		t.Fatalf("alice's claim must survive the refused deletes: %v", err)
	}
}

// Members never delete, patch or update what the Runtime created, and the Runtime never patches
// it: refused by RBAC (metallo-member grants create only), and by admission even when someone
// grants the verbs.
func TestRuntimeObjectsAreNeverDeletedByMembersNorChanged(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	a := s.attempt(s.alice)
	startAttempt(t, s, a)

	own := s.asMember(t, s.alice)
	c := ctx(t)
	if err := own.BatchV1().Jobs(s.namespace).Delete(c, a.name(), metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("alice deleting her Job with metallo-member alone: want 403 from RBAC, got %v", err)
	}

	verbs := []string{"update", "patch", "delete"}
	s.grant(t, s.memberUser(s.alice),
		rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs", "jobs/status"}, Verbs: verbs},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims", "secrets"}, Verbs: verbs})
	s.grant(t, runtimeUser, rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"patch"}})

	patch := []byte(`{"metadata":{"labels":{"execution.pharos.dev/member":"` + s.bob + `"}}}`)
	for what, req := range map[string]request{
		"alice patching her Job's labels": func(c context.Context, dryRun []string) error {
			_, err := own.BatchV1().Jobs(s.namespace).Patch(c, a.name(), types.MergePatchType, patch, metav1.PatchOptions{DryRun: dryRun})
			return err
		},
		"alice marking her Job's status Complete": func(c context.Context, dryRun []string) error {
			st := []byte(`{"status":{"succeeded":1}}`)
			_, err := own.BatchV1().Jobs(s.namespace).Patch(c, a.name(), types.MergePatchType, st, metav1.PatchOptions{DryRun: dryRun}, "status")
			return err
		},
		"alice patching her claim": func(c context.Context, dryRun []string) error {
			_, err := own.CoreV1().PersistentVolumeClaims(s.namespace).Patch(c, a.claimName(), types.MergePatchType, patch, metav1.PatchOptions{DryRun: dryRun})
			return err
		},
		"alice updating her credential": func(c context.Context, dryRun []string) error {
			sec, err := s.e.Client.CoreV1().Secrets(s.namespace).Get(c, a.secretName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			sec.Data["token"] = []byte("replaced")
			_, err = own.CoreV1().Secrets(s.namespace).Update(c, sec, metav1.UpdateOptions{DryRun: dryRun})
			return err
		},
		"the Runtime patching alice's Job": func(c context.Context, dryRun []string) error {
			_, err := s.asRuntime(t).BatchV1().Jobs(s.namespace).Patch(c, a.name(), types.MergePatchType, patch, metav1.PatchOptions{DryRun: dryRun})
			return err
		},
	} {
		refused(t, what, "metallo-runtime-objects", msgNoUpdate, req)
	}
	for what, req := range map[string]request{
		"alice deleting her Job": func(c context.Context, dryRun []string) error {
			j, err := s.e.Client.BatchV1().Jobs(s.namespace).Get(c, a.name(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			return own.BatchV1().Jobs(s.namespace).Delete(c, a.name(), exactDelete(j.UID, dryRun))
		},
		"alice deleting her claim": func(c context.Context, dryRun []string) error {
			return own.CoreV1().PersistentVolumeClaims(s.namespace).Delete(c, a.claimName(), metav1.DeleteOptions{DryRun: dryRun})
		},
		"alice deleting her credential": func(c context.Context, dryRun []string) error {
			return own.CoreV1().Secrets(s.namespace).Delete(c, a.secretName(), metav1.DeleteOptions{DryRun: dryRun})
		},
	} {
		refused(t, what, "metallo-runtime-objects", msgMemberDelete, req)
	}
}

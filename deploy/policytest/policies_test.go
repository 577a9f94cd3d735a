package policytest

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
)

// Every policy of deploy/cluster is type-checked by the API server without a warning (the
// warnings land in status.typeChecking), fails closed, and its binding denies only in namespaces
// labelled execution.pharos.dev/access-policy=pharos-site-runtime.
func TestPoliciesTypeCheckWithoutWarningsAndDenyOnlyInSiteProjectNamespaces(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	synced(t, e)
	c := ctx(t)
	scope := &metav1.LabelSelector{MatchLabels: map[string]string{labelAccessPolicy: accessPolicy}}
	var policies, bindings []string
	for _, o := range build(t, repo("deploy", "cluster")) {
		switch o.GetKind() {
		case "ValidatingAdmissionPolicy":
			policies = append(policies, o.GetName())
		case "ValidatingAdmissionPolicyBinding":
			bindings = append(bindings, o.GetName())
		}
	}
	if len(policies) == 0 || !slices.Equal(policies, bindings) {
		t.Fatalf("want one binding per policy, named like it: policies %v, bindings %v", policies, bindings)
	}
	for _, name := range policies {
		p := waitTypeChecked(t, e, name)
		if w := p.Status.TypeChecking.ExpressionWarnings; len(w) > 0 {
			t.Errorf("policy %s: type-check warnings: %+v", name, w)
		}
		if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionregistrationv1.Fail {
			t.Errorf("policy %s: want failurePolicy Fail, got %v", name, p.Spec.FailurePolicy)
		}
		if !reflect.DeepEqual(p.Spec.MatchConstraints.NamespaceSelector, scope) {
			t.Errorf("policy %s: namespaceSelector %+v, want %+v", name, p.Spec.MatchConstraints.NamespaceSelector, scope)
		}
		if len(p.Spec.Validations) == 0 {
			t.Errorf("policy %s validates nothing", name)
		}
		for i, v := range p.Spec.Validations {
			if v.Message == "" || v.Reason == nil || *v.Reason != metav1.StatusReasonForbidden {
				t.Errorf("policy %s validation %d: want a message and reason Forbidden, got %q %v", name, i, v.Message, v.Reason)
			}
		}
		b, err := e.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(c, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("binding %s: %v", name, err)
		}
		if b.Spec.PolicyName != name || !slices.Equal(b.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
			t.Errorf("binding %s: policy %q actions %v, want %s [Deny]", name, b.Spec.PolicyName, b.Spec.ValidationActions, name)
		}
		if b.Spec.MatchResources == nil || !reflect.DeepEqual(b.Spec.MatchResources.NamespaceSelector, scope) {
			t.Errorf("binding %s: namespaceSelector %+v, want %+v", name, b.Spec.MatchResources, scope)
		}
	}
}

// Admission in a Site project namespace costs the same however many Attempts' claims, Secrets,
// Jobs and Pods the namespace keeps: no policy of deploy/cluster takes parameters by a selector (a
// binding's paramRef selector makes the API server evaluate its policy once per matching object);
// metallo-workspace-helpers reads one ConfigMap by name in the request's namespace (the Site's
// platform image), the others only the request and its namespace. The cluster holds no other policy of deploy/cluster
// either: retired ones (the per-claim owner policies) were removed when the tests applied it.
func TestPoliciesReadOnlyTheRequestSoAdmissionCostDoesNotGrowWithTheNamespace(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	synced(t, e)
	c := ctx(t)
	var built []string
	for _, o := range build(t, repo("deploy", "cluster")) {
		if o.GetKind() == "ValidatingAdmissionPolicy" {
			built = append(built, o.GetName())
		}
	}
	policies, err := e.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(c, metav1.ListOptions{LabelSelector: siteClusterSelector})
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, p := range policies.Items {
		live = append(live, p.Name)
		if k := p.Spec.ParamKind; k != nil && (k.APIVersion != "v1" || k.Kind != "ConfigMap") {
			t.Errorf("policy %s takes parameters of kind %+v", p.Name, p.Spec.ParamKind)
		}
	}
	bindings, err := e.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().List(c, metav1.ListOptions{LabelSelector: siteClusterSelector})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bindings.Items {
		// One parameter by name, in the request's namespace, is one lookup whatever the
		// namespace holds; a selector would evaluate the policy once per matching object.
		if r := b.Spec.ParamRef; r != nil && (r.Name == "" || r.Selector != nil || r.Namespace != "") {
			t.Errorf("binding %s has a paramRef %+v other than one ConfigMap by name in the request's namespace", b.Name, b.Spec.ParamRef)
		}
	}
	slices.Sort(built)
	slices.Sort(live)
	if !slices.Equal(built, live) {
		t.Errorf("the cluster holds the policies %v of deploy/cluster; the working tree builds %v", live, built)
	}
}

// The type check of the previous test can fail: an expression naming a field Jobs do not have is
// reported in the status of a throwaway policy (deleted at the end, never bound).
func TestTypeCheckReportsAnUnknownField(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	c := ctx(t)
	fail := admissionregistrationv1.Fail
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "kubetest-" + e.Namespace},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.spec.template.spec.serviceAcountName == 'x'"}},
		},
	}
	if _, err := e.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(c, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), p.Name, metav1.DeleteOptions{})
	})
	got := waitTypeChecked(t, e, p.Name)
	if w := got.Status.TypeChecking.ExpressionWarnings; len(w) != 1 || !strings.Contains(w[0].Warning, "serviceAcountName") {
		t.Fatalf("want one warning naming serviceAcountName, got %+v", w)
	}
}

// Outside Site project namespaces the policies refuse nothing: a bare Pod without any identity,
// a Job and a Deployment of no member and a NodePort Service are created there (the plain test namespace has no access-policy
// label), then deleted without any precondition.
func TestPoliciesLeaveOtherNamespacesAlone(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	synced(t, e)
	s := &site{e: e, namespace: e.Namespace}
	a := attempt{id: "not-a-uuid", member: "nobody"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/any:1"}},
	}}
	accepted(t, "a bare Pod as the administrator", createPod(e.Client, s.namespace, pod))
	job := a.job("1")
	job.Labels, job.Spec.Template.Labels = nil, nil
	accepted(t, "a Job without identity as the administrator", createJob(e.Client, s.namespace, job))
	d := a.deployment()
	d.Labels, d.Spec.Template.Labels = nil, map[string]string{"app": "web"}
	d.Spec.Selector.MatchLabels = map[string]string{"app": "web"}
	accepted(t, "a Deployment without identity as the administrator", createDeployment(e.Client, s.namespace, d))
	svc := a.service()
	svc.Labels, svc.Spec.Type, svc.Spec.Selector = nil, corev1.ServiceTypeNodePort, map[string]string{"app": "web"}
	accepted(t, "a NodePort Service as the administrator", createService(e.Client, s.namespace, svc))
	accepted(t, "a delete without precondition", func(c context.Context, dryRun []string) error {
		return e.Client.CoreV1().Pods(s.namespace).Delete(c, "bare", metav1.DeleteOptions{DryRun: dryRun})
	})
}

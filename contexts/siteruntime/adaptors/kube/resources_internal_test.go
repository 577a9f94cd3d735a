package kube

import (
	"context"
	"errors"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// The resource table serves every family: the kinds the Runtime creates
// and deletes, and the ReplicaSets it only reads.
func TestTheResourceTableKnowsEveryFamilysKindsAndReplicaSetsOnlyForReading(t *testing.T) {
	for kind, want := range map[string]string{
		domain.KindJob:        "batch/v1/jobs",
		domain.KindWorkspace:  "/v1/persistentvolumeclaims",
		domain.KindDeployment: "apps/v1/deployments",
		domain.KindService:    "/v1/services",
	} {
		gvr, ok := resourceOf(kind)
		if got := gvr.Group + "/" + gvr.Version + "/" + gvr.Resource; !ok || got != want {
			t.Errorf("%s: %s %v, want %s managed", kind, got, ok, want)
		}
	}
	if gvr, ok := readableOf(domain.KindReplicaSet); !ok || gvr.Group != "apps" || gvr.Version != "v1" || gvr.Resource != "replicasets" {
		t.Errorf("ReplicaSet: %v %v, want apps/v1 replicasets readable", gvr, ok)
	}
	if _, ok := resourceOf(domain.KindReplicaSet); ok {
		t.Error("the Runtime must not create or delete ReplicaSets (the Deployment controller owns them)")
	}
	// Refused before any request: no client is needed.
	w := &Workloads{}
	rs := application.NativeObject{Kind: domain.KindReplicaSet, Namespace: "ns", Name: "attempt-x", Spec: []byte(`{}`)}
	if _, err := w.Create(context.Background(), domain.StartIdentity{Namespace: "ns"}, rs); !errors.Is(err, application.ErrNativeRequestDenied) {
		t.Errorf("create of a ReplicaSet: %v, want ErrNativeRequestDenied", err)
	}
	if _, err := w.Delete(context.Background(), siteprotocol.NativeRef{Kind: domain.KindReplicaSet, Namespace: "ns", Name: "attempt-x", UID: "u"}); err == nil {
		t.Error("delete of a ReplicaSet must be refused")
	}
}

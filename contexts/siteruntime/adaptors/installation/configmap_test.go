package installation_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/installation"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
)

// The ConfigMap record against a real API server (the local cluster): an absent record reads
// as nil; Create writes it and Read returns it as written; a second Create, with any content, is
// application.ErrRecordExists and the first record is kept unchanged; the API server itself
// refuses to change the record's data (the ConfigMap is immutable). The Runtime's own RBAC for it
// is proven in deploy/policytest.
func TestConfigMapRecordIsCreatedOnceAndAnExistingRecordIsKept(t *testing.T) {
	e := kubetest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cm := installation.NewConfigMap(e.Client, e.Namespace, "runtime-installation")
	if got, err := cm.Read(ctx); err != nil || got != nil {
		t.Fatalf("absent record: %v %v", got, err)
	}
	if err := cm.Create(ctx, rec); err != nil {
		t.Fatalf("create: %v", err)
	}
	got, err := cm.Read(ctx)
	if err != nil || got == nil || !reflect.DeepEqual(*got, rec) {
		t.Fatalf("read back %+v %v, want %+v", got, err, rec)
	}
	first, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(ctx, "runtime-installation", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	other := rec
	other.InstallationID = "22222222-2222-4222-8222-222222222222"
	other.Environment = "beta-k8s"
	if err := cm.Create(ctx, other); !errors.Is(err, application.ErrRecordExists) {
		t.Fatalf("second create: want ErrRecordExists, got %v", err)
	}
	kept, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(ctx, "runtime-installation", metav1.GetOptions{})
	if err != nil || kept.ResourceVersion != first.ResourceVersion || !reflect.DeepEqual(kept.Data, first.Data) {
		t.Fatalf("the existing record must be kept unchanged: %+v (err %v)", kept, err)
	}
	if got, err := cm.Read(ctx); err != nil || !reflect.DeepEqual(*got, rec) {
		t.Fatalf("read after the refused create: %+v %v", got, err)
	}

	kept.Data[installation.KeyEnvironment] = "beta-k8s"
	if _, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Update(ctx, kept, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("changing the record's data: want 422 from the immutable ConfigMap, got %v", err)
	}
}

// A ConfigMap of the record's name that is no installation record is read as an error naming
// the missing key, never as "no record" (which would let the hook initialise over it).
func TestConfigMapThatIsNoRecordIsAnErrorNotAbsence(t *testing.T) {
	e := kubetest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "runtime-installation"}, Data: map[string]string{"something": "else"}}
	if _, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := installation.NewConfigMap(e.Client, e.Namespace, "runtime-installation")
	got, err := cm.Read(ctx)
	if err == nil || got != nil || !strings.Contains(err.Error(), installation.KeyInstallationID) {
		t.Fatalf("want an error naming %s, got %+v %v", installation.KeyInstallationID, got, err)
	}
	if err := cm.Create(ctx, rec); !errors.Is(err, application.ErrRecordExists) {
		t.Fatalf("create over a foreign ConfigMap: want ErrRecordExists, got %v", err)
	}
}

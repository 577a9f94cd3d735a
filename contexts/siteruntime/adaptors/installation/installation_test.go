package installation_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/installation"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

var rec = domain.Installation{
	InstallationID: "11111111-1111-4111-8111-111111111111", Environment: "alpha-k8s", Authority: "https://site.example",
	InstalledAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), Journals: domain.JournalFiles(),
}

func TestFileRecordIsCreatedOnceAndAnExistingRecordIsKept(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "records", "installation.json")
	f := installation.NewFile(path)
	if got, err := f.Read(ctx); err != nil || got != nil {
		t.Fatalf("absent record: %v %v", got, err)
	}
	if err := f.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	other := rec
	other.InstallationID = "22222222-2222-4222-8222-222222222222"
	if err := f.Create(ctx, other); !errors.Is(err, application.ErrRecordExists) {
		t.Fatalf("second create: %v", err)
	}
	got, err := f.Read(ctx)
	if err != nil || !reflect.DeepEqual(*got, rec) {
		t.Fatalf("read %+v %v", got, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %d entries", len(entries))
	}
}

// The ConfigMap adaptor's calls against a real API server are tested with
// the local cluster; here its rendering and parsing are.
func TestConfigMapRecordRoundTripsAndRefusesIncompleteData(t *testing.T) {
	cm := installation.ToConfigMap("metallo-runtime", "metallo-installation", rec)
	if cm.Immutable == nil || !*cm.Immutable || cm.Namespace != "metallo-runtime" {
		t.Fatalf("configmap %+v", cm)
	}
	got, err := installation.FromConfigMap(cm)
	if err != nil || !reflect.DeepEqual(got, rec) {
		t.Fatalf("round trip %+v %v", got, err)
	}
	delete(cm.Data, installation.KeyInstallationID)
	if _, err := installation.FromConfigMap(cm); err == nil {
		t.Fatal("a ConfigMap without installation_id was read as a record")
	}
}

func TestInstallationRecordLocations(t *testing.T) {
	for spec, want := range map[string]installation.Location{
		"configmap:metallo-runtime/metallo-installation": {Kind: installation.KindConfigMap, Namespace: "metallo-runtime", Name: "metallo-installation"},
		"file:/var/lib/metallo/installation.json":        {Kind: installation.KindFile, Path: "/var/lib/metallo/installation.json"},
	} {
		got, err := installation.ParseLocation(spec)
		if err != nil || got != want || got.String() != spec {
			t.Errorf("%s: %+v %v", spec, got, err)
		}
	}
	for _, bad := range []string{"", "configmap:", "configmap:ns", "configmap:Bad/x", "file:", "secret:ns/x", "/path"} {
		if _, err := installation.ParseLocation(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

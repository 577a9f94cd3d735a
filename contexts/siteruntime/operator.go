package siteruntime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"k8s.io/client-go/kubernetes"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/installation"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/clock"
)

// NewInstallationRecord returns the record adaptor for the
// --installation-record value spec: a file, or a ConfigMap read and
// written with the client built from kubeconfig (in-cluster when empty).
func NewInstallationRecord(spec, kubeconfig string) (application.InstallationRecord, error) {
	loc, err := installation.ParseLocation(spec)
	if err != nil {
		return nil, err
	}
	if loc.Kind == installation.KindFile {
		return installation.NewFile(loc.Path), nil
	}
	rc, err := installation.RestConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return installation.NewConfigMap(client, loc.Namespace, loc.Name), nil
}

// Install runs the installation hook (`metallo runtime install`): under
// the journal directory's lock, the one-time decision of
// application.Installer with a fresh UUID as the installation ID.
func Install(ctx context.Context, journalDir, environment, authority string, record application.InstallationRecord, clk clock.Clock) (domain.InstallAction, domain.Installation, error) {
	set, err := journal.OpenSet(journalDir)
	if err != nil {
		return "", domain.Installation{}, err
	}
	defer set.Close()
	return application.NewInstaller(set, record, clk, uuid.NewString).Install(ctx, environment, authority)
}

// Check runs `metallo runtime check` for the installation recorded in
// record: the stream state and one read-only pull (wait=0), retrying
// connection failures for up to retryFor.
func Check(ctx context.Context, c Config, record application.InstallationRecord, retryFor time.Duration) (application.CheckReport, error) {
	rec, err := record.Read(ctx)
	if err != nil {
		return application.CheckReport{}, fmt.Errorf("read %s: %w", record.Describe(), err)
	}
	if rec == nil {
		return application.CheckReport{}, errors.New(record.Describe() + " does not exist: run `metallo runtime install` first")
	}
	site, err := NewSiteClient(c, rec.InstallationID)
	if err != nil {
		return application.CheckReport{}, err
	}
	return application.NewChecker(site, c.Environment, c.Authority, retryFor, clock.System{}).Check(ctx)
}

package siteruntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"k8s.io/client-go/kubernetes"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/installation"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/kube/kubeconfig"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// NewInstallationRecord returns the record adaptor for the
// --installation-record value spec: a file, or a ConfigMap read and
// written with the client built from the kubeconfig file at kubeconfigPath
// (in-cluster when empty).
func NewInstallationRecord(spec, kubeconfigPath string) (application.InstallationRecord, error) {
	loc, err := installation.ParseLocation(spec)
	if err != nil {
		return nil, err
	}
	if loc.Kind == installation.KindFile {
		return installation.NewFile(loc.Path), nil
	}
	rc, err := kubeconfig.Load(kubeconfigPath)
	if err != nil {
		return nil, fmt.Errorf("%w (outside a cluster give --kubeconfig)", err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return installation.NewConfigMap(client, loc.Namespace, loc.Name), nil
}

// OpenJournal opens the configured journal set of the installation rec
// (from ReadInstallation): it takes the directory lock, verifies every file
// read-only and refuses to start (naming the file and row) on any damage,
// and when the journals' binding is not --environment/--authority or their
// installation is not rec's (journal.ErrBindingMismatch) — all before
// anything is opened for writing (docs/site-runtime.md#what-refuses-to-start:
// the binding is checked on every start). It never creates a journal.
func OpenJournal(ctx context.Context, c Config, rec domain.Installation) (*journal.Journal, error) {
	return journal.Open(ctx, c.JournalDir, journal.Options{Expect: &domain.Binding{
		Environment: c.Environment, Authority: c.Authority, InstallationID: rec.InstallationID}})
}

// StopAtOpen is the stop a journal set that refuses to open means
// (docs/site-runtime.md#stop-conditions): journal-integrity for damage
// (application.ErrJournalIntegrity), binding-mismatch for a binding other
// than the configuration's (journal.ErrBindingMismatch); false for any
// other failure (a lock held by another Runtime, a missing journal), which
// is no stop of this installation's worker.
func StopAtOpen(err error) (domain.StopReason, bool) {
	switch {
	case errors.Is(err, application.ErrJournalIntegrity):
		return domain.StopJournalIntegrity, true
	case errors.Is(err, journal.ErrBindingMismatch):
		return domain.StopBindingMismatch, true
	}
	return "", false
}

// ReportStopAtOpen sends, once and within application.StopReportTimeout,
// the stop report of a journal set that refused to open with openErr
// (StopAtOpen) for installation rec, before the process exits
// (docs/site-protocol.md#the-stop-report). The sequence is 0: the journal
// could not say. It returns the reason and the report's error; ok is false
// when openErr is no stop (nothing is sent).
func ReportStopAtOpen(ctx context.Context, c Config, rec domain.Installation, openErr error) (reason domain.StopReason, ok bool, err error) {
	reason, ok = StopAtOpen(openErr)
	if !ok {
		return "", false, nil
	}
	client, err := NewSiteClient(c, rec.InstallationID)
	if err != nil {
		return reason, true, err
	}
	ctx, cancel := context.WithTimeout(ctx, application.StopReportTimeout)
	defer cancel()
	return reason, true, client.ReportStop(ctx, siteprotocol.StopReport{Reason: reason, Message: siteprotocol.StopMessage("the journal set refused to open: " + openErr.Error())})
}

// ReadInstallation reads the record of --installation-record and checks it
// against --environment and --authority. It fails, naming the flag, when
// the record cannot be read, does not exist (`metallo runtime install`
// has not run) or names another environment or authority.
func ReadInstallation(ctx context.Context, c Config) (domain.Installation, error) {
	record, err := NewInstallationRecord(c.InstallationRecord, c.Kubeconfig)
	if err != nil {
		return domain.Installation{}, config.Invalid("installation-record", c.InstallationRecord, err)
	}
	return readInstallation(ctx, c, record)
}

func readInstallation(ctx context.Context, c Config, record application.InstallationRecord) (domain.Installation, error) {
	rec, err := record.Read(ctx)
	if err != nil {
		return domain.Installation{}, config.Invalid("installation-record", c.InstallationRecord, fmt.Errorf("read %s: %w", record.Describe(), err))
	}
	if rec == nil {
		return domain.Installation{}, config.Invalid("installation-record", c.InstallationRecord,
			fmt.Errorf("%s does not exist: run `metallo runtime install` first", record.Describe()))
	}
	if rec.Environment != c.Environment || strings.TrimRight(rec.Authority, "/") != strings.TrimRight(c.Authority, "/") {
		return domain.Installation{}, config.Invalid("installation-record", c.InstallationRecord,
			fmt.Errorf("%w: %s records installation %s for environment %q at %s; configured is environment %q at %s (--environment, --authority)",
				application.ErrInstallationMismatch, record.Describe(), rec.InstallationID, rec.Environment, rec.Authority, c.Environment, c.Authority))
	}
	return *rec, nil
}

// Install runs the installation hook (`metallo runtime install`): under
// the journal directory's lock, the one-time decision of
// application.Installer with a fresh UUID as the installation ID. fp arms
// the install failpoints (nil: none). A failed install removes the journal
// directory (and the parents) it created, when they are still empty.
// upgraded lists the journal upgrades it made, e.g. "jobs.sqlite 1→2"
// (docs/site-runtime.md#schema-versions-and-upgrades).
func Install(ctx context.Context, journalDir, environment, authority string, record application.InstallationRecord, clk clock.Clock, fp application.Failpoints) (_ domain.InstallAction, _ domain.Installation, upgraded []string, _ error) {
	created := missingDirs(journalDir)
	set, err := journal.OpenSet(journalDir)
	if err != nil {
		removeEmpty(created)
		return "", domain.Installation{}, nil, err
	}
	set.SetFailpoints(fp)
	installer := application.NewInstaller(set, record, clk, uuid.NewString)
	action, inst, err := installer.Install(ctx, environment, authority)
	upgraded = installer.Upgraded()
	if err == nil && action == domain.InstallRecordExisting {
		// A complete set may come from an install killed before it removed
		// its staging directory.
		err = set.RemoveLeftovers()
	}
	if cerr := set.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		removeEmpty(created)
	}
	return action, inst, upgraded, err
}

// missingDirs lists dir and its ancestors that do not exist, innermost
// first.
func missingDirs(dir string) []string {
	var out []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); !errors.Is(err, os.ErrNotExist) {
			return out
		}
		out = append(out, d)
		if filepath.Dir(d) == d {
			return out
		}
	}
}

// removeEmpty removes each directory of dirs, innermost first, while it is
// empty (os.Remove never removes a directory with entries).
func removeEmpty(dirs []string) {
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			return // not empty: keep it and its parents
		}
	}
}

// Check runs `metallo runtime check` for the installation recorded in
// record: the stream state and one read-only pull (wait=0), retrying
// connection failures for up to retryFor. It fails first, naming
// --installation-record, when the record is missing or names another
// environment or authority than the flags (as install does).
func Check(ctx context.Context, c Config, record application.InstallationRecord, retryFor time.Duration) (application.CheckReport, error) {
	rec, err := readInstallation(ctx, c, record)
	if err != nil {
		return application.CheckReport{}, err
	}
	site, err := NewSiteClient(c, rec.InstallationID)
	if err != nil {
		return application.CheckReport{}, err
	}
	return application.NewChecker(site, c.Environment, c.Authority, retryFor, clock.System{}).ForBackend(c.backend()).Check(ctx)
}

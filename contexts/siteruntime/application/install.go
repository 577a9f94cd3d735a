package application

import (
	"context"
	"errors"
	"fmt"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// Installer is `metallo runtime install`, the installation hook: the
// one-time decision of domain.DecideInstallation, carried out against the
// journal directory and the installation record.
type Installer struct {
	journals JournalSet
	record   InstallationRecord
	clock    Clock
	newID    func() string
	upgraded []string
}

// NewInstaller returns an installer; newID generates installation IDs
// (UUIDs).
func NewInstaller(journals JournalSet, record InstallationRecord, clock Clock, newID func() string) *Installer {
	return &Installer{journals: journals, record: record, clock: clock, newID: newID}
}

// ErrInstallationMismatch is returned when the journals, the record and the
// configuration disagree about the binding or the installation.
var ErrInstallationMismatch = errors.New("installation mismatch")

// Install runs the hook for the configured environment and authority and
// returns what it did and the installation now recorded. It initialises
// the journals only when neither journals nor a record exist (or, with no
// record, when the present journals are exactly the fresh files of an
// interrupted initialisation: JournalSet.DiscardUnfinished); records
// complete journals that predate the record as they are; verifies an
// existing record against the journals; and fails (changing nothing) when
// the record exists but journals are missing or partial, when journals are
// partial without a record, or when journals, record and configuration
// disagree. Complete journals of an earlier schema version are upgraded
// (JournalSet.Upgrade) once they, the record and the configuration agree;
// Upgraded says what was upgraded.
func (i *Installer) Install(ctx context.Context, environment, authority string) (domain.InstallAction, domain.Installation, error) {
	set, err := i.journals.Present(ctx)
	if err != nil {
		return "", domain.Installation{}, err
	}
	rec, err := i.record.Read(ctx)
	if err != nil {
		return "", domain.Installation{}, fmt.Errorf("read %s: %w", i.record.Describe(), err)
	}
	want := domain.Binding{Environment: environment, Authority: authority}
	action, err := domain.DecideInstallation(set, rec)
	if errors.Is(err, domain.ErrPartialJournals) {
		// No record: perhaps this hook's own interrupted initialisation.
		// Only fresh files without a command are discarded and redone.
		if _, derr := i.journals.DiscardUnfinished(ctx, want); derr != nil {
			return "", domain.Installation{}, fmt.Errorf("%s: %w; they are not an interrupted installation: %w", i.record.Describe(), err, derr)
		}
		action, err = domain.InstallRedoInterrupted, nil
	}
	if err != nil {
		return "", domain.Installation{}, fmt.Errorf("%s: %w", i.record.Describe(), err)
	}
	switch action {
	case domain.InstallInitialise, domain.InstallRedoInterrupted:
		want.InstallationID = i.newID()
		if err := i.journals.Initialise(ctx, want); err != nil {
			return "", domain.Installation{}, err
		}
		rec, err := i.create(ctx, want)
		return action, rec, err
	case domain.InstallRecordExisting:
		b, err := i.journals.Binding(ctx)
		if err != nil {
			return "", domain.Installation{}, err
		}
		if err := sameBinding(b, want, "the journals"); err != nil {
			return "", domain.Installation{}, err
		}
		if err := i.upgrade(ctx); err != nil {
			return "", domain.Installation{}, err
		}
		rec, err := i.create(ctx, b)
		return action, rec, err
	default:
		b, err := i.journals.Binding(ctx)
		if err != nil {
			return "", domain.Installation{}, err
		}
		if err := verifyRecord(*rec, b, want, i.record.Describe()); err != nil {
			return "", domain.Installation{}, err
		}
		return action, *rec, i.upgrade(ctx)
	}
}

// upgrade runs the journal set's upgrade (complete journals only) and
// keeps what it did for Upgraded.
func (i *Installer) upgrade(ctx context.Context) error {
	done, err := i.journals.Upgrade(ctx)
	i.upgraded = append(i.upgraded, done...)
	if err != nil {
		return fmt.Errorf("upgrade the journal set: %w", err)
	}
	return nil
}

// Upgraded returns the journal upgrades the last Install made, e.g.
// "jobs.sqlite 1→2"; none when the set was current or new.
func (i *Installer) Upgraded() []string { return i.upgraded }

// create records b; a record created meanwhile is kept and verified.
func (i *Installer) create(ctx context.Context, b domain.Binding) (domain.Installation, error) {
	rec := domain.Installation{
		InstallationID: b.InstallationID, Environment: b.Environment, Authority: b.Authority,
		InstalledAt: i.clock.Now().UTC(), Journals: domain.JournalFiles(),
	}
	err := i.record.Create(ctx, rec)
	if errors.Is(err, ErrRecordExists) {
		existing, rerr := i.record.Read(ctx)
		if rerr != nil {
			return domain.Installation{}, fmt.Errorf("read %s: %w", i.record.Describe(), rerr)
		}
		if existing == nil {
			return domain.Installation{}, fmt.Errorf("%s: %w", i.record.Describe(), err)
		}
		return *existing, verifyRecord(*existing, b, b, i.record.Describe())
	}
	if err != nil {
		return domain.Installation{}, fmt.Errorf("create %s: %w", i.record.Describe(), err)
	}
	return rec, nil
}

func verifyRecord(rec domain.Installation, journals, want domain.Binding, where string) error {
	if rec.InstallationID != journals.InstallationID {
		return fmt.Errorf("%w: %s records installation %s; the journals belong to installation %s", ErrInstallationMismatch, where, rec.InstallationID, journals.InstallationID)
	}
	if err := sameBinding(journals, want, "the journals"); err != nil {
		return err
	}
	return sameBinding(domain.Binding{Environment: rec.Environment, Authority: rec.Authority}, want, where)
}

func sameBinding(have, want domain.Binding, where string) error {
	if have.Environment != want.Environment || !sameAuthority(have.Authority, want.Authority) {
		return fmt.Errorf("%w: %s are bound to environment %q at %s; configured is environment %q at %s",
			ErrInstallationMismatch, where, have.Environment, have.Authority, want.Environment, want.Authority)
	}
	return nil
}

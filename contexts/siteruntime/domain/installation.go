package domain

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Journal file names, one directory (docs/site-runtime.md#files-and-schema).
const (
	DeliveryFile = "delivery.sqlite"
	JobsFile     = "jobs.sqlite"
	ServicesFile = "services.sqlite"
)

// JournalFiles lists the journal set in its fixed order.
func JournalFiles() []string { return []string{DeliveryFile, JobsFile, ServicesFile} }

// Installation is the installation record: kept outside the journals'
// volume, it says that this installation initialised the journal set. An
// existing record is never replaced.
type Installation struct {
	InstallationID string    `json:"installation_id"`
	Environment    string    `json:"environment"`
	Authority      string    `json:"authority"`
	InstalledAt    time.Time `json:"installed_at"`
	// Journals names the journal set's files.
	Journals []string `json:"journals"`
}

// JournalSet is which journal files exist in the directory.
type JournalSet struct {
	Present []string
}

// Empty reports whether no journal file exists.
func (s JournalSet) Empty() bool { return len(s.Present) == 0 }

// Missing lists the journal files that do not exist, in fixed order.
func (s JournalSet) Missing() []string {
	var out []string
	for _, f := range JournalFiles() {
		found := false
		for _, p := range s.Present {
			found = found || p == f
		}
		if !found {
			out = append(out, f)
		}
	}
	return out
}

// Complete reports whether every journal file exists.
func (s JournalSet) Complete() bool { return len(s.Missing()) == 0 }

// InstallAction is the one-time installation decision.
type InstallAction string

// Install actions.
const (
	// InstallInitialise: no journals and no record — initialise the
	// journals, then record them.
	InstallInitialise InstallAction = "initialise"
	// InstallRedoInterrupted: no record, and the present journals are
	// exactly what an interrupted initialisation left (fresh, no command):
	// they are discarded and the journals initialised, then recorded.
	InstallRedoInterrupted InstallAction = "redo-interrupted"
	// InstallRecordExisting: complete journals that predate the record are
	// recorded as they are.
	InstallRecordExisting InstallAction = "record-existing"
	// InstallVerified: the record and complete journals exist; nothing to do
	// beyond checking they agree.
	InstallVerified InstallAction = "verified"
)

// Errors of the installation decision.
var (
	// ErrJournalsMissing: the record exists but journals are missing or
	// partial; they must be restored together before the Runtime runs.
	ErrJournalsMissing = errors.New("journals missing after installation")
	// ErrPartialJournals: some journal files exist, no record does; the
	// hook never initialises or completes a partial set.
	ErrPartialJournals = errors.New("partial journal set")
)

// DecideInstallation is the installation hook's one-time decision
// (docs/site-runtime.md#installation):
// it initialises only a volume with no journals and no record; complete
// journals that predate the record are recorded as they are; once recorded,
// missing or partial journals stop the hook until restored together.
func DecideInstallation(set JournalSet, record *Installation) (InstallAction, error) {
	switch {
	case record != nil && set.Complete():
		return InstallVerified, nil
	case record != nil:
		return "", fmt.Errorf("%w: installation %s (installed %s) is recorded but %s missing; restore the journal set together",
			ErrJournalsMissing, record.InstallationID, record.InstalledAt.UTC().Format(time.RFC3339), strings.Join(set.Missing(), ", "))
	case set.Empty():
		return InstallInitialise, nil
	case set.Complete():
		return InstallRecordExisting, nil
	}
	return "", fmt.Errorf("%w: %s present but %s missing and no installation record; restore the journal set together",
		ErrPartialJournals, strings.Join(set.Present, ", "), strings.Join(set.Missing(), ", "))
}

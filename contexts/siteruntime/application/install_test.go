package application_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/clock"
)

type memJournals struct {
	present     []string
	binding     domain.Binding
	initialised int
	// unfinished: the present files are an interrupted initialisation's.
	unfinished bool
}

func (m *memJournals) DiscardUnfinished(context.Context, domain.Binding) ([]string, error) {
	if !m.unfinished {
		return nil, errors.New("delivery.sqlite has had commands")
	}
	gone := m.present
	m.present = nil
	return gone, nil
}

func (m *memJournals) Present(context.Context) (domain.JournalSet, error) {
	return domain.JournalSet{Present: m.present}, nil
}

func (m *memJournals) Initialise(_ context.Context, b domain.Binding) error {
	m.initialised++
	m.present, m.binding = domain.JournalFiles(), b
	return nil
}

func (m *memJournals) Binding(context.Context) (domain.Binding, error) { return m.binding, nil }

func (m *memJournals) Upgrade(context.Context) ([]string, error) { return nil, nil }

type memRecord struct{ rec *domain.Installation }

func (m *memRecord) Read(context.Context) (*domain.Installation, error) { return m.rec, nil }
func (m *memRecord) Create(_ context.Context, r domain.Installation) error {
	if m.rec != nil {
		return application.ErrRecordExists
	}
	m.rec = &r
	return nil
}
func (m *memRecord) Describe() string { return "test record" }

func TestInstallationIsDecidedOnceFromTheJournalsAndTheRecord(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	newID := func() string { return install }
	recorded := &domain.Installation{InstallationID: install, Environment: env, Authority: authority, Journals: domain.JournalFiles()}
	cases := []struct {
		name     string
		journals *memJournals
		record   *memRecord
		action   domain.InstallAction
		err      error
	}{
		{"an empty volume without a record is initialised and recorded", &memJournals{}, &memRecord{}, domain.InstallInitialise, nil},
		{"complete journals that predate the record are recorded as they are", &memJournals{present: domain.JournalFiles(), binding: binding()}, &memRecord{}, domain.InstallRecordExisting, nil},
		{"a recorded installation with its journals is verified", &memJournals{present: domain.JournalFiles(), binding: binding()}, &memRecord{rec: recorded}, domain.InstallVerified, nil},
		{"a recorded installation with a missing journal stops the hook", &memJournals{present: []string{domain.DeliveryFile, domain.ServicesFile}, binding: binding()}, &memRecord{rec: recorded}, "", domain.ErrJournalsMissing},
		{"a recorded installation with no journals stops the hook", &memJournals{}, &memRecord{rec: recorded}, "", domain.ErrJournalsMissing},
		{"partial journals with commands and without a record stop the hook", &memJournals{present: []string{domain.JobsFile}}, &memRecord{}, "", domain.ErrPartialJournals},
		{"an interrupted initialisation without a record is redone and recorded", &memJournals{present: []string{domain.JobsFile}, unfinished: true}, &memRecord{}, domain.InstallRedoInterrupted, nil},
		{"journals of another installation than recorded stop the hook", &memJournals{present: domain.JournalFiles(), binding: domain.Binding{Environment: env, Authority: authority, InstallationID: uuidN(5)}}, &memRecord{rec: recorded}, "", application.ErrInstallationMismatch},
		{"journals bound to another environment stop the hook", &memJournals{present: domain.JournalFiles(), binding: domain.Binding{Environment: "beta-k8s", Authority: authority, InstallationID: install}}, &memRecord{}, "", application.ErrInstallationMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := c.record.rec
			action, rec, err := application.NewInstaller(c.journals, c.record, clk, newID).Install(ctx, env, authority)
			if !errors.Is(err, c.err) || action != c.action {
				t.Fatalf("action %q err %v; want %q %v", action, err, c.action, c.err)
			}
			if c.err != nil {
				if c.journals.initialised != 0 || c.record.rec != before {
					t.Fatal("a refused installation changed the journals or the record")
				}
				return
			}
			if rec.InstallationID != install || c.record.rec == nil || c.record.rec.InstallationID != install {
				t.Fatalf("record %+v", c.record.rec)
			}
			if c.action == domain.InstallRedoInterrupted && c.journals.initialised != 1 {
				t.Fatal("an interrupted initialisation was not redone")
			}
			if want := 0; c.action != domain.InstallInitialise && c.action != domain.InstallRedoInterrupted && c.journals.initialised != want {
				t.Fatal("existing journals were initialised again")
			}
			if before != nil && c.record.rec != before {
				t.Fatal("an existing record was replaced")
			}
		})
	}
}

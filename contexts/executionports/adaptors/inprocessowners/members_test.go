package inprocessowners_test

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/inprocessowners"
	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/sqlitestore"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/storetest"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/telemetry"
	rpapp "github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
)

// owner is resource_provisioning's real service on a SQLite file, with
// Party PartyID a member of ProjectA with a verified site binding at
// alpha-k8s, allocation r1 reported, and close closing its database.
func owner(t *testing.T) (*rpapp.Service, func()) {
	t.Helper()
	ctx := t.Context()
	h := dbtest.Migrated(t, resourceprovisioning.Database(), database.SQLite)
	store, err := sqlitestore.New(h.DB, h.Target.Path)
	dbtest.Must(t, err)
	t.Cleanup(func() { _ = store.Close() })
	tel, err := telemetry.New(zaptest.NewLogger(t), prometheus.NewRegistry())
	dbtest.Must(t, err)
	svc, err := rpapp.NewService(store, clock.NewManual(storetest.T0.Add(time.Minute)), tel, rpapp.Config{WaldurInstance: storetest.Instance, Environments: rpapp.StaticSites(storetest.Environments)})
	dbtest.Must(t, err)
	for _, ev := range []domain.BetoEvent{
		storetest.SiteBindingEvent("e41f0a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b", storetest.PartyID, storetest.EnvK8s, "alice", domain.SiteBindingVerified, 1, 0),
		storetest.MembersEvent(storetest.ProjectA, 1, "pp1", storetest.PartyID, storetest.PartyB),
	} {
		_, err := svc.ReceiveBetoEvent(ctx, ev)
		dbtest.Must(t, err)
	}
	_, err = svc.SubmitReports(ctx, storetest.Site, []domain.Report{storetest.Report("r1", "pp1", 0)})
	dbtest.Must(t, err)
	return svc, func() { h.Close(); _ = store.Close() }
}

func TestMemberPortsReadTheOwnerInProcess(t *testing.T) {
	svc, brk := owner(t)
	o := inprocessowners.New(svc)
	ctx := t.Context()
	var nre *application.NoReadyAccountError
	if _, err := o.ReadyAccount(ctx, storetest.PartyID, storetest.ProjectA, storetest.Site); !errors.As(err, &nre) || nre.Reasons[0] != storetest.EnvK8s+": "+domain.ReasonAccountMissing {
		t.Fatalf("before the account report: %v", err)
	}
	binding := domain.BindingKey{PartyID: storetest.PartyID, ProjectID: storetest.ProjectA, Environment: storetest.EnvK8s}.ID()
	_, err := svc.SubmitAccounts(ctx, storetest.Site, domain.AccountReport{ProviderResourceID: "r1", ObservedAt: storetest.T0, Accounts: []domain.ReportedAccount{
		{PartyID: storetest.PartyID, Account: domain.AccountName(storetest.PartyID), UID: "uid-1", BindingID: binding, Generation: 1, State: domain.AccountReady},
	}})
	dbtest.Must(t, err)
	a, err := o.ReadyAccount(ctx, storetest.PartyID, storetest.ProjectA, storetest.Site)
	if err != nil || a.UID != "uid-1" || a.BindingID != binding || a.Generation != 1 || a.Namespace != "ns-r1" || a.Environment != storetest.EnvK8s || !a.Fresh {
		t.Fatalf("ready account %+v %v", a, err)
	}
	if _, err := o.ReadyAccount(ctx, storetest.PartyB, storetest.ProjectA, storetest.Site); !errors.As(err, &nre) || nre.Reasons[0] != application.ReasonNoBinding {
		t.Fatalf("a member without a site binding: %v", err)
	}
	d, err := o.DesiredBindings(ctx, storetest.EnvK8s)
	if err != nil || d.Site != storetest.Site || d.ChangesCursor != rpapp.FeedCursor(3) || len(d.Bindings) != 1 || len(d.Unbound) != 1 {
		t.Fatalf("desired bindings %+v %v", d, err)
	}
	if b := d.Bindings[0]; b.BindingID != binding || b.AccountUID != "uid-1" || b.Namespace != "ns-r1" || b.Retired || b.Revision != 2 {
		t.Fatalf("binding %+v", b)
	}
	if _, err := o.DesiredBindings(ctx, "gamma-k8s"); !errors.Is(err, application.ErrResourceLookupUnavailable) {
		t.Fatalf("an environment the owner does not know: %v", err)
	}
	brk()
	if _, err := o.ReadyAccount(ctx, storetest.PartyID, storetest.ProjectA, storetest.Site); !errors.Is(err, application.ErrResourceLookupUnavailable) || errors.Is(err, application.ErrNoReadyAccount) {
		t.Fatalf("owner's database closed: %v", err)
	}
	if _, err := o.DesiredBindings(ctx, storetest.EnvK8s); !errors.Is(err, application.ErrResourceLookupUnavailable) {
		t.Fatalf("owner's database closed: %v", err)
	}
}

package httpapi

import "github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"

// The intakes' bodies as the guard decodes and checks them (guardJSONBody:
// one 422 names every bad field, docs/resource-provisioning.md#bad-input),
// and their domain values.

// reportsBody is a fresh report batch body and the intake's check of it.
func (h *Handlers) reportsBody() (any, func() error) {
	var in submitReportsInput
	return &in.Body, func() error {
		if h.Service == nil {
			return nil
		}
		return h.Service.CheckReports(reportsOf(&in))
	}
}

// betoEventBody is a fresh Beto event body and the intake's check of it.
func (h *Handlers) betoEventBody() (any, func() error) {
	var in betoEventInput
	return &in.Body, func() error {
		if h.Service == nil {
			return nil
		}
		return h.Service.CheckBetoEvent(betoEventOf(&in))
	}
}

// accountsBody is a fresh account report body and the intake's check of it.
func (h *Handlers) accountsBody() (any, func() error) {
	var in submitAccountsInput
	return &in.Body, func() error {
		if h.Service == nil {
			return nil
		}
		return h.Service.CheckAccounts(accountReportOf(&in))
	}
}

// reportsOf converts the wire reports.
func reportsOf(in *submitReportsInput) []domain.Report {
	reports := make([]domain.Report, len(in.Body.Reports))
	for i, r := range in.Body.Reports {
		reports[i] = r.ToDomain()
	}
	return reports
}

// betoEventOf converts the wire event.
func betoEventOf(in *betoEventInput) domain.BetoEvent {
	b := in.Body
	ev := domain.BetoEvent{EventID: b.EventID, Type: b.Type, OccurredAt: b.OccurredAt}
	if p := b.Project; p != nil {
		ev.Project = &domain.ProjectChanged{ID: p.ID, Revision: p.Revision, State: p.State}
		for _, pb := range p.ProviderBindings {
			ev.Project.ProviderBindings = append(ev.Project.ProviderBindings, pb.toDomain())
		}
		for _, m := range p.Memberships {
			dm := domain.Membership{PartyID: m.PartyID, Role: m.Role}
			if m.ProviderBinding != nil {
				pb := m.ProviderBinding.toDomain()
				dm.ProviderBinding = &pb
			}
			ev.Project.Memberships = append(ev.Project.Memberships, dm)
		}
	}
	if pb := b.Binding; pb != nil {
		ev.Binding = &domain.PartyProviderBinding{
			ID: pb.ID, PartyID: pb.PartyID, Revision: pb.Revision, Provider: pb.Provider, Instance: pb.Instance,
			ExternalID: pb.ExternalID, State: pb.State, Generation: pb.Generation,
		}
	}
	return ev
}

// accountReportOf converts the wire account report.
func accountReportOf(in *submitAccountsInput) domain.AccountReport {
	r := domain.AccountReport{ProviderResourceID: in.Body.ProviderResourceID, ObservedAt: in.Body.ObservedAt}
	for _, b := range in.Body.Accounts {
		r.Accounts = append(r.Accounts, domain.ReportedAccount{PartyID: b.PartyID, Account: b.Account, UID: b.UID, BindingID: b.BindingID, Generation: b.Generation, State: b.State})
	}
	return r
}

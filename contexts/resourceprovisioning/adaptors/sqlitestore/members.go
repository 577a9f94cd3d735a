package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/internal/rows"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/sqlitestore/sqlitedb"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// Native member accounts and Runtime member bindings on SQLite
// (docs/resource-provisioning.md#native-member-accounts). Write transactions
// are serialised (BEGIN IMMEDIATE), so the row locks of PostgreSQL are plain
// reads here.

var (
	_ application.ReportTx  = reportTx{}
	_ application.EventTx   = eventTx{}
	_ application.AccountTx = accountTx{}
)

func bindingRow(r sqlitedb.MemberBinding) rows.Binding {
	return rows.Binding{
		ID: r.BindingID, PartyID: r.PartyID, ProjectID: r.ProjectID, Environment: r.Environment, Generation: r.Generation,
		State: r.State, Reasons: []byte(r.Reasons), SiteBindingID: r.SiteBindingID, SiteUsername: r.SiteUsername,
		SiteBindingGeneration: r.SiteBindingGeneration, AccountUID: r.AccountUid, Account: r.Account, AllocationID: r.AllocationID,
		Namespace: r.Namespace, Revision: r.Revision, ChangedAt: rows.FromMicros(r.ChangedAt),
	}
}

func partyBinding(r sqlitedb.PartyBinding) *domain.PartyProviderBinding {
	return &domain.PartyProviderBinding{
		ID: r.BindingID, PartyID: r.PartyID, Revision: r.Revision, Provider: r.Provider, Instance: r.Instance,
		ExternalID: r.ExternalID, State: r.State, Generation: r.Generation,
	}
}

// oneBinding decodes a single binding row; nil for no row.
func oneBinding(op string, r sqlitedb.MemberBinding, err error) (*domain.MemberBinding, error) {
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbErr(op, err)
	}
	b, err := bindingRow(r).ToDomain()
	if err != nil {
		return nil, err
	}
	return &b, nil
}

// onePartyBinding decodes a single party binding row; nil for no row.
func onePartyBinding(op string, r sqlitedb.PartyBinding, err error) (*domain.PartyProviderBinding, error) {
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbErr(op, err)
	}
	return partyBinding(r), nil
}

func (t reportTx) IsProjectMember(ctx context.Context, projectID, partyID string) (bool, error) {
	n, err := t.q.IsProjectMember(ctx, sqlitedb.IsProjectMemberParams{ProjectID: projectID, PartyID: partyID})
	return n != 0, dbErr("is project member", err)
}

func (t reportTx) CurrentSiteBinding(ctx context.Context, partyID, environment string) (*domain.PartyProviderBinding, error) {
	r, err := t.q.CurrentSiteBinding(ctx, sqlitedb.CurrentSiteBindingParams{PartyID: partyID, Provider: domain.ProviderSite, Instance: environment, State: domain.SiteBindingVerified})
	return onePartyBinding("current site binding", r, err)
}

func (t reportTx) BindingAccounts(ctx context.Context, bindingID string) ([]domain.BindingAccount, error) {
	rs, err := t.q.BindingAccounts(ctx, bindingID)
	if err != nil {
		return nil, dbErr("binding accounts", err)
	}
	out := make([]domain.BindingAccount, 0, len(rs))
	for _, r := range rs {
		out = append(out, domain.BindingAccount{
			AllocationID: r.AllocationID, UID: r.Uid, Generation: r.Generation, State: r.State,
			AllocationProjectID: r.ProjectID, NativeScope: r.NativeScope, AllocationLifecycle: r.Lifecycle,
		})
	}
	return out, nil
}

func (t reportTx) LockBinding(ctx context.Context, id string) (*domain.MemberBinding, error) {
	r, err := t.q.LockMemberBinding(ctx, id)
	return oneBinding("lock member binding", r, err)
}

func (t reportTx) InsertBinding(ctx context.Context, b domain.MemberBinding) (bool, error) {
	r := rows.BindingFromDomain(b)
	n, err := t.q.InsertMemberBinding(ctx, sqlitedb.InsertMemberBindingParams{
		BindingID: r.ID, PartyID: r.PartyID, ProjectID: r.ProjectID, Environment: r.Environment, Generation: r.Generation,
		State: r.State, Reasons: string(r.Reasons), SiteBindingID: r.SiteBindingID, SiteUsername: r.SiteUsername,
		SiteBindingGeneration: r.SiteBindingGeneration, AccountUid: r.AccountUID, Account: r.Account, AllocationID: r.AllocationID,
		Namespace: r.Namespace, Revision: r.Revision, ChangedAt: rows.Micros(r.ChangedAt),
	})
	return n == 1, dbErr("insert member binding", err)
}

func (t reportTx) UpdateBinding(ctx context.Context, b domain.MemberBinding) error {
	r := rows.BindingFromDomain(b)
	return dbErr("update member binding", t.q.UpdateMemberBinding(ctx, sqlitedb.UpdateMemberBindingParams{
		BindingID: r.ID, Generation: r.Generation, State: r.State, Reasons: string(r.Reasons), SiteBindingID: r.SiteBindingID,
		SiteUsername: r.SiteUsername, SiteBindingGeneration: r.SiteBindingGeneration, AccountUid: r.AccountUID, Account: r.Account,
		AllocationID: r.AllocationID, Namespace: r.Namespace, Revision: r.Revision, ChangedAt: rows.Micros(r.ChangedAt),
	}))
}

func (t reportTx) AppendBindingChanges(ctx context.Context, events []domain.MemberBindingChanged, recordedAt time.Time) error {
	out := make([]outgoing, 0, len(events))
	for _, ev := range events {
		out = append(out, outgoing{domain.MemberBindingChangedType, ev.BindingID, ev.Revision, ev.Payload()})
	}
	return t.appendOutbox(ctx, out, recordedAt)
}

func (t reportTx) AllocationAccountBindings(ctx context.Context, allocationID string) ([]string, error) {
	ids, err := t.q.AllocationAccountBindings(ctx, allocationID)
	return ids, dbErr("allocation account bindings", err)
}

func (t eventTx) ProjectMembers(ctx context.Context, projectID string) ([]application.Membership, error) {
	rs, err := t.q.ProjectMembers(ctx, projectID)
	if err != nil {
		return nil, dbErr("project members", err)
	}
	out := make([]application.Membership, 0, len(rs))
	for _, r := range rs {
		out = append(out, application.Membership{PartyID: r.PartyID, Role: r.Role})
	}
	return out, nil
}

func (t eventTx) DeleteMembership(ctx context.Context, projectID, partyID string) error {
	return dbErr("delete membership", t.q.DeleteProjectMembership(ctx, sqlitedb.DeleteProjectMembershipParams{ProjectID: projectID, PartyID: partyID}))
}

func (t eventTx) UpsertMembership(ctx context.Context, projectID string, m application.Membership) error {
	return dbErr("upsert membership", t.q.UpsertProjectMembership(ctx, sqlitedb.UpsertProjectMembershipParams{ProjectID: projectID, PartyID: m.PartyID, Role: m.Role}))
}

func (t eventTx) PartyProjects(ctx context.Context, partyID string) ([]string, error) {
	ids, err := t.q.PartyProjects(ctx, partyID)
	return ids, dbErr("party projects", err)
}

func (t eventTx) PartySiteEnvironments(ctx context.Context, partyID string) ([]string, error) {
	envs, err := t.q.PartySiteEnvironments(ctx, sqlitedb.PartySiteEnvironmentsParams{PartyID: partyID, Provider: domain.ProviderSite})
	return envs, dbErr("party site environments", err)
}

func (t eventTx) PartyBindingKeys(ctx context.Context, partyID string) ([]domain.BindingKey, error) {
	rs, err := t.q.PartyMemberBindingKeys(ctx, partyID)
	if err != nil {
		return nil, dbErr("party binding keys", err)
	}
	out := make([]domain.BindingKey, 0, len(rs))
	for _, r := range rs {
		out = append(out, domain.BindingKey{PartyID: partyID, ProjectID: r.ProjectID, Environment: r.Environment})
	}
	return out, nil
}

func (t eventTx) PartyBinding(ctx context.Context, bindingID string) (*domain.PartyProviderBinding, error) {
	r, err := t.q.PartyBinding(ctx, bindingID)
	return onePartyBinding("party binding", r, err)
}

// accountTx is one account report transaction.
type accountTx struct{ reportTx }

func (t accountTx) LockAccountSet(ctx context.Context, allocationID string) (*domain.AccountSet, error) {
	r, err := t.q.LockAccountSet(ctx, allocationID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbErr("lock account set", err)
	}
	return &domain.AccountSet{AllocationID: r.AllocationID, Revision: r.Revision, ContentDigest: r.ContentDigest, ObservedAt: rows.FromMicros(r.ObservedAt), LastSeenAt: rows.FromMicros(r.LastSeenAt)}, nil
}

func (t accountTx) InsertAccountSet(ctx context.Context, s domain.AccountSet) (bool, error) {
	n, err := t.q.InsertAccountSet(ctx, sqlitedb.InsertAccountSetParams{
		AllocationID: s.AllocationID, Revision: s.Revision, ContentDigest: s.ContentDigest, ObservedAt: rows.Micros(s.ObservedAt), LastSeenAt: rows.Micros(s.LastSeenAt),
	})
	return n == 1, dbErr("insert account set", err)
}

func (t accountTx) UpdateAccountSet(ctx context.Context, s domain.AccountSet) error {
	return dbErr("update account set", t.q.UpdateAccountSet(ctx, sqlitedb.UpdateAccountSetParams{
		AllocationID: s.AllocationID, Revision: s.Revision, ContentDigest: s.ContentDigest, ObservedAt: rows.Micros(s.ObservedAt), LastSeenAt: rows.Micros(s.LastSeenAt),
	}))
}

func (t accountTx) AllocationAccounts(ctx context.Context, allocationID string) ([]domain.NativeAccount, error) {
	return allocationAccounts(ctx, t.q, allocationID)
}

func (t accountTx) UpsertAccounts(ctx context.Context, accounts []domain.NativeAccount) error {
	for _, a := range accounts {
		if err := t.q.UpsertNativeAccount(ctx, sqlitedb.UpsertNativeAccountParams{
			AllocationID: a.AllocationID, PartyID: a.PartyID, Uid: a.UID, BindingID: a.BindingID, Generation: a.Generation,
			AccountName: a.Account, State: a.State, Since: rows.Micros(a.Since), ChangedAt: rows.Micros(a.ChangedAt),
		}); err != nil {
			return dbErr("upsert native account", err)
		}
	}
	return nil
}

func allocationAccounts(ctx context.Context, q *sqlitedb.Queries, allocationID string) ([]domain.NativeAccount, error) {
	rs, err := q.AllocationAccounts(ctx, allocationID)
	if err != nil {
		return nil, dbErr("allocation accounts", err)
	}
	out := make([]domain.NativeAccount, 0, len(rs))
	for _, r := range rs {
		out = append(out, domain.NativeAccount{
			AllocationID: r.AllocationID, PartyID: r.PartyID, UID: r.Uid, BindingID: r.BindingID, Generation: r.Generation,
			Account: r.AccountName, State: r.State, Since: rows.FromMicros(r.Since), ChangedAt: rows.FromMicros(r.ChangedAt),
		})
	}
	return out, nil
}

// NewestBindingOfUsername implements application.MemberReader.
func (s *Store) NewestBindingOfUsername(ctx context.Context, environment, username string) (*domain.PartyProviderBinding, error) {
	r, err := s.rq.NewestBindingOfUsername(ctx, sqlitedb.NewestBindingOfUsernameParams{Provider: domain.ProviderSite, Instance: environment, ExternalID: username})
	return onePartyBinding("newest binding of username", r, err)
}

// BindingByKey implements application.MemberReader.
func (s *Store) BindingByKey(ctx context.Context, key domain.BindingKey) (*domain.MemberBinding, error) {
	r, err := s.rq.MemberBindingByKey(ctx, sqlitedb.MemberBindingByKeyParams{PartyID: key.PartyID, ProjectID: key.ProjectID, Environment: key.Environment})
	return oneBinding("member binding", r, err)
}

// SiteHasProjectAllocation implements application.MemberReader.
func (s *Store) SiteHasProjectAllocation(ctx context.Context, site, projectID string) (bool, error) {
	n, err := s.rq.SiteHasProjectAllocation(ctx, sqlitedb.SiteHasProjectAllocationParams{ProjectID: projectID, Site: site})
	return n != 0, dbErr("site has project allocation", err)
}

// ProjectClaims implements application.MemberReader.
func (s *Store) ProjectClaims(ctx context.Context, instance, providerProjectID string, limit int) ([]string, error) {
	ids, err := s.rq.ProviderProjectClaims(ctx, sqlitedb.ProviderProjectClaimsParams{Instance: instance, ExternalID: providerProjectID, MaxRows: maxRows(limit)})
	return ids, dbErr("provider project claims", err)
}

// EnvironmentBindingsAfter implements application.MemberReader.
func (s *Store) EnvironmentBindingsAfter(ctx context.Context, environment, afterProject, afterParty string, limit int) ([]domain.MemberBinding, error) {
	rs, err := s.rq.EnvironmentBindingsAfter(ctx, sqlitedb.EnvironmentBindingsAfterParams{Environment: environment, AfterProject: afterProject, AfterParty: afterParty, MaxRows: maxRows(limit)})
	if err != nil {
		return nil, dbErr("environment bindings", err)
	}
	out := make([]domain.MemberBinding, 0, len(rs))
	for _, r := range rs {
		b, err := bindingRow(r).ToDomain()
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// MembersWithoutBinding implements application.MemberReader.
func (s *Store) MembersWithoutBinding(ctx context.Context, environment, site, afterProject, afterParty string, limit int) ([]domain.BindingKey, error) {
	rs, err := s.rq.EnvironmentMembersWithoutBinding(ctx, sqlitedb.EnvironmentMembersWithoutBindingParams{
		Site: site, Environment: environment, AfterProject: afterProject, AfterParty: afterParty, MaxRows: maxRows(limit),
	})
	if err != nil {
		return nil, dbErr("members without binding", err)
	}
	out := make([]domain.BindingKey, 0, len(rs))
	for _, r := range rs {
		out = append(out, domain.BindingKey{PartyID: r.PartyID, ProjectID: r.ProjectID, Environment: environment})
	}
	return out, nil
}

// ProjectBindings implements application.MemberReader.
func (s *Store) ProjectBindings(ctx context.Context, projectID, partyID string) ([]application.BindingWithAccount, error) {
	rs, err := s.rq.ProjectMemberBindings(ctx, sqlitedb.ProjectMemberBindingsParams{ProjectID: projectID, PartyID: partyID})
	if err != nil {
		return nil, dbErr("project bindings", err)
	}
	out := make([]application.BindingWithAccount, 0, len(rs))
	for _, r := range rs {
		b, err := bindingRow(sqlitedb.MemberBinding{
			BindingID: r.BindingID, PartyID: r.PartyID, ProjectID: r.ProjectID, Environment: r.Environment, Generation: r.Generation,
			State: r.State, Reasons: r.Reasons, SiteBindingID: r.SiteBindingID, SiteUsername: r.SiteUsername,
			SiteBindingGeneration: r.SiteBindingGeneration, AccountUid: r.AccountUid, Account: r.Account, AllocationID: r.AllocationID,
			Namespace: r.Namespace, Revision: r.Revision, ChangedAt: r.ChangedAt,
		}).ToDomain()
		if err != nil {
			return nil, err
		}
		v := application.BindingWithAccount{MemberBinding: b}
		if r.AccountObservedAt.Valid {
			v.AccountObservedAt = rows.FromMicros(r.AccountObservedAt.Int64)
		}
		if r.AccountLastSeenAt.Valid {
			v.AccountLastSeenAt = rows.FromMicros(r.AccountLastSeenAt.Int64)
		}
		out = append(out, v)
	}
	return out, nil
}

// NativeAccounts implements application.MemberReader.
func (s *Store) NativeAccounts(ctx context.Context, allocationID string) ([]domain.NativeAccount, error) {
	return allocationAccounts(ctx, s.rq, allocationID)
}

// BindingsHoldingAccount implements application.BindingTx.
func (t reportTx) BindingsHoldingAccount(ctx context.Context, environment, account, uid string) ([]domain.MemberBinding, error) {
	rs, err := t.q.BindingsHoldingAccount(ctx, sqlitedb.BindingsHoldingAccountParams{Environment: environment, Account: account, AccountUid: uid})
	if err != nil {
		return nil, dbErr("bindings holding account", err)
	}
	return bindingRows(rs)
}

// TakenBindingsAfter implements application.MemberReader.
func (s *Store) TakenBindingsAfter(ctx context.Context, afterID string, limit int) ([]domain.MemberBinding, error) {
	rs, err := s.rq.TakenBindingsAfter(ctx, sqlitedb.TakenBindingsAfterParams{AfterID: afterID, MaxRows: maxRows(limit)})
	if err != nil {
		return nil, dbErr("taken bindings", err)
	}
	return bindingRows(rs)
}

func bindingRows(rs []sqlitedb.MemberBinding) ([]domain.MemberBinding, error) {
	out := make([]domain.MemberBinding, 0, len(rs))
	for _, r := range rs {
		b, err := bindingRow(r).ToDomain()
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/internal/rows"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/pgstore/pgdb"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// Native member accounts and Runtime member bindings on PostgreSQL
// (docs/resource-provisioning.md#native-member-accounts). Binding rows are
// locked with SELECT … FOR UPDATE; event transactions run one at a time
// (EventLockKey), so a binding's creation never races another event.

var (
	_ application.ReportTx  = (*reportTx)(nil)
	_ application.EventTx   = eventTx{}
	_ application.AccountTx = accountTx{}
)

func bindingRow(r pgdb.MemberBinding) rows.Binding {
	return rows.Binding{
		ID: r.BindingID, PartyID: r.PartyID, ProjectID: r.ProjectID, Environment: r.Environment, Generation: r.Generation,
		State: r.State, Reasons: r.Reasons, SiteBindingID: r.SiteBindingID, SiteUsername: r.SiteUsername,
		SiteBindingGeneration: r.SiteBindingGeneration, AccountUID: r.AccountUid, Account: r.Account, AllocationID: r.AllocationID,
		Namespace: r.Namespace, Revision: r.Revision, ChangedAt: r.ChangedAt,
	}
}

func partyBinding(r pgdb.PartyBinding) *domain.PartyProviderBinding {
	return &domain.PartyProviderBinding{
		ID: r.BindingID, PartyID: r.PartyID, Revision: r.Revision, Provider: r.Provider, Instance: r.Instance,
		ExternalID: r.ExternalID, State: r.State, Generation: r.Generation,
	}
}

// oneBinding decodes a single binding row; nil for no row.
func oneBinding(op string, r pgdb.MemberBinding, err error) (*domain.MemberBinding, error) {
	if errors.Is(err, pgx.ErrNoRows) {
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
func onePartyBinding(op string, r pgdb.PartyBinding, err error) (*domain.PartyProviderBinding, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbErr(op, err)
	}
	return partyBinding(r), nil
}

func (t *reportTx) IsProjectMember(ctx context.Context, projectID, partyID string) (bool, error) {
	ok, err := t.q.IsProjectMember(ctx, pgdb.IsProjectMemberParams{ProjectID: projectID, PartyID: partyID})
	return ok, dbErr("is project member", err)
}

func (t *reportTx) CurrentSiteBinding(ctx context.Context, partyID, environment string) (*domain.PartyProviderBinding, error) {
	r, err := t.q.CurrentSiteBinding(ctx, pgdb.CurrentSiteBindingParams{PartyID: partyID, Provider: domain.ProviderSite, Instance: environment, State: domain.SiteBindingVerified})
	return onePartyBinding("current site binding", r, err)
}

func (t *reportTx) BindingAccounts(ctx context.Context, bindingID string) ([]domain.BindingAccount, error) {
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

func (t *reportTx) LockBinding(ctx context.Context, id string) (*domain.MemberBinding, error) {
	r, err := t.q.LockMemberBinding(ctx, id)
	return oneBinding("lock member binding", r, err)
}

func (t *reportTx) InsertBinding(ctx context.Context, b domain.MemberBinding) (bool, error) {
	r := rows.BindingFromDomain(b)
	n, err := t.q.InsertMemberBinding(ctx, pgdb.InsertMemberBindingParams{
		BindingID: r.ID, PartyID: r.PartyID, ProjectID: r.ProjectID, Environment: r.Environment, Generation: r.Generation,
		State: r.State, Reasons: r.Reasons, SiteBindingID: r.SiteBindingID, SiteUsername: r.SiteUsername,
		SiteBindingGeneration: r.SiteBindingGeneration, AccountUid: r.AccountUID, Account: r.Account, AllocationID: r.AllocationID,
		Namespace: r.Namespace, Revision: r.Revision, ChangedAt: r.ChangedAt,
	})
	return n == 1, dbErr("insert member binding", err)
}

func (t *reportTx) UpdateBinding(ctx context.Context, b domain.MemberBinding) error {
	r := rows.BindingFromDomain(b)
	return dbErr("update member binding", t.q.UpdateMemberBinding(ctx, pgdb.UpdateMemberBindingParams{
		BindingID: r.ID, Generation: r.Generation, State: r.State, Reasons: r.Reasons, SiteBindingID: r.SiteBindingID,
		SiteUsername: r.SiteUsername, SiteBindingGeneration: r.SiteBindingGeneration, AccountUid: r.AccountUID, Account: r.Account,
		AllocationID: r.AllocationID, Namespace: r.Namespace, Revision: r.Revision, ChangedAt: r.ChangedAt,
	}))
}

func (t *reportTx) AppendBindingChanges(ctx context.Context, events []domain.MemberBindingChanged, recordedAt time.Time) error {
	for _, ev := range events {
		if err := t.q.InsertChange(ctx, pgdb.InsertChangeParams{
			EventType: domain.MemberBindingChangedType, SubjectID: ev.BindingID, Revision: ev.Revision, Payload: ev.Payload(), RecordedAt: recordedAt.UTC(),
		}); err != nil {
			return dbErr("insert change", err)
		}
	}
	t.appended = t.appended || len(events) > 0
	return nil
}

func (t *reportTx) AllocationAccountBindings(ctx context.Context, allocationID string) ([]string, error) {
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
	return dbErr("delete membership", t.q.DeleteProjectMembership(ctx, pgdb.DeleteProjectMembershipParams{ProjectID: projectID, PartyID: partyID}))
}

func (t eventTx) UpsertMembership(ctx context.Context, projectID string, m application.Membership) error {
	return dbErr("upsert membership", t.q.UpsertProjectMembership(ctx, pgdb.UpsertProjectMembershipParams{ProjectID: projectID, PartyID: m.PartyID, Role: m.Role}))
}

func (t eventTx) PartyProjects(ctx context.Context, partyID string) ([]string, error) {
	ids, err := t.q.PartyProjects(ctx, partyID)
	return ids, dbErr("party projects", err)
}

func (t eventTx) PartySiteEnvironments(ctx context.Context, partyID string) ([]string, error) {
	envs, err := t.q.PartySiteEnvironments(ctx, pgdb.PartySiteEnvironmentsParams{PartyID: partyID, Provider: domain.ProviderSite})
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
type accountTx struct{ *reportTx }

func (t accountTx) LockAccountSet(ctx context.Context, allocationID string) (*domain.AccountSet, error) {
	r, err := t.q.LockAccountSet(ctx, allocationID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbErr("lock account set", err)
	}
	return &domain.AccountSet{AllocationID: r.AllocationID, Revision: r.Revision, ContentDigest: r.ContentDigest, ObservedAt: r.ObservedAt.UTC(), LastSeenAt: r.LastSeenAt.UTC()}, nil
}

func (t accountTx) InsertAccountSet(ctx context.Context, s domain.AccountSet) (bool, error) {
	n, err := t.q.InsertAccountSet(ctx, pgdb.InsertAccountSetParams{
		AllocationID: s.AllocationID, Revision: s.Revision, ContentDigest: s.ContentDigest, ObservedAt: s.ObservedAt.UTC(), LastSeenAt: s.LastSeenAt.UTC(),
	})
	return n == 1, dbErr("insert account set", err)
}

func (t accountTx) UpdateAccountSet(ctx context.Context, s domain.AccountSet) error {
	return dbErr("update account set", t.q.UpdateAccountSet(ctx, pgdb.UpdateAccountSetParams{
		AllocationID: s.AllocationID, Revision: s.Revision, ContentDigest: s.ContentDigest, ObservedAt: s.ObservedAt.UTC(), LastSeenAt: s.LastSeenAt.UTC(),
	}))
}

func (t accountTx) AllocationAccounts(ctx context.Context, allocationID string) ([]domain.NativeAccount, error) {
	return allocationAccounts(ctx, t.q, allocationID)
}

func (t accountTx) UpsertAccounts(ctx context.Context, accounts []domain.NativeAccount) error {
	for _, a := range accounts {
		if err := t.q.UpsertNativeAccount(ctx, pgdb.UpsertNativeAccountParams{
			AllocationID: a.AllocationID, PartyID: a.PartyID, Uid: a.UID, BindingID: a.BindingID, Generation: a.Generation,
			AccountName: a.Account, State: a.State, Since: a.Since.UTC(), ChangedAt: a.ChangedAt.UTC(),
		}); err != nil {
			return dbErr("upsert native account", err)
		}
	}
	return nil
}

func allocationAccounts(ctx context.Context, q *pgdb.Queries, allocationID string) ([]domain.NativeAccount, error) {
	rs, err := q.AllocationAccounts(ctx, allocationID)
	if err != nil {
		return nil, dbErr("allocation accounts", err)
	}
	out := make([]domain.NativeAccount, 0, len(rs))
	for _, r := range rs {
		out = append(out, domain.NativeAccount{
			AllocationID: r.AllocationID, PartyID: r.PartyID, UID: r.Uid, BindingID: r.BindingID, Generation: r.Generation,
			Account: r.AccountName, State: r.State, Since: r.Since.UTC(), ChangedAt: r.ChangedAt.UTC(),
		})
	}
	return out, nil
}

// NewestBindingOfUsername implements application.MemberReader.
func (s *Store) NewestBindingOfUsername(ctx context.Context, environment, username string) (*domain.PartyProviderBinding, error) {
	r, err := s.q.NewestBindingOfUsername(ctx, pgdb.NewestBindingOfUsernameParams{Provider: domain.ProviderSite, Instance: environment, ExternalID: username})
	return onePartyBinding("newest binding of username", r, err)
}

// BindingByKey implements application.MemberReader.
func (s *Store) BindingByKey(ctx context.Context, key domain.BindingKey) (*domain.MemberBinding, error) {
	r, err := s.q.MemberBindingByKey(ctx, pgdb.MemberBindingByKeyParams{PartyID: key.PartyID, ProjectID: key.ProjectID, Environment: key.Environment})
	return oneBinding("member binding", r, err)
}

// SiteHasProjectAllocation implements application.MemberReader.
func (s *Store) SiteHasProjectAllocation(ctx context.Context, site, projectID string) (bool, error) {
	ok, err := s.q.SiteHasProjectAllocation(ctx, pgdb.SiteHasProjectAllocationParams{ProjectID: projectID, Site: site})
	return ok, dbErr("site has project allocation", err)
}

// ProjectClaims implements application.MemberReader.
func (s *Store) ProjectClaims(ctx context.Context, instance, providerProjectID string, limit int) ([]string, error) {
	ids, err := s.q.ProviderProjectClaims(ctx, pgdb.ProviderProjectClaimsParams{Instance: instance, ExternalID: providerProjectID, MaxRows: clampRows(limit)})
	return ids, dbErr("provider project claims", err)
}

// EnvironmentBindingsAfter implements application.MemberReader.
func (s *Store) EnvironmentBindingsAfter(ctx context.Context, environment, afterProject, afterParty string, limit int) ([]domain.MemberBinding, error) {
	rs, err := s.q.EnvironmentBindingsAfter(ctx, pgdb.EnvironmentBindingsAfterParams{Environment: environment, AfterProject: afterProject, AfterParty: afterParty, MaxRows: clampRows(limit)})
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
	rs, err := s.q.EnvironmentMembersWithoutBinding(ctx, pgdb.EnvironmentMembersWithoutBindingParams{
		Site: site, Environment: environment, AfterProject: afterProject, AfterParty: afterParty, MaxRows: clampRows(limit),
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
	rs, err := s.q.ProjectMemberBindings(ctx, pgdb.ProjectMemberBindingsParams{ProjectID: projectID, PartyID: partyID})
	if err != nil {
		return nil, dbErr("project bindings", err)
	}
	out := make([]application.BindingWithAccount, 0, len(rs))
	for _, r := range rs {
		b, err := bindingRow(pgdb.MemberBinding{
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
			v.AccountObservedAt = r.AccountObservedAt.Time.UTC()
		}
		if r.AccountLastSeenAt.Valid {
			v.AccountLastSeenAt = r.AccountLastSeenAt.Time.UTC()
		}
		out = append(out, v)
	}
	return out, nil
}

// NativeAccounts implements application.MemberReader.
func (s *Store) NativeAccounts(ctx context.Context, allocationID string) ([]domain.NativeAccount, error) {
	return allocationAccounts(ctx, s.q, allocationID)
}

// BindingsHoldingAccount implements application.BindingTx.
func (t *reportTx) BindingsHoldingAccount(ctx context.Context, environment, account, uid string) ([]domain.MemberBinding, error) {
	rs, err := t.q.BindingsHoldingAccount(ctx, pgdb.BindingsHoldingAccountParams{Environment: environment, Account: account, AccountUid: uid})
	if err != nil {
		return nil, dbErr("bindings holding account", err)
	}
	return bindingRows(rs)
}

// TakenBindingsAfter implements application.MemberReader.
func (s *Store) TakenBindingsAfter(ctx context.Context, afterID string, limit int) ([]domain.MemberBinding, error) {
	rs, err := s.q.TakenBindingsAfter(ctx, pgdb.TakenBindingsAfterParams{AfterID: afterID, MaxRows: clampRows(limit)})
	if err != nil {
		return nil, dbErr("taken bindings", err)
	}
	return bindingRows(rs)
}

func bindingRows(rs []pgdb.MemberBinding) ([]domain.MemberBinding, error) {
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

package application

import (
	"context"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// The store's ports for native member accounts and Runtime member bindings
// (docs/resource-provisioning.md#native-member-accounts).

// BindingTx derives and stores member bindings inside a write transaction
// (an event, an account report or a resource report). Binding rows are
// locked until the transaction ends; a transaction locks them in binding-ID
// order.
type BindingTx interface {
	// IsProjectMember reports whether partyID is a member of projectID in
	// the Project view.
	IsProjectMember(ctx context.Context, projectID, partyID string) (bool, error)
	// CurrentSiteBinding returns the Party's verified site binding at
	// environment (provider site, the environment as instance), the newest
	// by Beto's time when several are; nil when none.
	CurrentSiteBinding(ctx context.Context, partyID, environment string) (*domain.PartyProviderBinding, error)
	// BindingAccounts returns the reported accounts naming bindingID that
	// are not absent, with their allocations' facts.
	BindingAccounts(ctx context.Context, bindingID string) ([]domain.BindingAccount, error)
	// LockBinding returns the binding with id, locked for update, or nil.
	LockBinding(ctx context.Context, id string) (*domain.MemberBinding, error)
	// InsertBinding inserts a new binding; false when its ID exists already.
	InsertBinding(ctx context.Context, b domain.MemberBinding) (bool, error)
	// UpdateBinding stores a material change of a locked binding.
	UpdateBinding(ctx context.Context, b domain.MemberBinding) error
	// AppendBindingChanges writes MemberBindingChanged outbox rows in this
	// transaction, in the one change feed beside AllocationChanged and with
	// its ordering (see ReportTx.AppendChanges).
	AppendBindingChanges(ctx context.Context, events []domain.MemberBindingChanged, recordedAt time.Time) error
	// BindingsHoldingAccount returns the bindings at environment that are
	// not retired and name account, or are ready with an account of UID
	// uid, in ID order (docs/resource-provisioning.md#one-party-per-account).
	BindingsHoldingAccount(ctx context.Context, environment, account, uid string) ([]domain.MemberBinding, error)
}

// Membership is a Party's role in a Project in the Project view.
type Membership struct {
	PartyID string
	Role    string
}

// MembershipTx keeps the Project view's memberships and answers which
// bindings an event may move (inside the event transaction).
type MembershipTx interface {
	// ProjectMembers returns the Project's memberships, by Party.
	ProjectMembers(ctx context.Context, projectID string) ([]Membership, error)
	// DeleteMembership removes a Party from a Project.
	DeleteMembership(ctx context.Context, projectID, partyID string) error
	// UpsertMembership adds a Party to a Project or changes its role.
	UpsertMembership(ctx context.Context, projectID string, m Membership) error
	// PartyProjects returns the Projects the Party is a member of.
	PartyProjects(ctx context.Context, partyID string) ([]string, error)
	// PartySiteEnvironments returns the environments of the Party's site
	// bindings, whatever their state.
	PartySiteEnvironments(ctx context.Context, partyID string) ([]string, error)
	// PartyBindingKeys returns the keys of the Party's member bindings.
	PartyBindingKeys(ctx context.Context, partyID string) ([]domain.BindingKey, error)
	// PartyBinding returns the Party binding view's row of bindingID, or nil.
	PartyBinding(ctx context.Context, bindingID string) (*domain.PartyProviderBinding, error)
}

// AccountTx is one account report transaction.
type AccountTx interface {
	BindingTx
	// LockAllocation returns the allocation with id, locked for update (so
	// account reports of one allocation, and its resource reports, take
	// turns), or nil.
	LockAllocation(ctx context.Context, id string) (*domain.Allocation, error)
	// LockAccountSet returns the allocation's saved account set, locked for
	// update, or nil.
	LockAccountSet(ctx context.Context, allocationID string) (*domain.AccountSet, error)
	// InsertAccountSet inserts the allocation's first set; false when it
	// exists already.
	InsertAccountSet(ctx context.Context, s domain.AccountSet) (bool, error)
	// UpdateAccountSet stores the locked set's new state.
	UpdateAccountSet(ctx context.Context, s domain.AccountSet) error
	// AllocationAccounts returns every stored account of the allocation.
	AllocationAccounts(ctx context.Context, allocationID string) ([]domain.NativeAccount, error)
	// UpsertAccounts stores rows by their key (new keys inserted, known keys'
	// state updated).
	UpsertAccounts(ctx context.Context, accounts []domain.NativeAccount) error
}

// BindingWithAccount is a stored binding with the receipt times of the
// account set its ready account was reported in (zero when it has none).
type BindingWithAccount struct {
	domain.MemberBinding
	AccountObservedAt time.Time
	AccountLastSeenAt time.Time
}

// MemberReader is the read side of native member accounts and bindings.
type MemberReader interface {
	// NewestBindingOfUsername returns the newest (by Beto's time) site
	// binding at environment whose external ID is username, whatever its
	// state; nil when none.
	NewestBindingOfUsername(ctx context.Context, environment, username string) (*domain.PartyProviderBinding, error)
	// BindingByKey returns the binding of key, or nil.
	BindingByKey(ctx context.Context, key domain.BindingKey) (*domain.MemberBinding, error)
	// SiteHasProjectAllocation reports whether projectID has an allocation
	// at site that is not retired.
	SiteHasProjectAllocation(ctx context.Context, site, projectID string) (bool, error)
	// ProjectClaims is ReportTx.ProviderProjectClaims on committed data.
	ProjectClaims(ctx context.Context, instance, providerProjectID string, limit int) ([]string, error)
	// EnvironmentBindingsAfter returns up to limit bindings at environment
	// after (afterProject, afterParty), in (Project, Party) order.
	EnvironmentBindingsAfter(ctx context.Context, environment, afterProject, afterParty string, limit int) ([]domain.MemberBinding, error)
	// MembersWithoutBinding returns up to limit (Project, Party) pairs after
	// (afterProject, afterParty), in that order: members of the Projects
	// with a non-retired allocation at site that have no binding at
	// environment.
	MembersWithoutBinding(ctx context.Context, environment, site, afterProject, afterParty string, limit int) ([]domain.BindingKey, error)
	// TakenBindingsAfter returns up to limit bindings held pending with
	// reason account_taken, in ID order after binding ID afterID ("" for
	// the first).
	TakenBindingsAfter(ctx context.Context, afterID string, limit int) ([]domain.MemberBinding, error)
	// ProjectBindings returns the Project's bindings (of partyID only, when
	// not empty), by Party then environment.
	ProjectBindings(ctx context.Context, projectID, partyID string) ([]BindingWithAccount, error)
	// NativeAccounts returns every stored account of an allocation, by
	// Party, UID, binding and generation.
	NativeAccounts(ctx context.Context, allocationID string) ([]domain.NativeAccount, error)
}

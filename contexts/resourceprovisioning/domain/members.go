package domain

import (
	"slices"
	"time"
)

// Party bindings this context reads (docs/resource-provisioning.md#the-party-binding-view):
// a Party's binding to a Site account has provider "site", the Site's
// environment as instance and the Site username as external ID; only a
// verified one counts.
const (
	ProviderSite        = "site"
	SiteBindingVerified = "verified"
)

// MemberBindingNamespace is the fixed namespace UUID under which member
// binding IDs are derived: ID = UUIDv5(MemberBindingNamespace,
// "<party>/<project>/<environment>"). Changing it would change every
// binding ID.
const MemberBindingNamespace = "b212ebab-ae0e-46b9-bd94-97c77dbf476a"

var bindingNamespaceBytes = [16]byte{0xb2, 0x12, 0xeb, 0xab, 0xae, 0x0e, 0x46, 0xb9, 0xbd, 0x94, 0x97, 0xc7, 0x7d, 0xbf, 0x47, 0x6a}

// AccountPrefix starts every member account's name: member-<party>, the
// account Site Runtime acts as.
const AccountPrefix = "member-"

// AccountName returns the native account name of a Party: "member-" and its
// canonical ID.
func AccountName(partyID string) string { return AccountPrefix + partyID }

// States of a Runtime member binding (docs/resource-provisioning.md#runtime-member-bindings).
const (
	// BindingReady: live, with exactly one ready account of its generation.
	BindingReady = "ready"
	// BindingPending: live, without a ready account (the reasons say why).
	BindingPending = "pending"
	// BindingRetired: the member left the Project or lost its verified
	// site binding; the generation is kept.
	BindingRetired = "retired"
)

// Reasons of a pending or retired binding, and of a member without one.
const (
	// ReasonMemberRemoved: retired, the Party is no longer a member of the
	// Project.
	ReasonMemberRemoved = "member_removed"
	// ReasonSiteBindingRetired: retired, the Party has no verified site
	// binding at the environment any more.
	ReasonSiteBindingRetired = "site_binding_retired"
	// ReasonAccountMissing: no account of the binding's generation is
	// reported in an allocation of the binding's Project.
	ReasonAccountMissing = "account_missing"
	// ReasonAccountIncomplete: the binding's account is reported, but only
	// incomplete (an interrupted provisioning).
	ReasonAccountIncomplete = "account_incomplete"
	// ReasonAccountAmbiguous: several allocations of the Project report a
	// ready account of the binding's generation; none is chosen.
	ReasonAccountAmbiguous = "account_ambiguous"
	// ReasonNoSiteBinding: a member of a Project allocated at the Site has
	// no verified site binding at the environment, so it has no binding.
	ReasonNoSiteBinding = "no_site_binding"
	// ReasonAccountTaken: a live binding of another Party at the
	// environment names the binding's account, or holds a ready account of
	// the UID reported for it; the binding stays pending and is not
	// delivered (docs/resource-provisioning.md#one-party-per-account).
	ReasonAccountTaken = "account_taken"
)

// BindingKey identifies a Runtime member binding: one per Party, Project
// and environment (a Party's site binding is per environment).
type BindingKey struct {
	PartyID     string
	ProjectID   string
	Environment string
}

// ID returns the binding's ID: the UUIDv5 of "<party>/<project>/<environment>"
// under MemberBindingNamespace. Canonical IDs and environment IDs hold no
// "/", so the name is unambiguous. It is neither the Party's site binding
// ID (shared by the Party's Projects, and changed when Beto replaces it)
// nor anything an agent could guess from a username.
func (k BindingKey) ID() string {
	return uuidV5(bindingNamespaceBytes, k.PartyID+"/"+k.ProjectID+"/"+k.Environment)
}

// SiteBindingRef is the Party's site binding a member binding rests on,
// kept as evidence: Beto's binding ID, the Site username and Beto's own
// generation (not the member binding's).
type SiteBindingRef struct {
	ID         string
	Username   string
	Generation int64
}

// RefOf returns the evidence of b; the zero ref for nil.
func RefOf(b *PartyProviderBinding) SiteBindingRef {
	if b == nil {
		return SiteBindingRef{}
	}
	return SiteBindingRef{ID: b.ID, Username: b.ExternalID, Generation: b.Generation}
}

// ReadyAccount is a binding's ready native account: the Site's immutable
// UID, the allocation it was reported in and that allocation's native scope
// (the namespace). Zero while the binding has none.
type ReadyAccount struct {
	UID          string
	AllocationID string
	Namespace    string
}

// MemberBinding is a Runtime member binding as stored: the desired binding
// Site Runtime is to apply (docs/resource-provisioning.md#runtime-member-bindings).
type MemberBinding struct {
	// ID is BindingKey.ID().
	ID string
	BindingKey
	// Generation starts at 1 and grows when the member comes back or the
	// site binding is replaced; a retired binding keeps it.
	Generation int64
	// State is ready, pending or retired.
	State string
	// Reasons of a pending state (account_*) or of the retirement
	// (member_removed, site_binding_retired); empty when ready.
	Reasons []string
	// Site is the site binding the generation rests on (evidence); kept on
	// retirement.
	Site SiteBindingRef
	// Account is the ready account; zero unless State is ready.
	Account ReadyAccount
	// NativeName is the native account the member acts as, by the
	// environment's backend when the generation was derived
	// (siteprotocol.MemberAccountAt): member-<party> at a Kubernetes
	// environment, the site username at a Slurm one. Kept on retirement.
	NativeName string
	// Revision counts material changes, from 1.
	Revision int64
	// ChangedAt is the server time of the newest revision.
	ChangedAt time.Time
}

// AccountName returns the binding's native account name: NativeName, or
// member-<party> for a binding without one.
func (b MemberBinding) AccountName() string {
	if b.NativeName == "" {
		return AccountName(b.PartyID)
	}
	return b.NativeName
}

// sameFacts reports whether b and o hold the same material facts (every
// fact but the revision and its time).
func (b MemberBinding) sameFacts(o MemberBinding) bool {
	return b.ID == o.ID && b.BindingKey == o.BindingKey && b.Generation == o.Generation && b.State == o.State &&
		slices.Equal(b.Reasons, o.Reasons) && b.Site == o.Site && b.Account == o.Account && b.NativeName == o.NativeName
}

// BindingAccount is a reported account naming a binding that is not absent,
// with the facts of the allocation it was reported in.
type BindingAccount struct {
	AllocationID string
	UID          string
	Generation   int64
	// State is ready or incomplete.
	State string
	// AllocationProjectID, NativeScope and AllocationLifecycle are the
	// allocation's.
	AllocationProjectID string
	NativeScope         string
	AllocationLifecycle string
}

// BindingInputs are the facts a binding is derived from.
type BindingInputs struct {
	// Member: the Party is a member of the Project in the Project view.
	Member bool
	// SiteBinding is the Party's verified site binding at the environment
	// (the newest by Beto's time when several are), nil when none.
	SiteBinding *PartyProviderBinding
	// Accounts are the reported accounts naming the binding that are not
	// absent (read only when the binding is live).
	Accounts []BindingAccount
	// NativeName is the account the member acts as at the environment
	// (siteprotocol.MemberAccountAt of its backend); set when live.
	NativeName string
	// AccountTaken: a live binding of another Party at the environment,
	// itself not held back, names NativeName.
	AccountTaken bool
	// TakenUIDs are the UIDs among Accounts that are the ready account of
	// such a binding of another Party.
	TakenUIDs map[string]bool
}

// Live reports whether the inputs call for a live binding: a member with a
// verified site binding.
func (in BindingInputs) Live() bool { return in.Member && in.SiteBinding != nil }

// DeriveBinding returns the binding of key after in, given the stored one
// (nil when none), and whether that is a material change (a new revision,
// stamped now). Rules (docs/resource-provisioning.md#runtime-member-bindings):
//   - no binding and not live: none (a member without a verified site
//     binding gets no binding);
//   - no binding and live: generation 1, revision 1;
//   - live and no longer: retired with its generation, reasons
//     member_removed and/or site_binding_retired, no account;
//   - retired and not live: unchanged (the reasons stay those of the
//     retirement);
//   - retired and live again: generation + 1;
//   - live with another site binding (ID, username or Beto's generation),
//     or another native account name (the environment's backend changed):
//     replaced, generation + 1;
//   - live, with its account or ready account's UID held by another Party
//     at the environment: pending account_taken, no account
//     (docs/resource-provisioning.md#one-party-per-account);
//   - live: the ready account is the one ready account of the binding's
//     generation reported in a non-retired allocation of its Project
//     (pending account_missing, account_incomplete or account_ambiguous
//     otherwise).
//
// The second result is the zero binding and false when no binding exists
// or comes to exist.
func DeriveBinding(cur *MemberBinding, key BindingKey, in BindingInputs, now time.Time) (MemberBinding, bool) {
	live := in.Live()
	if cur == nil {
		if !live {
			return MemberBinding{}, false
		}
		next := MemberBinding{ID: key.ID(), BindingKey: key, Generation: 1, Site: RefOf(in.SiteBinding), NativeName: in.NativeName, Revision: 1, ChangedAt: now}
		next.deriveAccount(in)
		return next, true
	}
	next := *cur
	next.Reasons = slices.Clone(cur.Reasons)
	switch {
	case !live && cur.State == BindingRetired:
		return *cur, false
	case !live:
		next.State, next.Account, next.Reasons = BindingRetired, ReadyAccount{}, nil
		if !in.Member {
			next.Reasons = append(next.Reasons, ReasonMemberRemoved)
		}
		if in.SiteBinding == nil {
			next.Reasons = append(next.Reasons, ReasonSiteBindingRetired)
		}
	case cur.State == BindingRetired, RefOf(in.SiteBinding) != cur.Site, cur.NativeName != "" && cur.NativeName != in.NativeName:
		next.Generation++
		next.Site, next.NativeName = RefOf(in.SiteBinding), in.NativeName
		next.deriveAccount(in)
	default:
		next.NativeName = in.NativeName
		next.deriveAccount(in)
	}
	if next.sameFacts(*cur) {
		return *cur, false
	}
	next.Revision, next.ChangedAt = cur.Revision+1, now
	return next, true
}

// deriveAccount sets the state, reasons and account of a live binding from
// the reported accounts naming it, held back (account_taken) when another
// Party holds its account or the one ready account's UID.
func (b *MemberBinding) deriveAccount(in BindingInputs) {
	var ready []BindingAccount
	incomplete := false
	for _, a := range in.Accounts {
		if a.Generation != b.Generation || a.AllocationProjectID != b.ProjectID || a.AllocationLifecycle == LifecycleRetired {
			continue
		}
		switch a.State {
		case AccountReady:
			ready = append(ready, a)
		case AccountIncomplete:
			incomplete = true
		}
	}
	b.Account = ReadyAccount{}
	switch {
	case in.AccountTaken, len(ready) == 1 && in.TakenUIDs[ready[0].UID]:
		b.State, b.Reasons = BindingPending, []string{ReasonAccountTaken}
	case len(ready) == 1:
		b.State, b.Reasons = BindingReady, []string{}
		b.Account = ReadyAccount{UID: ready[0].UID, AllocationID: ready[0].AllocationID, Namespace: ready[0].NativeScope}
	case len(ready) > 1:
		b.State, b.Reasons = BindingPending, []string{ReasonAccountAmbiguous}
	case incomplete:
		b.State, b.Reasons = BindingPending, []string{ReasonAccountIncomplete}
	default:
		b.State, b.Reasons = BindingPending, []string{ReasonAccountMissing}
	}
}

// Normalize returns b with nil reasons as empty and times in UTC.
func (b MemberBinding) Normalize() MemberBinding {
	if b.Reasons == nil {
		b.Reasons = []string{}
	}
	b.ChangedAt = b.ChangedAt.UTC()
	return b
}

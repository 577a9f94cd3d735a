package domain

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// States of a native account (docs/resource-provisioning.md#the-account-report).
const (
	// AccountReady: the account and all its Roles and bindings exist.
	AccountReady = "ready"
	// AccountIncomplete: an interrupted provisioning.
	AccountIncomplete = "incomplete"
	// AccountAbsent: no longer listed by the allocation's newest report.
	AccountAbsent = "absent"
)

// MaxAccountsPerReport bounds one account report (every account of one
// allocation's native scope).
const MaxAccountsPerReport = 10000

// Reasons for refusing an account report (409).
const (
	// ReasonAllocationUnknown: no allocation of the reporting Site has the
	// provider resource (the agent reports the resource first).
	ReasonAllocationUnknown = "allocation_unknown"
	// ReasonBindingMismatch: an account names a binding this context does
	// not hold, a binding of another Party, or one of an environment that
	// is not the reporting Site's.
	ReasonBindingMismatch = "binding_mismatch"
)

// AccountReport is the complete set of member accounts an agent found in
// one allocation's native scope after a cycle
// (docs/resource-provisioning.md#the-account-report).
type AccountReport struct {
	// ProviderResourceID names the allocation (with the reporting Site).
	ProviderResourceID string
	// ObservedAt is when the agent listed the accounts (its clock; it orders
	// the reports of one allocation). At most microsecond precision.
	ObservedAt time.Time
	Accounts   []ReportedAccount
}

// ReportedAccount is one account, named by what the agent wrote on it.
type ReportedAccount struct {
	PartyID string `json:"party_id"`
	// Account is the account's name; it must be member-<party>.
	Account string `json:"account"`
	// UID is the Site's immutable UID of the account: an account made again
	// under the same name is another account.
	UID string `json:"uid"`
	// BindingID is the member binding the account serves (as the lookup
	// answered it).
	BindingID string `json:"binding_id"`
	// Generation is the member binding's generation written on the account
	// (≥ 1).
	Generation int64 `json:"generation"`
	// State is ready or incomplete.
	State string `json:"state"`
}

// Normalize returns r with ObservedAt in UTC truncated to microseconds and
// the accounts copied.
func (r AccountReport) Normalize() AccountReport {
	r.ObservedAt = r.ObservedAt.UTC().Truncate(time.Microsecond)
	r.Accounts = slices.Clone(r.Accounts)
	return r
}

// Validate returns every problem of r, located under loc ("body"): a
// missing provider resource, a missing or too fine observed_at, more than
// MaxAccountsPerReport accounts, and per account a party_id or binding_id
// that is not a canonical ID, an account name other than member-<party_id>,
// a missing uid, a generation below 1 (the account's rules by the
// binding's backend are CheckBackendAccount's), a state other than ready or
// incomplete, and a Party or UID listed twice (a namespace holds one
// account of a name, and a UID names one account).
func (r AccountReport) Validate(loc string) []Problem { return r.ValidateNames(loc, false) }

// ValidateNames is Validate where a slurm environment is configured
// (unixNames): an account is then member-<party_id> or a POSIX user name,
// and CheckBackendAccount holds it to its binding's backend.
func (r AccountReport) ValidateNames(loc string, unixNames bool) []Problem {
	var out []Problem
	out = append(out, CheckText(loc+".provider_resource_id", r.ProviderResourceID, true)...)
	out = append(out, CheckTime(loc+".observed_at", r.ObservedAt)...)
	if len(r.Accounts) > MaxAccountsPerReport {
		return append(out, Problem{Location: loc + ".accounts", Message: fmt.Sprintf("at most %d accounts", MaxAccountsPerReport), Value: len(r.Accounts)})
	}
	parties, uids := map[string]int{}, map[string]int{}
	for i, a := range r.Accounts {
		at := fmt.Sprintf("%s.accounts[%d]", loc, i)
		out = append(out, CheckCanonicalID(at+".party_id", a.PartyID, true)...)
		out = append(out, CheckCanonicalID(at+".binding_id", a.BindingID, true)...)
		out = append(out, CheckText(at+".uid", a.UID, true)...)
		switch {
		case a.PartyID == "" || a.Account == AccountName(a.PartyID):
		case !unixNames:
			out = append(out, Problem{Location: at + ".account", Message: fmt.Sprintf("must be %s: the account Site Runtime acts as is member-<party_id>", AccountName(a.PartyID)), Value: a.Account})
		case !siteprotocol.IsUnixUser(a.Account):
			out = append(out, Problem{Location: at + ".account", Message: fmt.Sprintf("must be %s at a kubernetes environment, or the Party's site username (a POSIX user name) at a slurm one: the account Site Runtime acts as", AccountName(a.PartyID)), Value: a.Account})
		}
		if a.Generation < 1 {
			out = append(out, Problem{Location: at + ".generation", Message: "must be at least 1 (the member binding's generation written on the account)", Value: a.Generation})
		}
		if a.State != AccountReady && a.State != AccountIncomplete {
			out = append(out, Problem{Location: at + ".state", Message: fmt.Sprintf("want %s or %s", AccountReady, AccountIncomplete), Value: a.State})
		}
		if j, ok := parties[a.PartyID]; ok && a.PartyID != "" {
			out = append(out, Problem{Location: at + ".party_id", Message: fmt.Sprintf("listed twice (also accounts[%d]): a native scope holds one account member-<party_id>", j), Value: a.PartyID})
		} else {
			parties[a.PartyID] = i
		}
		if j, ok := uids[a.UID]; ok && a.UID != "" {
			out = append(out, Problem{Location: at + ".uid", Message: fmt.Sprintf("listed twice (also accounts[%d]): a UID names one account", j), Value: a.UID})
		} else {
			uids[a.UID] = i
		}
	}
	return out
}

// CheckBackendAccount returns the problems of reported account a (at loc,
// "body.accounts[3]") against its binding b at an environment of backend
// (docs/resource-provisioning.md#the-account-report): at a Kubernetes
// environment the name is member-<party_id>; at a Slurm one it is a POSIX
// user name, the binding's account (the Party's site username) when it is
// of the binding's generation, and the uid is a decimal Unix uid.
func CheckBackendAccount(loc string, a ReportedAccount, b MemberBinding, backend siteprotocol.Backend) []Problem {
	var out []Problem
	switch backend {
	case siteprotocol.BackendSlurm:
		switch {
		case !siteprotocol.IsUnixUser(a.Account):
			out = append(out, Problem{Location: loc + ".account", Message: fmt.Sprintf("must be the Party's site username at environment %s (a POSIX user name, [a-z_][a-z0-9_-]{0,31}), not member-<party_id>: it is a slurm environment", b.Environment), Value: a.Account})
		case a.Generation == b.Generation && a.Account != b.AccountName():
			out = append(out, Problem{Location: loc + ".account", Message: fmt.Sprintf("must be %s, the Party's site username at environment %s for generation %d", b.AccountName(), b.Environment, b.Generation), Value: a.Account})
		}
		if !siteprotocol.IsUnixUID(a.UID) {
			out = append(out, Problem{Location: loc + ".uid", Message: fmt.Sprintf("must be the account's Unix uid in decimal (1 to 4294967294): environment %s is a slurm environment", b.Environment), Value: a.UID})
		}
	default:
		if a.Account != AccountName(a.PartyID) {
			out = append(out, Problem{Location: loc + ".account", Message: fmt.Sprintf("must be %s: the account Site Runtime acts as at a kubernetes environment is member-<party_id>", AccountName(a.PartyID)), Value: a.Account})
		}
	}
	return out
}

// ContentDigest returns the hex SHA-256 of the report's content without
// observed_at, with the accounts in (party, UID) order: two reports with
// equal digests list the same accounts, whatever their order.
func (r AccountReport) ContentDigest() string {
	accounts := slices.Clone(r.Accounts)
	slices.SortFunc(accounts, func(a, b ReportedAccount) int {
		return cmp.Or(cmp.Compare(a.PartyID, b.PartyID), cmp.Compare(a.UID, b.UID))
	})
	b, err := json.Marshal(struct {
		ProviderResourceID string            `json:"provider_resource_id"`
		Accounts           []ReportedAccount `json:"accounts"`
	}{r.ProviderResourceID, accounts})
	if err != nil {
		panic(fmt.Sprintf("encode account report: %v", err)) // strings and ints always encode
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// BindingIDs returns the distinct binding IDs the report names, sorted.
func (r AccountReport) BindingIDs() []string {
	var ids []string
	for _, a := range r.Accounts {
		ids = append(ids, a.BindingID)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// NativeAccount is one stored account of an allocation, keyed by the Party,
// the UID, the binding and the generation (the name follows from the
// Party). Rows are never deleted: absent accounts and older generations
// stay as evidence.
type NativeAccount struct {
	AllocationID string
	PartyID      string
	UID          string
	BindingID    string
	Generation   int64
	// Account is member-<party>.
	Account string
	// State is ready, incomplete or absent.
	State string
	// Since is the observed_at of the report that set State.
	Since time.Time
	// ChangedAt is the server time State was set.
	ChangedAt time.Time
}

// AccountKey identifies a native account within its allocation.
type AccountKey struct {
	PartyID    string
	UID        string
	BindingID  string
	Generation int64
}

// Key returns a's key.
func (a NativeAccount) Key() AccountKey {
	return AccountKey{PartyID: a.PartyID, UID: a.UID, BindingID: a.BindingID, Generation: a.Generation}
}

// MergeAccounts returns the rows to write so that an allocation's stored
// accounts become report r's set: every listed account in its reported
// state (a new key is a new row: a recreated account has a new UID, an
// updated generation a new generation), every other stored account absent.
// Rows whose state does not change are not returned; none returned means r
// changes no account. Changed rows carry since = r.ObservedAt and
// changed_at = now.
func MergeAccounts(allocationID string, stored []NativeAccount, r AccountReport, now time.Time) []NativeAccount {
	byKey := make(map[AccountKey]NativeAccount, len(stored))
	for _, a := range stored {
		byKey[a.Key()] = a
	}
	listed := make(map[AccountKey]bool, len(r.Accounts))
	var out []NativeAccount
	for _, a := range r.Accounts {
		k := AccountKey{PartyID: a.PartyID, UID: a.UID, BindingID: a.BindingID, Generation: a.Generation}
		listed[k] = true
		if cur, ok := byKey[k]; ok && cur.State == a.State {
			continue
		}
		out = append(out, NativeAccount{
			AllocationID: allocationID, PartyID: a.PartyID, UID: a.UID, BindingID: a.BindingID, Generation: a.Generation,
			Account: a.Account, State: a.State, Since: r.ObservedAt, ChangedAt: now,
		})
	}
	for _, a := range stored {
		if listed[a.Key()] || a.State == AccountAbsent {
			continue
		}
		a.State, a.Since, a.ChangedAt = AccountAbsent, r.ObservedAt, now
		out = append(out, a)
	}
	return out
}

// AccountSet is the newest accepted account report of an allocation: it
// orders reports and dates them.
type AccountSet struct {
	AllocationID string
	// Revision counts reports that changed an account (from 1, the first
	// report).
	Revision      int64
	ContentDigest string
	// ObservedAt is the newest accepted report's observed_at (agent clock).
	ObservedAt time.Time
	// LastSeenAt is the server's receipt time of it.
	LastSeenAt time.Time
}

// CheckAccountOrder decides where report r stands against the allocation's
// saved set (nil when none): a report older than the saved one is refused
// stale_report, the same observed_at is a duplicate with the same content
// and refused report_conflict with other content (so a recreated account
// cannot revive an old grant). It returns duplicate true for a
// retransmission.
func CheckAccountOrder(cur *AccountSet, r AccountReport) (duplicate bool, refusal *Refusal) {
	switch {
	case cur == nil:
		return false, nil
	case r.ObservedAt.Before(cur.ObservedAt):
		return false, &Refusal{Reason: ReasonStaleReport, Detail: fmt.Sprintf("observed_at %s is older than the saved account report's %s", r.ObservedAt.Format(time.RFC3339Nano), cur.ObservedAt.Format(time.RFC3339Nano))}
	case r.ObservedAt.Equal(cur.ObservedAt):
		if r.ContentDigest() == cur.ContentDigest {
			return true, nil
		}
		return false, &Refusal{Reason: ReasonReportConflict, Detail: "an account report with the same observed_at but other accounts was accepted before"}
	}
	return false, nil
}

// NextAccountSet returns the set after an accepted, newer report r and its
// outcome: created (no set yet), changed (an account changed: revision + 1)
// or renewed (only observed_at and last_seen_at move; last_seen_at never
// moves backwards).
func NextAccountSet(cur *AccountSet, allocationID string, r AccountReport, changed bool, now time.Time) (AccountSet, string) {
	if cur == nil {
		return AccountSet{AllocationID: allocationID, Revision: 1, ContentDigest: r.ContentDigest(), ObservedAt: r.ObservedAt, LastSeenAt: now}, OutcomeCreated
	}
	next := *cur
	next.ObservedAt, next.LastSeenAt, next.ContentDigest = r.ObservedAt, maxTime(now, cur.LastSeenAt), r.ContentDigest()
	if !changed {
		return next, OutcomeRenewed
	}
	next.Revision++
	return next, OutcomeChanged
}

package application

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The owner ports of native member accounts and Runtime member bindings
// (docs/execution-ports.md#member-accounts-and-bindings); their owner is
// resource_provisioning.

// MemberAccount is a member's ready native account for a Project at a
// Site: the account member-<party> of one environment's member binding,
// with the Site's immutable UID and the namespace it lives in.
type MemberAccount struct {
	PartyID     string
	ProjectID   string
	Site        string
	Environment string
	// Account is member-<party>.
	Account string
	// UID is the Site's immutable UID of the account: compare it with the
	// account Site Runtime is about to act as.
	UID string
	// Namespace and AllocationID are the allocation the account was
	// reported in.
	Namespace    string
	AllocationID string
	// BindingID and Generation are account_ref's in commands on the
	// environment's stream; Revision is the binding's.
	BindingID  string
	Generation int64
	Revision   int64
	// ObservedAt and LastSeenAt are the agent's observation and the
	// owner's receipt time of the account report it came from; Fresh is
	// false when LastSeenAt is older than the owner's freshness bound at
	// the read. What an account not seen lately means for a launch is
	// Execution Core's decision.
	ObservedAt time.Time
	LastSeenAt time.Time
	Fresh      bool
}

// AccountState is a member's binding at one environment of a Site as the
// owner answers it: ready with its account, or pending or retired with
// reasons.
type AccountState struct {
	MemberAccount
	// State is ready, pending or retired.
	State   string
	Reasons []string
}

// ErrNoReadyAccount is wrapped by MemberAccounts when the member has no
// ready account for the Project at the Site (a *NoReadyAccountError says
// why).
var ErrNoReadyAccount = errors.New("no ready member account")

// Reasons of a NoReadyAccountError besides the owner's own (account_missing,
// account_incomplete, member_removed, site_binding_retired, …).
const (
	// ReasonNoBinding: the member has no binding at any environment of the
	// Site (no verified site binding there, or not a member).
	ReasonNoBinding = "no_binding"
	// ReasonAccountAmbiguous: ready accounts at several environments of the
	// Site; none is chosen.
	ReasonAccountAmbiguous = "account_ambiguous"
)

// NoReadyAccountError says why a member has no ready account.
type NoReadyAccountError struct {
	PartyID, ProjectID, Site string
	// Reasons are the owner's reasons, each prefixed with its environment
	// ("alpha-k8s: account_missing"), or ReasonNoBinding.
	Reasons []string
}

func (e *NoReadyAccountError) Error() string {
	return fmt.Sprintf("%s: member %s of Project %s at Site %s: %s", ErrNoReadyAccount, e.PartyID, e.ProjectID, e.Site, strings.Join(e.Reasons, ", "))
}

// Unwrap returns ErrNoReadyAccount.
func (e *NoReadyAccountError) Unwrap() error { return ErrNoReadyAccount }

// ChooseReadyAccount returns the one ready account among a member's
// bindings at a Site's environments, or a *NoReadyAccountError: no binding
// (ReasonNoBinding), none ready (each binding's reasons), or ready accounts
// at several environments (ReasonAccountAmbiguous, naming them). Both owner
// adaptors answer through it.
func ChooseReadyAccount(memberID, projectID, site string, states []AccountState) (MemberAccount, error) {
	var ready []MemberAccount
	var reasons []string
	for _, s := range states {
		if s.State == "ready" {
			ready = append(ready, s.MemberAccount)
			continue
		}
		for _, r := range s.Reasons {
			reasons = append(reasons, s.Environment+": "+r)
		}
		if len(s.Reasons) == 0 {
			reasons = append(reasons, s.Environment+": "+s.State)
		}
	}
	nre := &NoReadyAccountError{PartyID: memberID, ProjectID: projectID, Site: site}
	switch {
	case len(ready) == 1:
		return ready[0], nil
	case len(ready) > 1:
		var envs []string
		for _, a := range ready {
			envs = append(envs, a.Environment)
		}
		slices.Sort(envs)
		nre.Reasons = []string{ReasonAccountAmbiguous + " (" + strings.Join(envs, ", ") + ")"}
	case len(states) == 0:
		nre.Reasons = []string{ReasonNoBinding}
	default:
		nre.Reasons = reasons
	}
	return MemberAccount{}, nre
}

// MemberAccounts is the owner port for native member accounts
// (docs/execution-ports.md#member-accounts-and-bindings).
type MemberAccounts interface {
	// ReadyAccount returns the ready native account of memberID for
	// projectID at site, read live. Errors: one wrapping ErrNoReadyAccount
	// (a *NoReadyAccountError) when there is none; one wrapping
	// ErrResourceLookupUnavailable when the owner cannot be read.
	ReadyAccount(ctx context.Context, memberID, projectID, site string) (MemberAccount, error)
}

// MemberBinding is a desired Runtime member binding, delivered through the
// Site protocol as bind-member (live) or retire-member (retired) at its
// revision.
type MemberBinding struct {
	PartyID     string
	ProjectID   string
	Environment string
	// Namespace is the ready account's namespace ("" unless ready).
	Namespace string
	// Account is the native account: member-<party> at a Kubernetes
	// environment, the Party's site username at a Slurm one.
	Account    string
	BindingID  string
	Revision   int64
	Generation int64
	// Retired: the binding is retired with Generation.
	Retired bool
	// State is ready, pending or retired; Reasons say why it is not ready.
	State   string
	Reasons []string
	// AccountUID is the ready account's UID ("" unless ready).
	AccountUID string
}

// UnboundMember is a member of a Project allocated at the environment's
// Site without a binding there, and why (no_site_binding).
type UnboundMember struct {
	PartyID   string
	ProjectID string
	Reasons   []string
}

// DesiredBindings is an environment's complete desired bindings.
type DesiredBindings struct {
	Environment string
	// Site is the environment's Site as the owner knows it.
	Site     string
	Bindings []MemberBinding
	Unbound  []UnboundMember
	// ChangesCursor is the owner's change feed cursor captured before the
	// read: follow the feed from it and apply only newer binding revisions.
	ChangesCursor string
}

// MemberBindings is the owner port for desired Runtime member bindings.
type MemberBindings interface {
	// DesiredBindings returns every desired binding of environment (live
	// and retired) and its members without one, read live and completely.
	// Errors wrap ErrResourceLookupUnavailable when the owner cannot be
	// read (an environment the owner does not know included).
	DesiredBindings(ctx context.Context, environment string) (DesiredBindings, error)
}

package domain

import (
	"time"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// PermissionAction is what a member asks to do, as the permission provider
// names it (docs/site-runtime.md#access-before-every-native-start).
type PermissionAction string

// Permission actions of the provider contract.
const (
	ActionStart  PermissionAction = "execution.start"
	ActionRead   PermissionAction = "execution.read"
	ActionCancel PermissionAction = "execution.cancel"
)

// PermissionQuery is one question to the permission provider: may member
// do action in project for this Run and Attempt.
type PermissionQuery struct {
	MemberID  string
	ProjectID string
	Action    PermissionAction
	RunID     string
	AttemptID string
}

// Permission is the provider's answer. It may be used only before
// ValidUntil; the Runtime never caches it past that bound.
type Permission struct {
	Allowed bool
	// Reason is the provider's reason (for a denial, what the member lacks).
	Reason string
	// EvidenceID names the provider's decision record.
	EvidenceID string
	ValidUntil time.Time
}

// StartIdentity is who a native start acts as, once access is granted: the
// member's account (member-<party>) in the Project namespace the binding
// names, and the permission evidence that allowed it.
type StartIdentity struct {
	Namespace  string
	Account    string
	PartyID    string
	ProjectID  string
	BindingID  string
	Generation int64
	EvidenceID string
}

// StartIdentityOf returns the identity a current binding b grants.
func StartIdentityOf(b MemberBinding) StartIdentity {
	return StartIdentity{Namespace: b.Namespace, Account: b.Account, PartyID: b.PartyID, ProjectID: b.ProjectID,
		BindingID: b.BindingID, Generation: b.Generation}
}

// DecideBinding checks the binding stored for cmd's account reference
// (found false when none is). It returns nil when the binding may be used,
// else the refusal:
//   - no account reference, no stored binding, or a binding of another
//     member or Project: binding-missing (naming nothing of the binding's
//     member or Project);
//   - a retired binding or another generation: binding-retired.
//
// Source: docs/site-runtime.md#access-before-every-native-start.
func DecideBinding(cmd siteprotocol.Command, b MemberBinding, found bool) *Answer {
	var a Answer
	switch {
	case cmd.AccountRef == nil:
		a = Refused(siteprotocol.ReasonBindingMissing, "the command names no account binding")
	case !found:
		a = Refused(siteprotocol.ReasonBindingMissing, "no binding %s generation %d is applied at this Site", cmd.AccountRef.BindingID, cmd.AccountRef.Generation)
	case b.PartyID != cmd.MemberID || b.ProjectID != cmd.ProjectID:
		// Whose binding it is is not said: a refusal names nothing of
		// another member (docs/site-runtime.md#access-before-every-native-start).
		a = Refused(siteprotocol.ReasonBindingMissing, "binding %s generation %d is not a binding of member %s in Project %s applied at this Site",
			b.BindingID, b.Generation, cmd.MemberID, cmd.ProjectID)
	case !b.Current(*cmd.AccountRef):
		a = Refused(siteprotocol.ReasonBindingRetired, "binding %s generation %d is retired", b.BindingID, b.Generation)
	default:
		return nil
	}
	return &a
}

// DecideNamespace checks that the namespace's project-id label (labelled
// false when the namespace is missing or carries none) names the
// command's Project; else the refusal is project-mismatch.
func DecideNamespace(namespace, projectID string, labelled bool, want string) *Answer {
	var a Answer
	switch {
	case !labelled:
		a = Refused(siteprotocol.ReasonProjectMismatch, "namespace %s does not exist, is not a project namespace of this Runtime, or has no project-id label; it must name Project %s", namespace, want)
	case projectID != want:
		a = Refused(siteprotocol.ReasonProjectMismatch, "namespace %s belongs to Project %s, not Project %s", namespace, projectID, want)
	default:
		return nil
	}
	return &a
}

// DecidePermission checks the provider's answer at now: a denial is
// permission-denied; an answer whose valid_until has passed is not used
// (permission-unavailable). nil means allowed.
func DecidePermission(q PermissionQuery, p Permission, now time.Time) *Answer {
	var a Answer
	switch {
	case !p.Allowed:
		a = Refused(siteprotocol.ReasonPermissionDenied, "member %s may not %s in Project %s: %s (evidence %s)", q.MemberID, q.Action, q.ProjectID, p.Reason, p.EvidenceID)
	case !now.Before(p.ValidUntil):
		a = Refused(siteprotocol.ReasonPermissionUnavailable, "the permission answer for member %s (evidence %s) expired at %s", q.MemberID, p.EvidenceID, p.ValidUntil.UTC().Format(time.RFC3339))
	default:
		return nil
	}
	return &a
}

// DecideAccount compares the live service account the binding names with
// the account UID the binding was applied with
// (docs/site-protocol.md#the-accounts-uid-in-a-binding): a binding applied
// with a UID needs the live account to exist with that UID, otherwise
// binding-conflict (an account deleted and made again under the same name
// is another account). A binding applied without a UID is checked by name
// only: the create acts as the named account, as before UIDs were
// delivered. nil means the account matches.
func DecideAccount(b MemberBinding, liveUID string, found bool) *Answer {
	var a Answer
	switch {
	case b.AccountUID == "":
		return nil
	case !found:
		a = Refused(siteprotocol.ReasonBindingConflict, "service account %s/%s of binding %s generation %d (UID %s) does not exist", b.Namespace, b.Account, b.BindingID, b.Generation, b.AccountUID)
	case liveUID != b.AccountUID:
		a = Refused(siteprotocol.ReasonBindingConflict, "service account %s/%s has UID %s, but binding %s generation %d revision %d was applied for UID %s; apply a binding with the new UID",
			b.Namespace, b.Account, liveUID, b.BindingID, b.Generation, b.Revision, b.AccountUID)
	default:
		return nil
	}
	return &a
}

// AccountCheckNote is what a start's message adds about the account check
// of binding b: nothing for a binding applied with an account UID (checked
// by UID), and " (AccountCheckedByNameOnly(b))" for one applied without
// (docs/site-protocol.md#the-accounts-uid-in-a-binding).
func AccountCheckNote(b MemberBinding) string {
	if n := AccountCheckedByNameOnly(b); n != "" {
		return " (" + n + ")"
	}
	return ""
}

// AccountCheckedByNameOnly says, for a binding b applied without an
// account UID, that the account was checked by name only, naming the
// binding; it is empty for a binding applied with a UID. It is the note of
// a start's log line (Answer.Note).
func AccountCheckedByNameOnly(b MemberBinding) string {
	if b.AccountUID != "" {
		return ""
	}
	return "account checked by name only: binding " + b.BindingID + " was applied without an account UID"
}

package domain

import (
	"fmt"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// MemberBinding is a member's native account binding at this Site, as
// applied by bind-member and retire-member commands: the Party (member),
// the Project, the namespace and account (member-<party>) it acts through.
// (BindingID, Generation) identifies it; Revision orders changes within a
// generation. A retired generation is never revived, and binding a newer
// generation retires every older one
// (docs/site-runtime.md#access-before-every-native-start).
type MemberBinding struct {
	BindingID  string
	Generation int64
	Revision   int64
	PartyID    string
	ProjectID  string
	Namespace  string
	Account    string
	// AccountUID is the Kubernetes UID of Account the binding was applied
	// with; empty for a binding applied without one, which is checked by
	// name only (docs/site-protocol.md#the-accounts-uid-in-a-binding).
	AccountUID string
	Retired    bool
	// AppliedBy is the command ID that last changed the binding.
	AppliedBy string
}

// Current reports whether the binding may be used by a command that names
// (bindingID, generation): same generation and not retired.
func (b MemberBinding) Current(ref siteprotocol.AccountRef) bool {
	return !b.Retired && b.BindingID == ref.BindingID && b.Generation == ref.Generation
}

// BindingChange is what applying a bind-member or retire-member command
// does: either a refusal, or the rows to write (possibly none) and the
// revision now in effect.
type BindingChange struct {
	// Refusal is set when the command is refused; nothing is written.
	Refusal *Answer
	// Write lists the rows to insert or replace, in order.
	Write []MemberBinding
	// AppliedRevision is the revision in effect after the change
	// (detail.applied_revision); 0 for a generation never bound.
	AppliedRevision int64
}

// AccountHeldElsewhere returns the refusal of want (from a bind-member
// command) when holders, the live bindings naming its account, hold one of
// another Party: binding-conflict, one Party per account
// (docs/site-protocol.md#member-identity-by-backend); nil otherwise.
func AccountHeldElsewhere(holders []MemberBinding, want MemberBinding) *Answer {
	for _, h := range holders {
		if !h.Retired && h.Account == want.Account && h.PartyID != want.PartyID {
			a := Refused(siteprotocol.ReasonBindingConflict, "account %s is bound to party %s (binding %s generation %d); one Party per account", want.Account, h.PartyID, h.BindingID, h.Generation)
			return &a
		}
	}
	return nil
}

// DecideBind applies want (from a bind-member command) to known, every
// stored generation of want.BindingID. Rules:
//   - a newer generation is known: want's generation is superseded, refused
//     binding-retired;
//   - want's generation is retired: refused binding-retired;
//   - want's generation is bound to another party, Project or account, or to
//     other content at the same revision: refused binding-conflict;
//   - a stored revision at least want's: nothing changes (replay-safe);
//   - otherwise want is written, and every older generation not yet retired
//     is retired.
func DecideBind(known []MemberBinding, want MemberBinding) BindingChange {
	var same *MemberBinding
	var write []MemberBinding
	for i := range known {
		k := known[i]
		switch {
		case k.Generation > want.Generation:
			a := Refused(siteprotocol.ReasonBindingRetired, "binding %s generation %d is superseded by generation %d", want.BindingID, want.Generation, k.Generation)
			return BindingChange{Refusal: &a}
		case k.Generation == want.Generation:
			same = &known[i]
		case !k.Retired:
			k.Retired = true
			k.AppliedBy = want.AppliedBy
			write = append(write, k)
		}
	}
	if same != nil {
		switch {
		case same.Retired:
			a := Refused(siteprotocol.ReasonBindingRetired, "binding %s generation %d is retired", want.BindingID, want.Generation)
			return BindingChange{Refusal: &a}
		case same.PartyID != want.PartyID || same.ProjectID != want.ProjectID || same.Account != want.Account:
			a := Refused(siteprotocol.ReasonBindingConflict, "binding %s generation %d is bound to party %s, Project %s, account %s", want.BindingID, want.Generation, same.PartyID, same.ProjectID, same.Account)
			return BindingChange{Refusal: &a}
		case same.Revision == want.Revision && (same.Namespace != want.Namespace || same.AccountUID != want.AccountUID):
			a := Refused(siteprotocol.ReasonBindingConflict, "binding %s generation %d revision %d is applied with namespace %s, account UID %q", want.BindingID, want.Generation, want.Revision, same.Namespace, same.AccountUID)
			return BindingChange{Refusal: &a}
		case same.Revision >= want.Revision:
			return BindingChange{Write: write, AppliedRevision: same.Revision}
		}
	}
	want.Retired = false
	return BindingChange{Write: append(write, want), AppliedRevision: want.Revision}
}

// DecideRetire retires generation of bindingID given known, every stored
// generation of that binding. Retiring is idempotent; retiring a generation
// never bound records it retired (revision 0, with the command's member and
// Project) so that it can never be bound later.
func DecideRetire(known []MemberBinding, bindingID string, generation int64, memberID, projectID, commandID string) BindingChange {
	for _, k := range known {
		if k.Generation != generation {
			continue
		}
		if k.Retired {
			return BindingChange{AppliedRevision: k.Revision}
		}
		k.Retired = true
		k.AppliedBy = commandID
		return BindingChange{Write: []MemberBinding{k}, AppliedRevision: k.Revision}
	}
	tomb := MemberBinding{BindingID: bindingID, Generation: generation, PartyID: memberID, ProjectID: projectID, Retired: true, AppliedBy: commandID}
	return BindingChange{Write: []MemberBinding{tomb}, AppliedRevision: 0}
}

// BindingMessage is the human message of an applied binding change.
func BindingMessage(op siteprotocol.Operation, bindingID string, generation, revision int64) string {
	if op == siteprotocol.OpRetireMember {
		return fmt.Sprintf("binding %s generation %d retired", bindingID, generation)
	}
	return fmt.Sprintf("binding %s generation %d applied at revision %d", bindingID, generation, revision)
}

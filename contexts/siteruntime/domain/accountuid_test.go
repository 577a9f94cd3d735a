package domain

import (
	"testing"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// A binding's account UID (docs/site-protocol.md#the-accounts-uid-in-a-binding):
// a later revision carrying a new UID replaces the stored one (an account
// recreated under the same name is rebound by the next revision); the same
// revision with another UID is binding-conflict, and a replay of the same
// revision and UID changes nothing.
func TestABindingsAccountUIDChangesOnlyWithALaterRevision(t *testing.T) {
	old := MemberBinding{BindingID: "b", Generation: 1, Revision: 1, PartyID: "p", ProjectID: "q", Namespace: "project-a",
		Account: "member-p", AccountUID: "uid-1", AppliedBy: "c1"}
	same := old
	same.AppliedBy = "c2"
	if ch := DecideBind([]MemberBinding{old}, same); ch.Refusal != nil || len(ch.Write) != 0 || ch.AppliedRevision != 1 {
		t.Fatalf("replay: %+v", ch)
	}
	other := same
	other.AccountUID = "uid-2"
	if ch := DecideBind([]MemberBinding{old}, other); ch.Refusal == nil || ch.Refusal.Reason != siteprotocol.ReasonBindingConflict {
		t.Fatalf("same revision, another UID: %+v", ch)
	}
	other.Revision = 2
	ch := DecideBind([]MemberBinding{old}, other)
	if ch.Refusal != nil || len(ch.Write) != 1 || ch.Write[0].AccountUID != "uid-2" || ch.AppliedRevision != 2 {
		t.Fatalf("later revision, new UID: %+v", ch)
	}
}

// The account check (docs/site-protocol.md#the-accounts-uid-in-a-binding):
// a binding with a UID needs the live account with that UID; one without
// is checked by name only, and the start's message says so.
func TestTheLiveAccountMustCarryTheBindingsUID(t *testing.T) {
	b := MemberBinding{BindingID: "b", Generation: 1, Revision: 1, Namespace: "project-a", Account: "member-p", AccountUID: "uid-1"}
	if r := DecideAccount(b, "uid-1", true); r != nil || AccountCheckNote(b) != "" {
		t.Fatalf("same UID: %+v, note %q", r, AccountCheckNote(b))
	}
	for live, found := range map[string]bool{"uid-2": true, "": false} {
		if r := DecideAccount(b, live, found); r == nil || r.Reason != siteprotocol.ReasonBindingConflict {
			t.Fatalf("live %q found %v: %+v", live, found, r)
		}
	}
	b.AccountUID = ""
	if r := DecideAccount(b, "uid-2", true); r != nil || AccountCheckNote(b) == "" {
		t.Fatalf("by name only: %+v, note %q", r, AccountCheckNote(b))
	}
}

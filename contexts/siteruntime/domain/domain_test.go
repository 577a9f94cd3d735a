package domain

import (
	"errors"
	"testing"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

func TestTheServerMayHaveAcknowledgedThePendingCommandButNothingBeyondIt(t *testing.T) {
	cp := Checkpoint{Acknowledged: 7}
	if cp.Limit() != 7 || cp.Next() != 8 {
		t.Fatalf("without pending: limit %d next %d", cp.Limit(), cp.Next())
	}
	cp.Pending = &Pending{Sequence: 8}
	if cp.Limit() != 8 || cp.Next() != 8 || cp.Pending.HasResult() {
		t.Fatalf("with pending: limit %d next %d", cp.Limit(), cp.Next())
	}
}

func TestAnAcknowledgementIsExactOnlyWhenSequenceAndResultDigestBothMatch(t *testing.T) {
	sent := Acknowledgement{Sequence: 3, ResultDigest: "abc"}
	for got, exact := range map[Acknowledgement]bool{
		{3, "abc"}: true, {4, "abc"}: false, {3, "abd"}: false, {2, "abc"}: false,
	} {
		if got.Exact(sent) != exact {
			t.Errorf("%+v exact=%v", got, !exact)
		}
	}
}

func TestBindingANewerGenerationRetiresOlderOnesAndTheOldOnesStayRetired(t *testing.T) {
	g1 := MemberBinding{BindingID: "b", Generation: 1, Revision: 4, PartyID: "p", ProjectID: "q", Namespace: "n", Account: "member-p"}
	g2 := g1
	g2.Generation, g2.Revision = 2, 1
	change := DecideBind([]MemberBinding{g1}, g2)
	if change.Refusal != nil || len(change.Write) != 2 || !change.Write[0].Retired || change.Write[1].Retired || change.AppliedRevision != 1 {
		t.Fatalf("binding generation 2: %+v", change)
	}
	g1.Retired = true
	again := g1
	again.Retired, again.Revision = false, 9
	if c := DecideBind([]MemberBinding{g1, g2}, again); c.Refusal == nil || c.Refusal.Reason != siteprotocol.ReasonBindingRetired {
		t.Fatalf("generation 1 revived: %+v", c)
	}
	if c := DecideRetire([]MemberBinding{g1, g2}, "b", 1, "p", "q", "x"); c.Refusal != nil || len(c.Write) != 0 || c.AppliedRevision != 4 {
		t.Fatalf("retiring a retired generation again: %+v", c)
	}
	if ref := (siteprotocol.AccountRef{BindingID: "b", Generation: 2}); !g2.Current(ref) || g1.Current(siteprotocol.AccountRef{BindingID: "b", Generation: 1}) {
		t.Fatal("current: only the bound, unretired generation")
	}
}

func TestTheInstallationHookInitialisesOnlyAnEmptyUnrecordedVolume(t *testing.T) {
	rec := &Installation{InstallationID: "i"}
	all := JournalSet{Present: JournalFiles()}
	some := JournalSet{Present: []string{DeliveryFile}}
	cases := []struct {
		set    JournalSet
		rec    *Installation
		action InstallAction
		err    error
	}{
		{JournalSet{}, nil, InstallInitialise, nil},
		{all, nil, InstallRecordExisting, nil},
		{all, rec, InstallVerified, nil},
		{some, rec, "", ErrJournalsMissing},
		{JournalSet{}, rec, "", ErrJournalsMissing},
		{some, nil, "", ErrPartialJournals},
	}
	for _, c := range cases {
		action, err := DecideInstallation(c.set, c.rec)
		if action != c.action || !errors.Is(err, c.err) {
			t.Errorf("%v record=%v: %q %v; want %q %v", c.set.Present, c.rec != nil, action, err, c.action, c.err)
		}
	}
}

package domain

import (
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	partyA   = "9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"
	partyB   = "1d3e6f2b-1c8a-4f4d-9b7e-3a2f1d0c9b8e"
	projectA = "7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"
	projectB = "8b2f5d3c-2e4a-4b6c-8d9e-1f2a3b4c5d6e"
)

var now = time.Date(2026, 8, 20, 10, 0, 0, 0, time.UTC)

func TestBindingIDsAreOnePerPartyProjectAndEnvironment(t *testing.T) {
	a := BindingKey{PartyID: partyA, ProjectID: projectA, Environment: "alpha-k8s"}
	ids := map[string]BindingKey{}
	for _, k := range []BindingKey{
		a,
		{PartyID: partyA, ProjectID: projectB, Environment: "alpha-k8s"}, // the same Party in a second Project
		{PartyID: partyA, ProjectID: projectA, Environment: "alpha-hpc"}, // a second environment of the Site
		{PartyID: partyB, ProjectID: projectA, Environment: "alpha-k8s"},
	} {
		id := k.ID()
		if prev, ok := ids[id]; ok {
			t.Fatalf("%+v and %+v share binding ID %s", prev, k, id)
		}
		if len(CheckCanonicalID("", id, true)) > 0 || id[14] != '5' {
			t.Fatalf("binding ID %s is not a lower-case UUIDv5", id)
		}
		ids[id] = k
	}
	if a.ID() != (BindingKey{PartyID: partyA, ProjectID: projectA, Environment: "alpha-k8s"}).ID() {
		t.Fatal("a binding ID is not deterministic")
	}
	// The known answer (Python's uuid.uuid5 gives the same) pins the
	// namespace and the name's form: changing either would change every
	// binding ID.
	if got := a.ID(); got != "edf0dbce-a8c3-5a1d-8d34-0e0ff66583ab" {
		t.Fatalf("binding ID of %+v: %s", a, got)
	}
}

func site(id, user string, gen int64) *PartyProviderBinding {
	return &PartyProviderBinding{ID: id, PartyID: partyA, Provider: ProviderSite, Instance: "alpha-k8s", ExternalID: user, State: SiteBindingVerified, Generation: gen}
}

func readyAccount(uid string, gen int64) BindingAccount {
	return BindingAccount{AllocationID: "alloc-1", UID: uid, Generation: gen, State: AccountReady, AllocationProjectID: projectA, NativeScope: "ns-1", AllocationLifecycle: LifecycleReady}
}

func TestBindingGenerationsFollowMembershipAndTheSiteBinding(t *testing.T) {
	key := BindingKey{PartyID: partyA, ProjectID: projectA, Environment: "alpha-k8s"}
	s1 := site("e41f0a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b", "alice", 1)
	if _, ok := DeriveBinding(nil, key, BindingInputs{Member: true}, now); ok {
		t.Fatal("a member without a verified site binding got a binding")
	}
	if _, ok := DeriveBinding(nil, key, BindingInputs{SiteBinding: s1}, now); ok {
		t.Fatal("a non-member got a binding")
	}
	type step struct {
		name     string
		in       BindingInputs
		material bool
		gen, rev int64
		state    string
		reasons  []string
	}
	steps := []step{
		{"member with a site binding", BindingInputs{Member: true, SiteBinding: s1}, true, 1, 1, BindingPending, []string{ReasonAccountMissing}},
		{"nothing new", BindingInputs{Member: true, SiteBinding: s1}, false, 1, 1, BindingPending, []string{ReasonAccountMissing}},
		{"incomplete account", BindingInputs{Member: true, SiteBinding: s1, Accounts: []BindingAccount{{AllocationID: "alloc-1", UID: "u1", Generation: 1, State: AccountIncomplete, AllocationProjectID: projectA, AllocationLifecycle: LifecycleReady}}}, true, 1, 2, BindingPending, []string{ReasonAccountIncomplete}},
		{"ready account", BindingInputs{Member: true, SiteBinding: s1, Accounts: []BindingAccount{readyAccount("u1", 1)}}, true, 1, 3, BindingReady, []string{}},
		{"an older generation's account does not count", BindingInputs{Member: true, SiteBinding: s1, Accounts: []BindingAccount{readyAccount("u1", 1), readyAccount("u0", 0)}}, false, 1, 3, BindingReady, []string{}},
		{"removed from the Project", BindingInputs{SiteBinding: s1, Accounts: []BindingAccount{readyAccount("u1", 1)}}, true, 1, 4, BindingRetired, []string{ReasonMemberRemoved}},
		{"still removed, site binding retired too", BindingInputs{}, false, 1, 4, BindingRetired, []string{ReasonMemberRemoved}},
		{"added again: generation 2, the generation 1 account counts for nothing", BindingInputs{Member: true, SiteBinding: s1, Accounts: []BindingAccount{readyAccount("u1", 1)}}, true, 2, 5, BindingPending, []string{ReasonAccountMissing}},
		{"the recreated account of generation 2", BindingInputs{Member: true, SiteBinding: s1, Accounts: []BindingAccount{readyAccount("u1", 1), readyAccount("u2", 2)}}, true, 2, 6, BindingReady, []string{}},
		{"site binding replaced (new Beto binding)", BindingInputs{Member: true, SiteBinding: site("f52a1b3c-4d5e-4f6a-9b0c-1d2e3f4a5b6c", "alice", 1), Accounts: []BindingAccount{readyAccount("u2", 2)}}, true, 3, 7, BindingPending, []string{ReasonAccountMissing}},
		{"site binding retired", BindingInputs{Member: true}, true, 3, 8, BindingRetired, []string{ReasonSiteBindingRetired}},
	}
	var cur *MemberBinding
	for _, s := range steps {
		next, material := DeriveBinding(cur, key, s.in, now.Add(time.Duration(len(s.name))*time.Second))
		if material != s.material || next.Generation != s.gen || next.Revision != s.rev || next.State != s.state || !slices.Equal(next.Reasons, s.reasons) {
			t.Fatalf("%s: material %v, generation %d, revision %d, %s %v; want %v, %d, %d, %s %v", s.name, material, next.Generation, next.Revision, next.State, next.Reasons, s.material, s.gen, s.rev, s.state, s.reasons)
		}
		if next.ID != key.ID() || next.BindingKey != key {
			t.Fatalf("%s: identity %s %+v", s.name, next.ID, next.BindingKey)
		}
		if (next.State == BindingReady) != (next.Account.UID != "") {
			t.Fatalf("%s: state %s with account %+v", s.name, next.State, next.Account)
		}
		if !material && cur != nil && !next.ChangedAt.Equal(cur.ChangedAt) {
			t.Fatalf("%s: a change that is not material moved changed_at", s.name)
		}
		cur = &next
	}
	if cur.Site.ID != "f52a1b3c-4d5e-4f6a-9b0c-1d2e3f4a5b6c" {
		t.Fatalf("a retired binding keeps the site binding it rested on as evidence: %+v", cur.Site)
	}
}

func TestTheReadyAccountIsTheOneReadyAccountOfTheGenerationInTheProject(t *testing.T) {
	key := BindingKey{PartyID: partyA, ProjectID: projectA, Environment: "alpha-k8s"}
	s1 := site("e41f0a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b", "alice", 1)
	other := readyAccount("u9", 1)
	other.AllocationProjectID = projectB
	retired := readyAccount("u8", 1)
	retired.AllocationLifecycle = LifecycleRetired
	second := readyAccount("u7", 1)
	second.AllocationID = "alloc-2"
	for _, c := range []struct {
		name     string
		accounts []BindingAccount
		state    string
		reasons  []string
	}{
		{"an allocation of another Project", []BindingAccount{other}, BindingPending, []string{ReasonAccountMissing}},
		{"a retired allocation", []BindingAccount{retired}, BindingPending, []string{ReasonAccountMissing}},
		{"two allocations of the Project", []BindingAccount{readyAccount("u1", 1), second}, BindingPending, []string{ReasonAccountAmbiguous}},
		{"one ready among the others", []BindingAccount{other, retired, readyAccount("u1", 1)}, BindingReady, []string{}},
	} {
		b, _ := DeriveBinding(nil, key, BindingInputs{Member: true, SiteBinding: s1, Accounts: c.accounts}, now)
		if b.State != c.state || !slices.Equal(b.Reasons, c.reasons) {
			t.Errorf("%s: %s %v, want %s %v", c.name, b.State, b.Reasons, c.state, c.reasons)
		}
		if c.state == BindingReady && (b.Account != ReadyAccount{UID: "u1", AllocationID: "alloc-1", Namespace: "ns-1"}) {
			t.Errorf("%s: account %+v", c.name, b.Account)
		}
	}
}

func account(party, uid, binding string, gen int64, state string) ReportedAccount {
	return ReportedAccount{PartyID: party, Account: AccountName(party), UID: uid, BindingID: binding, Generation: gen, State: state}
}

func TestAccountReportValidationNamesEveryBadField(t *testing.T) {
	binding := BindingKey{PartyID: partyA, ProjectID: projectA, Environment: "alpha-k8s"}.ID()
	r := AccountReport{ProviderResourceID: "", ObservedAt: now.Add(500 * time.Nanosecond), Accounts: []ReportedAccount{
		account(partyA, "u1", binding, 1, AccountReady),
		{PartyID: partyB, Account: "member-somebody-else", UID: "", BindingID: "B", Generation: 0, State: "absent"},
		account(partyA, "u1", binding, 1, AccountReady),
	}}
	got := map[string]bool{}
	for _, p := range r.Validate("body") {
		got[p.Location] = true
	}
	for _, want := range []string{
		"body.provider_resource_id", "body.observed_at", "body.accounts[1].account", "body.accounts[1].uid",
		"body.accounts[1].binding_id", "body.accounts[1].generation", "body.accounts[1].state",
		"body.accounts[2].party_id", "body.accounts[2].uid",
	} {
		if !got[want] {
			t.Errorf("no problem at %s (got %v)", want, got)
		}
	}
	if got["body.accounts[0].party_id"] || got["body.accounts[0].account"] {
		t.Errorf("the first of two equal accounts is not the bad one: %v", got)
	}
	ok := AccountReport{ProviderResourceID: "r1", ObservedAt: now, Accounts: []ReportedAccount{account(partyA, "u1", binding, 1, AccountReady)}}
	if ps := ok.Validate("body"); len(ps) != 0 {
		t.Fatalf("a valid report: %+v", ps)
	}
	ok.Accounts[0].Account = "member-" + strings.ToUpper(partyA)
	if ps := ok.Validate("body"); len(ps) != 1 || ps[0].Location != "body.accounts[0].account" {
		t.Fatalf("an account named otherwise: %+v", ps)
	}
}

func TestMergingAReportReplacesTheSetAndKeepsEvidence(t *testing.T) {
	b1 := "11111111-1111-4111-8111-111111111111"
	stored := []NativeAccount{
		{AllocationID: "a", PartyID: partyA, UID: "u1", BindingID: b1, Generation: 1, Account: AccountName(partyA), State: AccountReady},
		{AllocationID: "a", PartyID: partyB, UID: "u5", BindingID: b1, Generation: 1, Account: AccountName(partyB), State: AccountReady},
		{AllocationID: "a", PartyID: partyB, UID: "u4", BindingID: b1, Generation: 1, Account: AccountName(partyB), State: AccountAbsent},
	}
	r := AccountReport{ProviderResourceID: "r", ObservedAt: now, Accounts: []ReportedAccount{
		account(partyA, "u2", b1, 1, AccountReady), // recreated: a new UID
	}}
	rows := MergeAccounts("a", stored, r, now.Add(time.Second))
	byUID := map[string]NativeAccount{}
	for _, a := range rows {
		byUID[a.UID] = a
	}
	if len(rows) != 3 || byUID["u2"].State != AccountReady || byUID["u1"].State != AccountAbsent || byUID["u5"].State != AccountAbsent {
		t.Fatalf("rows %+v: want u2 ready (new), u1 and u5 absent, u4 untouched", rows)
	}
	if !byUID["u1"].Since.Equal(now) || !byUID["u1"].ChangedAt.Equal(now.Add(time.Second)) {
		t.Fatalf("since %s changed_at %s", byUID["u1"].Since, byUID["u1"].ChangedAt)
	}
	again := MergeAccounts("a", []NativeAccount{{AllocationID: "a", PartyID: partyA, UID: "u2", BindingID: b1, Generation: 1, State: AccountReady}}, r, now)
	if len(again) != 0 {
		t.Fatalf("the same set again changed %+v", again)
	}
	if r.ContentDigest() == (AccountReport{ProviderResourceID: "r", Accounts: []ReportedAccount{account(partyA, "u2", b1, 2, AccountReady)}}).ContentDigest() {
		t.Fatal("the digest ignores the generation")
	}
	swapped := AccountReport{ProviderResourceID: "r", Accounts: []ReportedAccount{account(partyB, "u9", b1, 1, AccountReady), account(partyA, "u2", b1, 1, AccountReady)}}
	ordered := AccountReport{ProviderResourceID: "r", Accounts: []ReportedAccount{account(partyA, "u2", b1, 1, AccountReady), account(partyB, "u9", b1, 1, AccountReady)}}
	if swapped.ContentDigest() != ordered.ContentDigest() {
		t.Fatal("the digest depends on the accounts' order")
	}
}

func TestAccountReportOrder(t *testing.T) {
	r := AccountReport{ProviderResourceID: "r", ObservedAt: now}
	set, outcome := NextAccountSet(nil, "a", r, false, now)
	if outcome != OutcomeCreated || set.Revision != 1 {
		t.Fatalf("first: %s %+v", outcome, set)
	}
	if dup, ref := CheckAccountOrder(&set, r); !dup || ref != nil {
		t.Fatalf("the same report again: %v %v", dup, ref)
	}
	other := r
	other.Accounts = []ReportedAccount{account(partyA, "u1", "11111111-1111-4111-8111-111111111111", 1, AccountReady)}
	if _, ref := CheckAccountOrder(&set, other); ref == nil || ref.Reason != ReasonReportConflict {
		t.Fatalf("same observed_at, other content: %v", ref)
	}
	older := r
	older.ObservedAt = now.Add(-time.Microsecond)
	if _, ref := CheckAccountOrder(&set, older); ref == nil || ref.Reason != ReasonStaleReport {
		t.Fatalf("older: %v", ref)
	}
	newer := other
	newer.ObservedAt = now.Add(time.Second)
	if dup, ref := CheckAccountOrder(&set, newer); dup || ref != nil {
		t.Fatalf("newer: %v %v", dup, ref)
	}
	next, outcome := NextAccountSet(&set, "a", newer, true, now.Add(-time.Hour))
	if outcome != OutcomeChanged || next.Revision != 2 || !next.LastSeenAt.Equal(now) {
		t.Fatalf("changed: %s %+v (last_seen_at never moves backwards)", outcome, next)
	}
	if _, outcome := NextAccountSet(&next, "a", newer, false, now); outcome != OutcomeRenewed {
		t.Fatalf("unchanged: %s", outcome)
	}
}

// TestASlurmBindingHoldsItsAccountNameAndWaitsForATakenOne: the binding's
// account name is part of its generation (a new name, as when the
// environment's backend changes, is generation + 1), and a binding whose
// account or ready account's UID another Party holds is pending
// account_taken without an account, until that Party lets it go
// (docs/resource-provisioning.md#one-party-per-account).
func TestASlurmBindingHoldsItsAccountNameAndWaitsForATakenOne(t *testing.T) {
	key := BindingKey{PartyID: partyA, ProjectID: projectA, Environment: "alpha-hpc"}
	s1 := site("e41f0a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b", "jdoe", 1)
	live := func(name string, taken bool, uids map[string]bool, accounts ...BindingAccount) BindingInputs {
		return BindingInputs{Member: true, SiteBinding: s1, Accounts: accounts, NativeName: name, AccountTaken: taken, TakenUIDs: uids}
	}
	b, ok := DeriveBinding(nil, key, live("jdoe", true, nil), now)
	if !ok || b.State != BindingPending || !slices.Equal(b.Reasons, []string{ReasonAccountTaken}) || b.AccountName() != "jdoe" || b.Generation != 1 {
		t.Fatalf("a binding whose account another Party holds: %+v", b)
	}
	b, ok = DeriveBinding(&b, key, live("jdoe", false, nil, readyAccount("1001", 1)), now)
	if !ok || b.State != BindingReady || b.Account.UID != "1001" || b.Generation != 1 || b.Revision != 2 {
		t.Fatalf("once the account is free: %+v", b)
	}
	b, ok = DeriveBinding(&b, key, live("jdoe", false, map[string]bool{"1001": true}, readyAccount("1001", 1)), now)
	if !ok || b.State != BindingPending || !slices.Equal(b.Reasons, []string{ReasonAccountTaken}) || b.Account != (ReadyAccount{}) {
		t.Fatalf("a ready account whose uid another Party holds: %+v", b)
	}
	b, ok = DeriveBinding(&b, key, live("member-"+partyA, false, nil), now)
	if !ok || b.Generation != 2 || b.AccountName() != "member-"+partyA || b.State != BindingPending || !slices.Equal(b.Reasons, []string{ReasonAccountMissing}) {
		t.Fatalf("another account name (the backend changed): %+v, want generation 2", b)
	}
}

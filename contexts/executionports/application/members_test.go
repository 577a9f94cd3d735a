package application

import (
	"errors"
	"slices"
	"testing"
)

func TestTheReadyAccountIsChosenOnlyWhenItIsTheOnlyOne(t *testing.T) {
	k8s := AccountState{MemberAccount: MemberAccount{Environment: "alpha-k8s", UID: "u1"}, State: "ready"}
	hpc := AccountState{MemberAccount: MemberAccount{Environment: "alpha-hpc", UID: "u2"}, State: "ready"}
	pending := AccountState{MemberAccount: MemberAccount{Environment: "alpha-hpc"}, State: "pending", Reasons: []string{"account_missing"}}
	retired := AccountState{MemberAccount: MemberAccount{Environment: "alpha-k8s"}, State: "retired", Reasons: []string{"member_removed"}}
	if a, err := ChooseReadyAccount("m", "p", "alpha", []AccountState{k8s, pending}); err != nil || a.UID != "u1" {
		t.Fatalf("one ready: %+v %v", a, err)
	}
	for _, c := range []struct {
		name    string
		states  []AccountState
		reasons []string
	}{
		{"no binding", nil, []string{ReasonNoBinding}},
		{"none ready", []AccountState{retired, pending}, []string{"alpha-k8s: member_removed", "alpha-hpc: account_missing"}},
		{"two ready", []AccountState{k8s, hpc}, []string{ReasonAccountAmbiguous + " (alpha-hpc, alpha-k8s)"}},
	} {
		a, err := ChooseReadyAccount("m", "p", "alpha", c.states)
		var nre *NoReadyAccountError
		if !errors.Is(err, ErrNoReadyAccount) || !errors.As(err, &nre) || !slices.Equal(nre.Reasons, c.reasons) || a != (MemberAccount{}) {
			t.Errorf("%s: %+v %v", c.name, a, err)
		}
	}
}

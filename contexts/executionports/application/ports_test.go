package application

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestMemberPortsRefuseExplicitlyUntilNativeAccountsAreBuilt(t *testing.T) {
	u := UnbuiltMemberPorts{Owner: "resource_provisioning"}
	var accounts MemberAccounts = u
	var bindings MemberBindings = u
	if a, err := accounts.ReadyAccount(context.Background(), "m", "p", "alpha"); !errors.Is(err, ErrNotProvidedYet) || a != (MemberAccount{}) || !strings.Contains(err.Error(), "resource_provisioning") {
		t.Fatalf("accounts: %+v, %v", a, err)
	}
	if b, err := bindings.DesiredBindings(context.Background(), "alpha-k8s"); !errors.Is(err, ErrNotProvidedYet) || b != nil {
		t.Fatalf("bindings: %+v, %v", b, err)
	}
}

func TestWakeupsWakeEveryWaiterOfTheEnvironmentOnly(t *testing.T) {
	w := NewWakeups()
	a1, a2, b := w.Watch("alpha"), w.Watch("alpha"), w.Watch("beta")
	w.Notify("alpha")
	for _, ch := range []<-chan struct{}{a1, a2} {
		select {
		case <-ch:
		default:
			t.Fatal("a waiter on alpha was not woken")
		}
	}
	select {
	case <-b:
		t.Fatal("a waiter on beta was woken by alpha's append")
	default:
	}
	w.NotifyAll()
	select {
	case <-b:
	default:
		t.Fatal("NotifyAll did not wake beta")
	}
}

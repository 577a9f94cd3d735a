package application

import (
	"testing"
)

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

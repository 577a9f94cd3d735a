package application

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
)

// changingEnvironments is a configuration whose environments a test replaces, as a reload does.
type changingEnvironments struct {
	mu  sync.Mutex
	ids []string
}

func (c *changingEnvironments) set(ids ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids = slices.Sorted(slices.Values(ids))
}

func (c *changingEnvironments) Environment(id string) (domain.Environment, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return domain.Environment{ID: id, Site: "alpha", Authority: "https://metallo.example.org", Backend: "kubernetes"}, slices.Contains(c.ids, id)
}

func (c *changingEnvironments) IDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ids)
}

// emptyStreams is a store of empty, unbound streams that says when a pull has read.
type emptyStreams struct {
	StreamStore
	read chan struct{}
}

func (s emptyStreams) State(context.Context, string) (domain.StreamState, error) {
	return domain.StreamState{}, nil
}

func (s emptyStreams) CommandsAfter(context.Context, string, int64, int, int64) ([]StoredCommand, error) {
	select {
	case s.read <- struct{}{}:
	default:
	}
	return nil, nil
}

type fixedClock struct{}

func (fixedClock) Now() time.Time { return time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC) }

// A pull waiting on an environment the configuration no longer holds ends, woken as a reload
// wakes every waiter, with domain.ErrUnknownEnvironment (404 unknown-environment): it is never
// answered as if the environment were still configured.
func TestAWaitingPullOfARemovedEnvironmentEndsUnknown(t *testing.T) {
	envs := &changingEnvironments{}
	envs.set("alpha-k8s", "beta-k8s")
	store := emptyStreams{read: make(chan struct{}, 1)}
	w := NewWakeups()
	s := NewStreams(store, envs, fixedClock{}, w, time.Hour)
	done := make(chan error, 1)
	go func() {
		_, err := s.Pull(t.Context(), PullQuery{Environment: "beta-k8s", Installation: "i1", After: 0, Limit: 10, Wait: time.Hour})
		done <- err
	}()
	<-store.read // the pull has read an empty stream and waits
	envs.set("alpha-k8s")
	w.NotifyAll()
	if err := <-done; !errors.Is(err, domain.ErrUnknownEnvironment) {
		t.Fatalf("the waiting pull ended with %v; want ErrUnknownEnvironment", err)
	}
}

// The deliverer delivers to the environments configured at each pass: an added environment
// from the next pass on, a removed one no longer.
func TestTheDelivererFollowsTheEnvironmentsInUse(t *testing.T) {
	envs := &changingEnvironments{}
	envs.set("alpha-k8s")
	d := NewDeliverer(nil, NewStreams(emptyStreams{}, envs, fixedClock{}, NewWakeups(), 0), nil, fixedClock{})
	if got := d.Environments(); !slices.Equal(got, []string{"alpha-k8s"}) || !d.Delivers("alpha-k8s") || d.Delivers("gamma-k8s") {
		t.Fatalf("first version: %v", got)
	}
	envs.set("gamma-k8s", "beta-k8s")
	if got := d.Environments(); !slices.Equal(got, []string{"beta-k8s", "gamma-k8s"}) || d.Delivers("alpha-k8s") || !d.Delivers("gamma-k8s") {
		t.Fatalf("second version: %v", got)
	}
}

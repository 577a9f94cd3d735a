package application_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/clock"
)

func TestCheckReadsStateAndPullsOnceWithoutEverSendingAResult(t *testing.T) {
	site := newFakeSite()
	site.appendCommands(t, observe(t, 1))
	transient := fmt.Errorf("%w: connection refused", application.ErrTransient)
	site.failNext = []error{transient, transient}
	rep, err := application.NewChecker(site, env, authority, time.Minute, clock.System{}).Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Next == nil || rep.Next.Sequence != 1 || rep.State.HeadSequence != 1 {
		t.Fatalf("report %+v", rep)
	}
	if _, puts, _ := site.state(); len(puts) != 0 {
		t.Fatal("check sent a result")
	}
	// The pull is read-only (SiteReader.Peek: wait=0, bind=false), never
	// the worker's binding pull.
	if site.pulls != 0 || site.peeks != 1 {
		t.Fatalf("pulls=%d peeks=%d; want one read-only pull", site.pulls, site.peeks)
	}
}

func TestCheckGivesUpOnAnUnreachableSiteAfterItsBoundWithTheReason(t *testing.T) {
	site := newFakeSite()
	for range 1000 {
		site.failNext = append(site.failNext, fmt.Errorf("%w: dial tcp: connection refused", application.ErrTransient))
	}
	start := time.Now()
	_, err := application.NewChecker(site, env, authority, 300*time.Millisecond, clock.System{}).Check(context.Background())
	if !errors.Is(err, application.ErrTransient) {
		t.Fatalf("want the connection failure as the reason, got %v", err)
	}
	if time.Since(start) < 300*time.Millisecond || len(site.failNext) > 998 {
		t.Fatalf("gave up after %v and %d attempts; want retries for the whole bound", time.Since(start), 1000-len(site.failNext))
	}
	if site.pulls != 0 || site.peeks != 0 {
		t.Fatalf("pulled %d times, peeked %d times, before the stream state was read", site.pulls, site.peeks)
	}
}

func TestCheckFailsAtOnceOnAProblemAnswer(t *testing.T) {
	site := newFakeSite()
	site.failNext = []error{&application.Problem{Status: 403, Reason: "forbidden", Detail: "environment:beta-k8s may not read alpha-k8s"}}
	_, err := application.NewChecker(site, env, authority, time.Minute, clock.System{}).Check(context.Background())
	var p *application.Problem
	if !errors.As(err, &p) || p.Reason != "forbidden" {
		t.Fatalf("got %v", err)
	}
}

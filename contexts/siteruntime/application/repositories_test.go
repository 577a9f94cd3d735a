package application_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// fakeGrants stands in for the repository grant provider (outside this
// project): it answers err, or a grant, and records the requests.
type fakeGrants struct {
	err  error
	reqs []domain.GrantRequest
}

func (f *fakeGrants) Issue(_ context.Context, r domain.GrantRequest) (domain.RepositoryGrant, error) {
	f.reqs = append(f.reqs, r)
	if f.err != nil {
		return domain.RepositoryGrant{}, f.err
	}
	return domain.RepositoryGrant{GrantID: "g-1", Username: "u", Token: "t", ExpiresAt: time.Now().Add(time.Hour)}, nil
}

func (f *fakeGrants) Revoke(context.Context, string) error { return nil }

// A checkout's grant is asked for the command's member, Project, Run and
// Attempt under one key per Attempt; a denial is refused permission-denied
// and an unavailable provider refused credential-unavailable.
func TestACheckoutGrantIsKeyedByTheAttemptAndItsRefusalsAreNamed(t *testing.T) {
	cmd := siteprotocol.Command{ID: uuidN(1), MemberID: member, ProjectID: project, RunID: uuidN(1001), AttemptID: uuidN(2001)}
	url := "https://git.example.org/lab/model.git"
	f := &fakeGrants{}
	for range 2 {
		g, refusal, err := application.IssueCheckoutGrant(context.Background(), f, cmd, url)
		if err != nil || refusal != nil || g.GrantID != "g-1" {
			t.Fatalf("issued %v %v %v", g, refusal, err)
		}
	}
	if len(f.reqs) != 2 || f.reqs[0] != f.reqs[1] || f.reqs[0].IdempotencyKey != application.GrantKey(cmd.AttemptID) ||
		f.reqs[0].MemberID != member || f.reqs[0].ProjectID != project || f.reqs[0].RunID != cmd.RunID || f.reqs[0].RepositoryURL != url {
		t.Fatalf("requests %+v", f.reqs)
	}
	for err, want := range map[error]siteprotocol.Reason{
		fmt.Errorf("%w: no", application.ErrGrantDenied):           siteprotocol.ReasonPermissionDenied,
		fmt.Errorf("%w: timeout", application.ErrGrantUnavailable): siteprotocol.ReasonCredentialUnavailable,
	} {
		_, refusal, e := application.IssueCheckoutGrant(context.Background(), &fakeGrants{err: err}, cmd, url)
		if e != nil || refusal == nil || refusal.Reason != want || refusal.Outcome != siteprotocol.OutcomeRefused {
			t.Errorf("%v: refusal %+v, error %v", err, refusal, e)
		}
	}
	if _, refusal, e := application.IssueCheckoutGrant(context.Background(), &fakeGrants{err: context.Canceled}, cmd, url); refusal != nil || !errors.Is(e, context.Canceled) {
		t.Errorf("a cancelled issue: %v %v", refusal, e)
	}
}

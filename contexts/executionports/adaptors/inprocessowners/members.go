package inprocessowners

import (
	"context"
	"fmt"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	rpapp "github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
)

// ReadyAccount implements application.MemberAccounts: the owner's bindings
// of the member in the Project at the Site's environments, read live, and
// the one ready account among them (docs/execution-ports.md#member-accounts-and-bindings).
// Any owner error is application.ErrResourceLookupUnavailable.
func (r *Resources) ReadyAccount(ctx context.Context, memberID, projectID, site string) (application.MemberAccount, error) {
	views, err := r.owner.ProjectAccounts(ctx, projectID, site, memberID)
	if err != nil {
		return application.MemberAccount{}, fmt.Errorf("%w: %s: %w", application.ErrResourceLookupUnavailable, OwnerName, err)
	}
	states := make([]application.AccountState, 0, len(views))
	for _, v := range views {
		states = append(states, accountState(v))
	}
	return application.ChooseReadyAccount(memberID, projectID, site, states)
}

func accountState(v rpapp.AccountView) application.AccountState {
	return application.AccountState{
		MemberAccount: application.MemberAccount{
			PartyID: v.PartyID, ProjectID: v.ProjectID, Site: v.Site, Environment: v.Environment, Account: v.Account,
			UID: v.UID, Namespace: v.Namespace, AllocationID: v.AllocationID, BindingID: v.BindingID,
			Generation: v.Generation, Revision: v.Revision, ObservedAt: v.ObservedAt, LastSeenAt: v.LastSeenAt, Fresh: v.Fresh,
		},
		State: v.State, Reasons: v.Reasons,
	}
}

// DesiredBindings implements application.MemberBindings: every page of the
// owner's desired-binding read of environment, read live; the changes
// cursor is the first page's. Any owner error (an environment it does not
// know included) is application.ErrResourceLookupUnavailable.
func (r *Resources) DesiredBindings(ctx context.Context, environment string) (application.DesiredBindings, error) {
	out := application.DesiredBindings{Environment: environment}
	after := ""
	for {
		page, err := r.owner.DesiredBindings(ctx, environment, after, rpapp.MaxPageLimit)
		if err != nil {
			return application.DesiredBindings{}, fmt.Errorf("%w: %s: %w", application.ErrResourceLookupUnavailable, OwnerName, err)
		}
		if page.First {
			out.Site, out.ChangesCursor = page.Site, rpapp.FeedCursor(page.ChangesHead)
		}
		for _, e := range page.Entries {
			b := e.Binding
			if b == nil {
				out.Unbound = append(out.Unbound, application.UnboundMember{PartyID: e.PartyID, ProjectID: e.ProjectID, Reasons: e.Reasons})
				continue
			}
			out.Bindings = append(out.Bindings, application.MemberBinding{
				PartyID: b.PartyID, ProjectID: b.ProjectID, Environment: b.Environment, Namespace: b.Account.Namespace,
				Account: b.AccountName(), BindingID: b.ID, Revision: b.Revision, Generation: b.Generation,
				Retired: b.State == "retired", State: b.State, Reasons: append([]string{}, b.Reasons...), AccountUID: b.Account.UID,
			})
		}
		if page.After == "" {
			return out, nil
		}
		after = page.After
	}
}

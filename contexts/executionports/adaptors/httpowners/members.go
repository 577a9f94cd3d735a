package httpowners

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
)

// AccountJSON is one member binding in the owner's account read.
type AccountJSON struct {
	PartyID      string    `json:"party_id"`
	ProjectID    string    `json:"project_id"`
	Site         string    `json:"site"`
	Environment  string    `json:"environment"`
	BindingID    string    `json:"binding_id"`
	Account      string    `json:"account"`
	Generation   int64     `json:"generation"`
	Revision     int64     `json:"revision"`
	State        string    `json:"state"`
	Reasons      []string  `json:"reasons"`
	UID          string    `json:"uid"`
	AllocationID string    `json:"allocation_id"`
	Namespace    string    `json:"namespace"`
	ObservedAt   time.Time `json:"observed_at"`
	LastSeenAt   time.Time `json:"last_seen_at"`
	Fresh        *bool     `json:"fresh"`
}

// ReadyAccount implements application.MemberAccounts: the owner's
// GET /resource-provisioning/projects/{project}/accounts?site=&party=, read
// live, and the one ready account among the answer (docs/execution-ports.md#member-accounts-and-bindings).
func (r *Resources) ReadyAccount(ctx context.Context, memberID, projectID, site string) (application.MemberAccount, error) {
	u := r.base.JoinPath("resource-provisioning", "projects", projectID, "accounts")
	u.RawQuery = url.Values{"site": {site}, "party": {memberID}}.Encode()
	var a struct {
		Accounts []AccountJSON `json:"accounts"`
	}
	if err := r.get(ctx, u, &a); err != nil {
		return application.MemberAccount{}, err
	}
	if a.Accounts == nil {
		return application.MemberAccount{}, fmt.Errorf("%w: answer of GET %s has no accounts member", application.ErrResourceLookupUnavailable, u.Redacted())
	}
	states := make([]application.AccountState, 0, len(a.Accounts))
	for i, v := range a.Accounts {
		if v.BindingID == "" || v.State == "" || v.Fresh == nil || v.PartyID != memberID || v.ProjectID != projectID || (v.State == "ready" && v.UID == "") {
			return application.MemberAccount{}, fmt.Errorf("%w: answer of GET %s: accounts[%d] is not an account of member %s in Project %s with binding_id, state, fresh and (when ready) uid", application.ErrResourceLookupUnavailable, u.Redacted(), i, memberID, projectID)
		}
		states = append(states, application.AccountState{
			MemberAccount: application.MemberAccount{
				PartyID: v.PartyID, ProjectID: v.ProjectID, Site: v.Site, Environment: v.Environment, Account: v.Account,
				UID: v.UID, Namespace: v.Namespace, AllocationID: v.AllocationID, BindingID: v.BindingID,
				Generation: v.Generation, Revision: v.Revision, ObservedAt: v.ObservedAt, LastSeenAt: v.LastSeenAt, Fresh: *v.Fresh,
			},
			State: v.State, Reasons: v.Reasons,
		})
	}
	return application.ChooseReadyAccount(memberID, projectID, site, states)
}

// BindingJSON is a member binding in the owner's desired-binding read.
type BindingJSON struct {
	BindingID   string   `json:"binding_id"`
	PartyID     string   `json:"party_id"`
	ProjectID   string   `json:"project_id"`
	Environment string   `json:"environment"`
	Account     string   `json:"account"`
	Generation  int64    `json:"generation"`
	Revision    int64    `json:"revision"`
	State       string   `json:"state"`
	Reasons     []string `json:"reasons"`
	AccountUID  string   `json:"account_uid"`
	Namespace   string   `json:"namespace"`
}

type bindingsPage struct {
	Environment string `json:"environment"`
	Site        string `json:"site"`
	Entries     []struct {
		ProjectID string       `json:"project_id"`
		PartyID   string       `json:"party_id"`
		Binding   *BindingJSON `json:"binding"`
		Reasons   []string     `json:"reasons"`
	} `json:"entries"`
	NextCursor    string `json:"next_cursor"`
	ChangesCursor string `json:"changes_cursor"`
}

// maxBindingPages bounds one DesiredBindings read (1,000 entries a page).
const maxBindingPages = 10000

// DesiredBindings implements application.MemberBindings: every page of
// GET /resource-provisioning/environments/{environment}/bindings, read live;
// the changes cursor is the first page's. Any failure to read a
// well-formed page (an environment the owner does not know, 404,
// included) is application.ErrResourceLookupUnavailable.
func (r *Resources) DesiredBindings(ctx context.Context, environment string) (application.DesiredBindings, error) {
	out := application.DesiredBindings{Environment: environment}
	cursor := ""
	for page := 0; page < maxBindingPages; page++ {
		u := r.base.JoinPath("resource-provisioning", "environments", environment, "bindings")
		q := url.Values{"limit": {"1000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		u.RawQuery = q.Encode()
		var p bindingsPage
		if err := r.get(ctx, u, &p); err != nil {
			return application.DesiredBindings{}, err
		}
		if p.Entries == nil || p.Environment != environment || p.Site == "" || (page == 0 && p.ChangesCursor == "") {
			return application.DesiredBindings{}, fmt.Errorf("%w: answer of GET %s lacks entries, its environment, its Site or (first page) changes_cursor", application.ErrResourceLookupUnavailable, u.Redacted())
		}
		if page == 0 {
			out.Site, out.ChangesCursor = p.Site, p.ChangesCursor
		}
		for i, e := range p.Entries {
			b := e.Binding
			if b == nil {
				out.Unbound = append(out.Unbound, application.UnboundMember{PartyID: e.PartyID, ProjectID: e.ProjectID, Reasons: e.Reasons})
				continue
			}
			if b.BindingID == "" || b.State == "" || b.Generation < 1 || b.Revision < 1 || b.Environment != environment {
				return application.DesiredBindings{}, fmt.Errorf("%w: answer of GET %s: entries[%d].binding lacks binding_id, state, generation or revision, or is of another environment", application.ErrResourceLookupUnavailable, u.Redacted(), i)
			}
			out.Bindings = append(out.Bindings, application.MemberBinding{
				PartyID: b.PartyID, ProjectID: b.ProjectID, Environment: b.Environment, Namespace: b.Namespace, Account: b.Account,
				BindingID: b.BindingID, Revision: b.Revision, Generation: b.Generation, Retired: b.State == "retired",
				State: b.State, Reasons: b.Reasons, AccountUID: b.AccountUID,
			})
		}
		if p.NextCursor == "" {
			return out, nil
		}
		cursor = p.NextCursor
	}
	return application.DesiredBindings{}, fmt.Errorf("%w: the desired bindings of %s span more than %d pages", application.ErrResourceLookupUnavailable, environment, maxBindingPages)
}

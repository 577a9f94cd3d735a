package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
)

type projectAccountsInput struct {
	Project string `path:"project" pattern:"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$" doc:"Canonical Project ID: a lower-case UUID." example:"7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"`
	Site    string `query:"site" pattern:"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$" doc:"Only this Site's environments; every environment when absent." example:"alpha"`
	Party   string `query:"party" pattern:"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$" doc:"Only this Party (a lower-case UUID)." example:"9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"`
}

// AccountViewBody is a member's binding at an environment with its ready
// account (the JSON form of application.AccountView).
type AccountViewBody struct {
	PartyID      string    `json:"party_id" example:"9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"`
	ProjectID    string    `json:"project_id" example:"7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"`
	Site         string    `json:"site" doc:"The environment's Site (empty for an environment not configured)." example:"alpha"`
	Environment  string    `json:"environment" example:"alpha-k8s"`
	BindingID    string    `json:"binding_id" example:"edf0dbce-a8c3-5a1d-8d34-0e0ff66583ab"`
	Account      string    `json:"account" example:"member-9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"`
	Generation   int64     `json:"generation" example:"1"`
	Revision     int64     `json:"revision" example:"2"`
	State        string    `json:"state" enum:"ready,pending,retired" example:"ready"`
	Reasons      []string  `json:"reasons" example:"[]"`
	UID          string    `json:"uid" doc:"The ready account's UID; empty unless ready." example:"3b0c6a52-6f1d-4c1e-9f0a-2d7e5b8c9a41"`
	AllocationID string    `json:"allocation_id" doc:"Empty unless ready."`
	Namespace    string    `json:"namespace" doc:"Empty unless ready." example:"waldur-alpha-gpu-ns"`
	ObservedAt   time.Time `json:"observed_at" doc:"The agent's observation time of the newest account report of the ready account's allocation (zero unless ready)."`
	LastSeenAt   time.Time `json:"last_seen_at" doc:"The server's receipt time of it (zero unless ready)."`
	Fresh        bool      `json:"fresh" doc:"false when last_seen_at is older than the freshness bound at read time (always false unless ready)."`
}

type projectAccountsOutput struct {
	Body struct {
		Accounts []AccountViewBody `json:"accounts"`
	}
}

func (h *Handlers) projectAccountsOperation() huma.Operation {
	return readerOperation(huma.Operation{
		OperationID: "project-accounts",
		Method:      http.MethodGet,
		Path:        "/resource-provisioning/projects/{project}/accounts",
		Summary:     "A Project's member accounts: the ready ones with their UIDs",
		Description: "The member bindings of a canonical Project at the environments of one Site (`site`) or all, " +
			"of one Party (`party`) or all: `state` `ready` with the ready account's `uid`, namespace and " +
			"allocation, or `pending` / `retired` with `reasons`. `fresh` is false when the account report it " +
			"came from was received longer ago than the freshness bound (default 15 minutes). A store that " +
			"cannot be read is 503, never a guess."}, readReasons())
}

// projectAccounts answers a Project's member bindings with their ready accounts.
func (h *Handlers) projectAccounts(ctx context.Context, in *projectAccountsInput) (*projectAccountsOutput, error) {
	vs, err := h.Service.ProjectAccounts(ctx, in.Project, in.Site, in.Party)
	if err != nil {
		return nil, h.problem(ctx, err)
	}
	out := &projectAccountsOutput{}
	out.Body.Accounts = make([]AccountViewBody, 0, len(vs))
	for _, v := range vs {
		out.Body.Accounts = append(out.Body.Accounts, AccountViewBody{
			PartyID: v.PartyID, ProjectID: v.ProjectID, Site: v.Site, Environment: v.Environment, BindingID: v.BindingID,
			Account: v.Account, Generation: v.Generation, Revision: v.Revision, State: v.State, Reasons: v.Reasons,
			UID: v.UID, AllocationID: v.AllocationID, Namespace: v.Namespace, ObservedAt: v.ObservedAt, LastSeenAt: v.LastSeenAt, Fresh: v.Fresh,
		})
	}
	return out, nil
}

package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
)

type allocationAccountsInput struct {
	Allocation string `path:"allocation" pattern:"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$" doc:"The allocation ID." example:"6c3d1f0e-8f7b-5a55-9d43-0c2f3e1b9a77"`
}

// NativeAccountBody is one stored account of an allocation.
type NativeAccountBody struct {
	PartyID    string    `json:"party_id"`
	Account    string    `json:"account"`
	UID        string    `json:"uid"`
	BindingID  string    `json:"binding_id"`
	Generation int64     `json:"generation"`
	State      string    `json:"state" enum:"ready,incomplete,absent"`
	Since      time.Time `json:"since" doc:"The observed_at of the report that set the state."`
	ChangedAt  time.Time `json:"changed_at" doc:"The server time the state was set."`
}

type allocationAccountsOutput struct {
	Body struct {
		Accounts []NativeAccountBody `json:"accounts"`
	}
}

func (h *Handlers) allocationAccountsOperation() huma.Operation {
	return readerOperation(huma.Operation{
		OperationID: "allocation-accounts",
		Method:      http.MethodGet,
		Path:        "/resource-provisioning/allocations/{allocation}/accounts",
		Summary:     "Every account reported in an allocation (the evidence)",
		Description: "Every native account an agent ever reported in the allocation's scope — `ready`, `incomplete` " +
			"and `absent`, every generation — by Party, UID, binding and generation, with `since` (the " +
			"observed_at of the report that set the state)."}, readReasons())
}

// allocationAccounts answers every account reported in an allocation.
func (h *Handlers) allocationAccounts(ctx context.Context, in *allocationAccountsInput) (*allocationAccountsOutput, error) {
	as, err := h.Service.NativeAccounts(ctx, in.Allocation)
	if err != nil {
		return nil, h.problem(ctx, err)
	}
	out := &allocationAccountsOutput{}
	out.Body.Accounts = make([]NativeAccountBody, 0, len(as))
	for _, n := range as {
		out.Body.Accounts = append(out.Body.Accounts, NativeAccountBody{
			PartyID: n.PartyID, Account: n.Account, UID: n.UID, BindingID: n.BindingID, Generation: n.Generation,
			State: n.State, Since: n.Since, ChangedAt: n.ChangedAt,
		})
	}
	return out, nil
}

package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// Native member accounts and Runtime member bindings on HTTP
// (docs/resource-provisioning.md#native-member-accounts): the agent's
// account report (here) and lookup (account_lookup.go), and the reads of the
// desired bindings, the ready accounts and an allocation's account evidence.

// MaxAccountsBodyBytes bounds an account report's body (10,000 accounts of
// about 250 bytes each fit).
const MaxAccountsBodyBytes = 4 << 20

// AccountBody is one reported native account.
type AccountBody struct {
	PartyID    string `json:"party_id" doc:"The Party (a lower-case UUID)." example:"9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"`
	Account    string `json:"account" doc:"The account's name, by its binding's environment's backend: exactly member-<party_id> at a kubernetes environment, the Party's site username (a POSIX user name) at a slurm one." example:"member-9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"`
	UID        string `json:"uid" doc:"The Site's UID of the account (for Kubernetes, the ServiceAccount's metadata.uid; for Slurm, the Unix uid in decimal); 1 to 256 bytes." example:"3b0c6a52-6f1d-4c1e-9f0a-2d7e5b8c9a41"`
	BindingID  string `json:"binding_id" doc:"The member binding the account serves, as the account lookup answered it (a lower-case UUID)." example:"edf0dbce-a8c3-5a1d-8d34-0e0ff66583ab"`
	Generation int64  `json:"generation" doc:"The member binding's generation written on the account (at least 1)." example:"1"`
	State      string `json:"state" doc:"ready (the account and all its Roles and bindings exist) or incomplete (an interrupted provisioning)." example:"ready"`
}

type submitAccountsInput struct {
	Site string `path:"site" pattern:"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$" doc:"The Site; must match the caller's site:<id> key." example:"alpha"`
	Body struct {
		ProviderResourceID string        `json:"provider_resource_id" doc:"The Waldur resource UUID of the allocation (as in its reports)." example:"3f1c9a0e6b2d4c0f9a7e5d1b2c3a4f50"`
		ObservedAt         time.Time     `json:"observed_at" doc:"When the agent listed the accounts (orders the account reports of one allocation; microsecond precision)." example:"2026-08-20T10:15:02.123456Z"`
		Accounts           []AccountBody `json:"accounts" doc:"Every member account of the allocation's native scope (0 to 10,000); an account not listed becomes absent."`
	}
}

// AccountOutcomeBody is one reported account after the report.
type AccountOutcomeBody struct {
	PartyID           string `json:"party_id"`
	UID               string `json:"uid"`
	BindingID         string `json:"binding_id"`
	Generation        int64  `json:"generation"`
	State             string `json:"state" enum:"ready,incomplete"`
	BindingState      string `json:"binding_state" enum:"ready,pending,retired" doc:"The binding's state after the report."`
	BindingGeneration int64  `json:"binding_generation" doc:"The binding's generation after the report: an account of an older one is evidence only."`
	Current           bool   `json:"current" doc:"This account is its binding's ready account."`
}

type submitAccountsOutput struct {
	Body struct {
		AllocationID string               `json:"allocation_id" example:"6c3d1f0e-8f7b-5a55-9d43-0c2f3e1b9a77"`
		Outcome      string               `json:"outcome" enum:"created,changed,renewed,duplicate" example:"created"`
		Revision     int64                `json:"revision" doc:"The allocation's account set revision: counts reports that changed an account." example:"1"`
		Accounts     []AccountOutcomeBody `json:"accounts" doc:"The reported accounts, in request order."`
	}
}

func (h *Handlers) submitAccountsOperation(reg huma.Registry) huma.Operation {
	return reporterOperation(huma.Operation{
		OperationID: "submit-accounts",
		Method:      http.MethodPost,
		Path:        "/resource-provisioning/{site}/accounts",
		Summary:     "Report the member accounts of one allocation's native scope",
		Description: "After each cycle the Site's agent posts, per allocation (named by its Waldur resource), the " +
			"complete set of member accounts it found in the allocation's native scope, each named by what it wrote " +
			"on the account: `party_id`, the name `account` (by the binding's backend: exactly `member-<party_id>` at a " +
			"kubernetes environment, the Party's site username at a slurm one; any other is 422), the " +
			"Site's `uid` (at a slurm environment the decimal Unix uid), the `binding_id` and `generation` the account lookup answered, and `state` " +
			"`ready` or `incomplete`. The set replaces the allocation's last one, all or nothing in one transaction: " +
			"an account no longer listed becomes `absent`; an account of an older generation is kept as evidence " +
			"and counts for nothing; the UID is part of an account's key, so an account made again under the same " +
			"name is a new row. The answer is `created`, `changed`, `renewed` (newer, nothing changed) or " +
			"`duplicate`, with each account's binding after the report. 409 with reason `stale_report` (older " +
			"`observed_at` than the saved report), `report_conflict` (the saved `observed_at`, other accounts), " +
			"`allocation_unknown` (the Site has not reported the resource), `allocation_retired` (accounts listed " +
			"in a retired allocation) or `binding_mismatch` (per account: a binding not held here, another " +
			"Party's, or one of an environment that is not this Site's) refuses the whole report. Every bad field " +
			"(a party_id or binding_id that is not a lower-case UUID, another account name, an empty uid, a " +
			"generation below 1, another state, a Party or UID listed twice, an observed_at finer than a " +
			"microsecond or beyond the clock skew, more than 10,000 accounts) is named in one 422. " + bodyRules +
			" Only the key of `site:<site>` is admitted (any other key is 403 `forbidden` before the body is read).",
		MaxBodyBytes: MaxAccountsBodyBytes + 1, // guardJSONBody reads at most MaxAccountsBodyBytes
		Middlewares:  huma.Middlewares{guardJSONBody(reg, h.accountsBody)}}, intakeReasons(domain.ReasonStaleReport, domain.ReasonReportConflict, domain.ReasonAllocationUnknown, domain.ReasonAllocationRetired, domain.ReasonBindingMismatch))
}

// submitAccounts replaces one allocation's reported member accounts, all or nothing.
func (h *Handlers) submitAccounts(ctx context.Context, in *submitAccountsInput) (*submitAccountsOutput, error) {
	res, err := h.Service.SubmitAccounts(ctx, in.Site, accountReportOf(in))
	if err != nil {
		return nil, h.problem(ctx, err)
	}
	out := &submitAccountsOutput{}
	out.Body.AllocationID, out.Body.Outcome, out.Body.Revision = res.AllocationID, res.Outcome, res.Revision
	out.Body.Accounts = make([]AccountOutcomeBody, 0, len(res.Accounts))
	for _, o := range res.Accounts {
		out.Body.Accounts = append(out.Body.Accounts, AccountOutcomeBody{
			PartyID: o.PartyID, UID: o.UID, BindingID: o.BindingID, Generation: o.Generation, State: o.State,
			BindingState: o.BindingState, BindingGeneration: o.BindingGeneration, Current: o.Current,
		})
	}
	return out, nil
}

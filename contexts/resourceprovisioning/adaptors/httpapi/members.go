package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
	"github.com/pharos-metallo/metallo/platform/auth"
)

// Native member accounts and Runtime member bindings on HTTP
// (docs/resource-provisioning.md#native-member-accounts): the agent's
// account report and lookup, and the reads of the desired bindings, the
// ready accounts and an allocation's account evidence.

// ReasonUnknownEnvironment is the problem reason (404) of an environment
// that is not configured (environments.yaml).
const ReasonUnknownEnvironment = "unknown-environment"

// MaxAccountsBodyBytes bounds an account report's body (10,000 accounts of
// about 250 bytes each fit).
const MaxAccountsBodyBytes = 4 << 20

// bindingCursorPrefix starts the desired-binding read's opaque cursors.
const bindingCursorPrefix = "b1:"

// desiredBindingsReasons are cursorReasons and 404 unknown-environment:
// the reasons of the desired-binding read.
func desiredBindingsReasons() map[int][]string {
	r := cursorReasons()
	r[http.StatusNotFound] = []string{ReasonUnknownEnvironment}
	return r
}

func (a *API) registerMembers(api huma.API, reg huma.Registry) {
	huma.Register(api, reporterOperation(huma.Operation{
		OperationID: "submit-accounts",
		Method:      http.MethodPost,
		Path:        "/resource-provisioning/{site}/accounts",
		Summary:     "Report the member accounts of one allocation's native scope",
		Description: "After each cycle the Site's agent posts, per allocation (named by its Waldur resource), the " +
			"complete set of member accounts it found in the allocation's native scope, each named by what it wrote " +
			"on the account: `party_id`, the name `account` (exactly `member-<party_id>`; any other is 422), the " +
			"Site's immutable `uid`, the `binding_id` and `generation` the account lookup answered, and `state` " +
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
		MaxBodyBytes: MaxAccountsBodyBytes,
		Middlewares:  huma.Middlewares{guardJSONBody(reg, a.accountsBody)}}, intakeReasons(domain.ReasonStaleReport, domain.ReasonReportConflict, domain.ReasonAllocationUnknown, domain.ReasonAllocationRetired, domain.ReasonBindingMismatch)), a.submitAccounts)
	huma.Register(api, reporterOperation(huma.Operation{
		OperationID: "account-lookup",
		Method:      http.MethodGet,
		Path:        "/resource-provisioning/{site}/account-lookup",
		Summary:     "Resolve a Site username in a Waldur Project to its member binding",
		Description: "The Site's agent resolves the offering username of a resource user (`username`) and the Waldur " +
			"Project of the resource (`provider_project`) at one of its environments (`environment`, required " +
			"when the Site has several) by the four steps of the account's finding: the username's newest site " +
			"binding at the environment (never an older one, nothing guessed from an email or a similar name), " +
			"the canonical Project claiming the Waldur Project, the Party's member binding in it, and an " +
			"allocation of the Project at the Site. `state` is `bound` (write `binding_id` and `generation` on " +
			"the account `member-<party_id>`), `retired` (the binding is retired: remove the account) or " +
			"`unknown` with the step that found nothing in `reasons` (`no_environment`, `unknown_username`, " +
			"`site_binding_not_verified`, `project_unbound`, `not_a_member`, `no_allocation`). A missing " +
			"username or provider_project, or an environment that is not this Site's, is 422 naming each. Only " +
			"the key of `site:<site>` is admitted (any other key is 403 `forbidden`)."}, readReasons()), a.accountLookup)
	huma.Register(api, readerOperation(huma.Operation{
		OperationID: "desired-bindings",
		Method:      http.MethodGet,
		Path:        "/resource-provisioning/environments/{environment}/bindings",
		Summary:     "An environment's desired Runtime member bindings, paginated",
		Description: "Every member binding at the environment, live and retired (a retired binding is to be " +
			"delivered as retired), and every member of a Project with a non-retired allocation at the " +
			"environment's Site that has no binding, with `reasons` (`no_site_binding`), in (Project, Party) order " +
			"with an opaque cursor. The first page carries `changes_cursor`, the change feed position captured " +
			"before paging began: after the last page, follow `GET /resource-provisioning/changes?after=<changes_cursor>` " +
			"and apply only newer binding revisions. An environment not configured is 404 `unknown-environment`; " +
			"a cursor this API did not issue is 400 `invalid-cursor`."}, desiredBindingsReasons()), a.desiredBindings)
	huma.Register(api, readerOperation(huma.Operation{
		OperationID: "project-accounts",
		Method:      http.MethodGet,
		Path:        "/resource-provisioning/projects/{project}/accounts",
		Summary:     "A Project's member accounts: the ready ones with their UIDs",
		Description: "The member bindings of a canonical Project at the environments of one Site (`site`) or all, " +
			"of one Party (`party`) or all: `state` `ready` with the ready account's `uid`, namespace and " +
			"allocation, or `pending` / `retired` with `reasons`. `fresh` is false when the account report it " +
			"came from was received longer ago than the freshness bound (default 15 minutes). A store that " +
			"cannot be read is 503, never a guess."}, readReasons()), a.projectAccounts)
	huma.Register(api, readerOperation(huma.Operation{
		OperationID: "allocation-accounts",
		Method:      http.MethodGet,
		Path:        "/resource-provisioning/allocations/{allocation}/accounts",
		Summary:     "Every account reported in an allocation (the evidence)",
		Description: "Every native account an agent ever reported in the allocation's scope — `ready`, `incomplete` " +
			"and `absent`, every generation — by Party, UID, binding and generation, with `since` (the " +
			"observed_at of the report that set the state)."}, readReasons()), a.allocationAccounts)
}

// AccountBody is one reported native account.
type AccountBody struct {
	PartyID    string `json:"party_id" doc:"The Party (a lower-case UUID)." example:"9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"`
	Account    string `json:"account" doc:"The account's name: exactly member-<party_id>." example:"member-9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"`
	UID        string `json:"uid" doc:"The Site's immutable UID of the account (for Kubernetes, the ServiceAccount's metadata.uid); 1 to 256 bytes." example:"3b0c6a52-6f1d-4c1e-9f0a-2d7e5b8c9a41"`
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

func (a *API) submitAccounts(ctx context.Context, in *submitAccountsInput) (*submitAccountsOutput, error) {
	if err := requireSite(ctx, in.Site); err != nil {
		return nil, err
	}
	res, err := a.svc.SubmitAccounts(ctx, in.Site, accountReportOf(in))
	if err != nil {
		return nil, a.problem("submit accounts", err)
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

type accountLookupInput struct {
	Site            string `path:"site" pattern:"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$" doc:"The Site; must match the caller's site:<id> key." example:"alpha"`
	Username        string `query:"username" maxLength:"256" doc:"The Waldur offering username of the resource user (the Site username; required; at most 256 bytes of text)." example:"alice"`
	ProviderProject string `query:"provider_project" maxLength:"256" doc:"The Waldur Project UUID of the resource (required; at most 256 bytes of text)." example:"0a1b2c3d4e5f40718293a4b5c6d7e8f9"`
	Environment     string `query:"environment" pattern:"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$" doc:"The Site's environment; required when the Site has several." example:"alpha-k8s"`
}

type accountLookupOutput struct {
	Body struct {
		State       string   `json:"state" enum:"bound,retired,unknown" example:"bound"`
		Reasons     []string `json:"reasons" doc:"unknown: the step that found nothing; retired: why (member_removed, site_binding_retired)." example:"[]"`
		Environment string   `json:"environment,omitempty" example:"alpha-k8s"`
		ProjectID   string   `json:"project_id,omitempty" doc:"The canonical Project." example:"7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"`
		PartyID     string   `json:"party_id,omitempty" example:"9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"`
		Account     string   `json:"account,omitempty" doc:"member-<party_id>." example:"member-9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"`
		BindingID   string   `json:"binding_id,omitempty" doc:"The member binding: account_ref.binding_id of the Site protocol." example:"edf0dbce-a8c3-5a1d-8d34-0e0ff66583ab"`
		Revision    int64    `json:"revision,omitempty" example:"1"`
		Generation  int64    `json:"generation,omitempty" example:"1"`
	}
}

func (a *API) accountLookup(ctx context.Context, in *accountLookupInput) (*accountLookupOutput, error) {
	if err := requireSite(ctx, in.Site); err != nil {
		return nil, err
	}
	l, err := a.svc.LookupAccount(ctx, in.Site, in.Environment, in.Username, in.ProviderProject)
	if err != nil {
		return nil, a.problem("account lookup", err)
	}
	out := &accountLookupOutput{}
	b := &out.Body
	b.State, b.Reasons, b.Environment, b.ProjectID, b.PartyID = l.State, l.Reasons, l.Environment, l.ProjectID, l.PartyID
	b.Account, b.BindingID, b.Revision, b.Generation = l.Account, l.BindingID, l.Revision, l.Generation
	if b.Reasons == nil {
		b.Reasons = []string{}
	}
	return out, nil
}

// MemberBindingBody is a Runtime member binding at a revision: the desired
// binding Site Runtime is to apply (bind-member / retire-member), as the
// desired-binding read and the change feed's MemberBindingChanged carry it.
type MemberBindingBody struct {
	BindingID             string    `json:"binding_id" doc:"UUIDv5 of <party>/<project>/<environment>: account_ref.binding_id of the Site protocol." example:"edf0dbce-a8c3-5a1d-8d34-0e0ff66583ab"`
	PartyID               string    `json:"party_id" example:"9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"`
	ProjectID             string    `json:"project_id" example:"7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"`
	Environment           string    `json:"environment" example:"alpha-k8s"`
	Account               string    `json:"account" doc:"member-<party_id>." example:"member-9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"`
	Generation            int64     `json:"generation" doc:"From 1; + 1 when the member comes back or the site binding is replaced; kept on retirement." example:"1"`
	Revision              int64     `json:"revision" doc:"Counts material changes (generation, retirement, the ready account's UID or readiness)." example:"2"`
	State                 string    `json:"state" enum:"ready,pending,retired" example:"ready"`
	Reasons               []string  `json:"reasons" doc:"pending: account_missing, account_incomplete, account_ambiguous; retired: member_removed, site_binding_retired." example:"[]"`
	AccountUID            string    `json:"account_uid" doc:"The ready account's UID; empty unless ready." example:"3b0c6a52-6f1d-4c1e-9f0a-2d7e5b8c9a41"`
	AllocationID          string    `json:"allocation_id" doc:"The allocation the ready account was reported in; empty unless ready."`
	Namespace             string    `json:"namespace" doc:"That allocation's native scope; empty unless ready." example:"waldur-alpha-gpu-ns"`
	SiteBindingID         string    `json:"site_binding_id" doc:"Beto's site binding the generation rests on (evidence)."`
	SiteUsername          string    `json:"site_username" doc:"Its Site username (evidence)." example:"alice"`
	SiteBindingGeneration int64     `json:"site_binding_generation" doc:"Beto's own generation of it (evidence, not the binding's)."`
	ChangedAt             time.Time `json:"changed_at" doc:"Server time of the revision."`
}

func memberBindingBody(e domain.MemberBindingChanged) MemberBindingBody {
	b := MemberBindingBody{
		BindingID: e.BindingID, PartyID: e.PartyID, ProjectID: e.ProjectID, Environment: e.Environment, Account: e.Account,
		Generation: e.Generation, Revision: e.Revision, State: e.State, Reasons: e.Reasons, AccountUID: e.AccountUID,
		AllocationID: e.AllocationID, Namespace: e.Namespace, SiteBindingID: e.SiteBindingID, SiteUsername: e.SiteUsername,
		SiteBindingGeneration: e.SiteBindingGeneration, ChangedAt: e.ChangedAt,
	}
	if b.Reasons == nil {
		b.Reasons = []string{}
	}
	return b
}

type desiredBindingsInput struct {
	Environment string `path:"environment" pattern:"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$" doc:"The execution environment." example:"alpha-k8s"`
	Cursor      string `query:"cursor" maxLength:"512" doc:"Opaque cursor from next_cursor; empty for the first page."`
	Limit       int    `query:"limit" minimum:"1" maximum:"1000" default:"100" doc:"Page size."`
}

// DesiredEntryBody is one member of an environment's desired bindings.
type DesiredEntryBody struct {
	ProjectID string             `json:"project_id" example:"7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"`
	PartyID   string             `json:"party_id" example:"9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"`
	Binding   *MemberBindingBody `json:"binding,omitempty" doc:"The member's binding; absent when it has none (reasons say why)."`
	Reasons   []string           `json:"reasons" doc:"Why a member has no binding: no_site_binding (no verified site binding at the environment)." example:"[]"`
}

type desiredBindingsOutput struct {
	Body struct {
		Environment   string             `json:"environment" example:"alpha-k8s"`
		Site          string             `json:"site" example:"alpha"`
		Entries       []DesiredEntryBody `json:"entries"`
		NextCursor    string             `json:"next_cursor,omitempty" doc:"Pass as cursor for the next page; absent on the last page."`
		ChangesCursor string             `json:"changes_cursor,omitempty" doc:"First page only: the change feed position captured before paging began."`
	}
}

func (a *API) desiredBindings(ctx context.Context, in *desiredBindingsInput) (*desiredBindingsOutput, error) {
	if err := requireKind(ctx, auth.KindService); err != nil {
		return nil, err
	}
	after, err := decodeCursor(bindingCursorPrefix, in.Cursor, "query.cursor", func(v string) bool {
		_, _, ok := application.ParseBindingCursor(v)
		return ok
	})
	if err != nil {
		return nil, err
	}
	page, err := a.svc.DesiredBindings(ctx, in.Environment, after, in.Limit)
	if err != nil {
		return nil, a.problem("desired bindings", err)
	}
	out := &desiredBindingsOutput{}
	out.Body.Environment, out.Body.Site = page.Environment, page.Site
	out.Body.Entries = make([]DesiredEntryBody, 0, len(page.Entries))
	for _, e := range page.Entries {
		en := DesiredEntryBody{ProjectID: e.ProjectID, PartyID: e.PartyID, Reasons: e.Reasons}
		if e.Binding != nil {
			b := memberBindingBody(domain.NewMemberBindingChanged(*e.Binding))
			en.Binding = &b
		}
		if en.Reasons == nil {
			en.Reasons = []string{}
		}
		out.Body.Entries = append(out.Body.Entries, en)
	}
	if page.After != "" {
		out.Body.NextCursor = encodeCursor(bindingCursorPrefix, page.After)
	}
	if page.First {
		out.Body.ChangesCursor = FeedCursor(page.ChangesHead)
	}
	return out, nil
}

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

func (a *API) projectAccounts(ctx context.Context, in *projectAccountsInput) (*projectAccountsOutput, error) {
	if err := requireKind(ctx, auth.KindService); err != nil {
		return nil, err
	}
	vs, err := a.svc.ProjectAccounts(ctx, in.Project, in.Site, in.Party)
	if err != nil {
		return nil, a.problem("project accounts", err)
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

func (a *API) allocationAccounts(ctx context.Context, in *allocationAccountsInput) (*allocationAccountsOutput, error) {
	if err := requireKind(ctx, auth.KindService); err != nil {
		return nil, err
	}
	as, err := a.svc.NativeAccounts(ctx, in.Allocation)
	if err != nil {
		return nil, a.problem("allocation accounts", err)
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

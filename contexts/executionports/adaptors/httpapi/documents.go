package httpapi

import (
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// StoredCommand is a command exactly as the server serves it (the JCS form
// of its stored object with sequence and digest); its schema is the
// Command schema.
type StoredCommand []byte

// MarshalJSON returns the stored bytes unchanged.
func (c StoredCommand) MarshalJSON() ([]byte, error) { return c, nil }

// Schema documents a stored command as a siteprotocol.Command.
func (StoredCommand) Schema(r huma.Registry) *huma.Schema {
	return commandSchema(r)
}

// digestRule is how a client computes a digest
// (docs/site-protocol.md#the-digest-rule), said where a client needs it.
const digestRule = "Lower-case hex SHA-256 (64 characters) of the object's RFC 8785 (JCS) canonical form — members sorted by name, no white space, " +
	"strings and numbers in their one canonical spelling — "

// encodingRule is what the server refuses before canonicalisation could
// change a text (docs/site-protocol.md#canonical-encoding-and-strict-json).
const encodingRule = " The text must be strict JSON: valid UTF-8 with no escaped lone surrogate, no member named twice (nor two differing only in case), " +
	"no null, no U+0000, exactly one value nested at most 32 levels, no unknown member, and no whole number beyond ±(2^53−1) or beyond the range of doubles " +
	"however it is written, so its canonical form is the value sent."

// commandSchema returns the reference to the Command schema, registering it
// complete in reg: the digest rule on digest, family closed over the
// protocol's families (the server refuses another), and the known
// operations listed on operation (the server accepts an operation it does
// not know; the Runtime answers it refused unsupported-operation). It may
// be called again: the schema is rebuilt the same.
func commandSchema(reg huma.Registry) *huma.Schema {
	ref := reg.Schema(reflect.TypeFor[siteprotocol.Command](), true, "Command")
	s := reg.Map()["Command"]
	if s == nil {
		return ref
	}
	s.Description = "A command of a Site stream." + encodingRule
	if p := s.Properties["digest"]; p != nil {
		p.Description = digestRule + "of the command without its sequence and digest members. The server computes it on append " +
			"(a digest sent with the append must equal it, else 422 invalid-command) and serves it; the Runtime verifies it on every pulled command."
	}
	if p := s.Properties["sequence"]; p != nil {
		p.Description = "The stream position, assigned by the server; absent when appending."
	}
	if p := s.Properties["family"]; p != nil {
		p.Enum = nil
		for _, f := range []siteprotocol.Family{siteprotocol.FamilyBatch, siteprotocol.FamilyApplication, siteprotocol.FamilyInference} {
			p.Enum = append(p.Enum, string(f))
		}
		p.Description = "The executor family (another value is 422 invalid-command): required by every known operation but bind-member and retire-member, and absent on those two."
	}
	if p := s.Properties["operation"]; p != nil {
		known := make([]string, 0, len(siteprotocol.Operations()))
		for _, o := range siteprotocol.Operations() {
			known = append(known, string(o))
		}
		p.Description = "The operation. Known: " + strings.Join(known, ", ") + ". The server also accepts an operation it does not know " +
			"and stores it; the Runtime answers it refused unsupported-operation."
	}
	// The known operations' payloads, as components the payload's
	// description names (docs/site-protocol.md#operations); the server
	// checks a known operation's payload on append.
	for _, t := range []reflect.Type{
		reflect.TypeFor[siteprotocol.BindMemberPayload](), reflect.TypeFor[siteprotocol.RetireMemberPayload](),
		reflect.TypeFor[siteprotocol.PreparePayload](), reflect.TypeFor[siteprotocol.StartPayload](),
		reflect.TypeFor[siteprotocol.ReadLogsPayload](), reflect.TypeFor[siteprotocol.ReadFilePayload](),
		reflect.TypeFor[siteprotocol.ProxyPayload](),
	} {
		reg.Schema(t, true, t.Name())
	}
	if p := s.Properties["payload"]; p != nil {
		p.Description = "The operation's payload object: BindMemberPayload (bind-member; account_uid optional), RetireMemberPayload (retire-member), " +
			"PreparePayload (prepare), StartPayload (start), ReadLogsPayload (read-logs), ReadFilePayload (read-file), ProxyPayload (proxy); " +
			"observe, cancel and cleanup take an empty object. A known operation's payload is checked on append (422 invalid-command naming the member)."
	}
	return ref
}

// RecordedResult is a result exactly as the Runtime sent it; its schema is
// the Result schema.
type RecordedResult []byte

// MarshalJSON returns the recorded bytes unchanged.
func (r RecordedResult) MarshalJSON() ([]byte, error) { return r, nil }

// Schema documents a recorded result as a siteprotocol.Result.
func (RecordedResult) Schema(r huma.Registry) *huma.Schema {
	return resultSchema(r)
}

// EnvironmentPath is the environment path parameter of Execution's stream
// routes (exported: Huma reads parameters only of exported embedded
// structs).
type EnvironmentPath struct {
	Environment string `path:"environment" pattern:"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$" doc:"Execution environment ID, e.g. alpha-k8s (1-128 letters, digits, '.', '_' or '-')."`
}

// SiteRequest holds what every Site route's input carries: the environment
// and the installation header (exported: Huma reads parameters only of
// exported embedded structs). The header is documented as required by
// installationParameters; Huma does not check it (hidden), so that
// requireInstallation answers a missing one 400 installation-required.
type SiteRequest struct {
	Environment  string `path:"environment" pattern:"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$" doc:"Execution environment ID, e.g. alpha-k8s (1-128 letters, digits, '.', '_' or '-')."`
	Installation string `header:"Metallo-Installation" hidden:"true"`
}

// installationDoc is the documentation of the Metallo-Installation header.
const installationDoc = "The Runtime installation ID (required on every Site route). The first installation that pulls an unbound stream binds it; any other is refused with 409 installation-mismatch until an operator rebinds the stream."

// installationParameters documents the Metallo-Installation header of a
// Site route, required.
func installationParameters() []*huma.Param {
	return []*huma.Param{{
		Name: siteprotocol.InstallationHeader, In: "header", Required: true,
		Description: installationDoc, Schema: &huma.Schema{Type: huma.TypeString, Description: installationDoc},
	}}
}

// requireInstallation requires a well-formed installation header (400
// installation-required otherwise). The principal was admitted before
// (siteAdmit).
func requireInstallation(in *SiteRequest) error {
	if in.Installation == "" || !domain.ValidInstallationID(in.Installation) {
		return httpserver.NewProblem(http.StatusBadRequest, siteprotocol.ProblemInstallationRequired,
			"header "+siteprotocol.InstallationHeader+" must carry the Runtime's installation ID (1-128 letters, digits, '.', '_' or '-')",
			&huma.ErrorDetail{Location: "header." + siteprotocol.InstallationHeader, Message: "required installation ID", Value: in.Installation})
	}
	return nil
}

// reasonsKey is the operation metadata listing, per problem status, the
// reasons the operation can answer with it (withReasons).
const reasonsKey = "execution_ports.reasons"

// withReasons returns metadata m with the reasons the operation answers per
// problem status (documented by documentOperation as each response's
// x-reasons and in its description). The statuses every bearer operation
// shares (401 unauthenticated, 403 forbidden, 500 and 503 unavailable)
// are added here.
func withReasons(m map[string]any, byStatus map[int][]string) map[string]any {
	out := maps.Clone(m)
	all := map[int][]string{
		http.StatusUnauthorized:        {siteprotocol.ProblemUnauthenticated},
		http.StatusForbidden:           {siteprotocol.ProblemForbidden},
		http.StatusServiceUnavailable:  {httpserver.DefaultReason(http.StatusServiceUnavailable)},
		http.StatusInternalServerError: {httpserver.DefaultReason(http.StatusInternalServerError)},
	}
	for status, reasons := range byStatus {
		all[status] = append(all[status], reasons...)
	}
	out[reasonsKey] = all
	return out
}

// rawBodyKey is the operation metadata naming a raw JSON body's schema
// (withRawBody).
const rawBodyKey = "execution_ports.raw_body"

// rawBody is the documentation of a raw JSON request body, which the
// handler parses and validates itself with platform/siteprotocol.
type rawBody struct {
	schema      *huma.Schema
	description string
}

// withRawBody returns metadata m with the raw JSON body documented by
// schema and description.
func withRawBody(m map[string]any, schema *huma.Schema, description string) map[string]any {
	out := maps.Clone(m)
	out[rawBodyKey] = rawBody{schema: schema, description: description}
	return out
}

// documentOperation is the OpenAPI document's hook as Huma adds an
// operation (huma.OpenAPI.OnAddOperation): the principals the operation's
// admit rule allows (siteAdmit, serviceAdmit) are documented as
// x-principal and said in its description, and an operation whose
// metadata names a raw body (withRawBody) documents it as application/json
// of its schema instead of the bytes Huma reads.
func documentOperation(_ *huma.OpenAPI, op *huma.Operation) {
	if principals, ok := op.Metadata[principalKey].([]string); ok {
		if op.Extensions == nil {
			op.Extensions = map[string]any{}
		}
		op.Extensions["x-principal"] = principals
		op.Description += " Principal: " + strings.Join(principals, " or ") + " (403 forbidden for any other)."
	}
	if byStatus, ok := op.Metadata[reasonsKey].(map[int][]string); ok {
		for status, reasons := range byStatus {
			resp := op.Responses[strconv.Itoa(status)]
			if resp == nil {
				continue
			}
			if resp.Extensions == nil {
				resp.Extensions = map[string]any{}
			}
			resp.Extensions["x-reasons"] = reasons
			resp.Description = http.StatusText(status) + "; reason: " + strings.Join(reasons, ", ") + "."
		}
	}
	rb, ok := op.Metadata[rawBodyKey].(rawBody)
	if !ok || op.RequestBody == nil {
		return
	}
	op.RequestBody.Description = rb.description
	op.RequestBody.Content = map[string]*huma.MediaType{"application/json": {Schema: rb.schema}}
}

// resultSchema returns the reference to the Result schema, registering it
// complete in reg: the outcome and reason closed over the protocol's
// vocabulary (platform/siteprotocol), each reason listed with the one
// outcome it carries (docs/site-protocol.md#repository-checkout-reasons),
// and each operation's detail object registered and named on the detail
// (docs/site-protocol.md#operations; the server records a detail as the
// Runtime sent it). It may be called again: the schema is rebuilt the same.
func resultSchema(reg huma.Registry) *huma.Schema {
	ref := reg.Schema(reflect.TypeFor[siteprotocol.Result](), true, "Result")
	for _, t := range []reflect.Type{
		reflect.TypeFor[siteprotocol.BindingDetail](), reflect.TypeFor[siteprotocol.PrepareDetail](),
		reflect.TypeFor[siteprotocol.StateDetail](), reflect.TypeFor[siteprotocol.ObserveDetail](),
		reflect.TypeFor[siteprotocol.CancelDetail](), reflect.TypeFor[siteprotocol.CleanupDetail](),
		reflect.TypeFor[siteprotocol.ReadLogsDetail](), reflect.TypeFor[siteprotocol.ReadFileDetail](),
		reflect.TypeFor[siteprotocol.ProxyDetail](),
	} {
		reg.Schema(t, true, t.Name())
	}
	s := reg.Map()["Result"]
	if s == nil || s.Properties["reason"] == nil || s.Properties["outcome"] == nil || s.Properties["detail"] == nil || s.Properties["digest"] == nil {
		return ref
	}
	s.Description = "A command's result, sent in canonical form; the server stores its exact bytes." + encodingRule
	s.Properties["digest"].Description = digestRule + "of the result without its digest member. Required: the server computes it on receipt " +
		"and refuses a result whose digest differs (422 invalid-result)."
	if !slices.Contains(s.Required, "digest") {
		s.Required = append(s.Required, "digest")
	}
	s.Properties["detail"].Description = "The operation's detail object: BindingDetail (bind-member, retire-member), PrepareDetail (prepare), " +
		"StateDetail (start), ObserveDetail (observe; exit_code for a finished batch Attempt), CancelDetail (cancel), " +
		"CleanupDetail (cleanup), ReadLogsDetail (read-logs), ReadFileDetail (read-file), ProxyDetail (proxy)."
	outcomes := []siteprotocol.Outcome{siteprotocol.OutcomeSucceeded, siteprotocol.OutcomeFailed, siteprotocol.OutcomeRefused}
	s.Properties["outcome"].Enum = nil
	for _, o := range outcomes {
		s.Properties["outcome"].Enum = append(s.Properties["outcome"].Enum, string(o))
	}
	s.Properties["outcome"].Description = "succeeded: the operation did its work; failed: it could not; refused: it was not allowed or not understood. It must be the reason's outcome."
	byOutcome := map[siteprotocol.Outcome][]string{}
	s.Properties["reason"].Enum = nil
	for _, r := range siteprotocol.Reasons() {
		s.Properties["reason"].Enum = append(s.Properties["reason"].Enum, string(r))
		o, _ := r.Outcome()
		byOutcome[o] = append(byOutcome[o], string(r))
	}
	var desc strings.Builder
	desc.WriteString("The closed reason vocabulary; each reason carries exactly one outcome (a result with another outcome is 422 invalid-result).")
	for _, o := range outcomes {
		fmt.Fprintf(&desc, " %s: %s.", o, strings.Join(byOutcome[o], ", "))
	}
	s.Properties["reason"].Description = desc.String()
	return ref
}

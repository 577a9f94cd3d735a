package httpapi

import (
	"fmt"
	"maps"
	"net/http"
	"reflect"
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
	return r.Schema(reflect.TypeFor[siteprotocol.Command](), true, "Command")
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

// documentRawBody is the OpenAPI document's hook as Huma adds an
// operation (huma.OpenAPI.OnAddOperation): an operation whose metadata
// names a raw body (withRawBody) documents it as application/json of its
// schema instead of the bytes Huma reads.
func documentRawBody(_ *huma.OpenAPI, op *huma.Operation) {
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
	if s == nil || s.Properties["reason"] == nil || s.Properties["outcome"] == nil || s.Properties["detail"] == nil {
		return ref
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

package httpapi

import (
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
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
	s.Description += " On append the server checks the envelope — id a lower-case UUID, operation kebab-case (at most 64 characters), issued_at RFC 3339 in UTC with Z, " +
		"run_id and attempt_id (lower-case UUIDs) on every known operation but bind-member and retire-member, member_id and project_id on every known operation, " +
		"account_ref on prepare and start, family as below, digest if sent — and, for a known operation, its payload against the operation's schema (x-payload-schemas) " +
		"and the rules each schema's description states; every broken rule is named in one 422 invalid-command. It does not check what only the Site knows " +
		"(that the binding exists, that prepare came before start, that the namespace or account exists): the Runtime answers those in the result's reason."
	if p := s.Properties["payload"]; p != nil {
		*p = *payloadSchema(reg)
	}
	return ref
}

// payloadSchemaNames names, per known operation, the component of its
// payload: one name for every family, or one per family where the shapes
// differ (prepare and start). A known operation missing here fails the
// document's test, so a new operation joins it.
func payloadSchemaNames() map[siteprotocol.Operation]map[siteprotocol.Family]string {
	every := func(name string) map[siteprotocol.Family]string { return map[siteprotocol.Family]string{"": name} }
	return map[siteprotocol.Operation]map[siteprotocol.Family]string{
		siteprotocol.OpBindMember:   every("BindMemberPayload"),
		siteprotocol.OpRetireMember: every("RetireMemberPayload"),
		siteprotocol.OpPrepare: {
			siteprotocol.FamilyBatch: "PrepareBatchPayload", siteprotocol.FamilyApplication: "PrepareApplicationPayload",
			siteprotocol.FamilyInference: "PrepareInferencePayload",
		},
		siteprotocol.OpStart: {
			siteprotocol.FamilyBatch: "StartBatchPayload", siteprotocol.FamilyApplication: "EmptyPayload", siteprotocol.FamilyInference: "EmptyPayload",
		},
		siteprotocol.OpObserve:  every("EmptyPayload"),
		siteprotocol.OpCancel:   every("EmptyPayload"),
		siteprotocol.OpCleanup:  every("EmptyPayload"),
		siteprotocol.OpReadLogs: every("ReadLogsPayload"),
		siteprotocol.OpReadFile: every("ReadFilePayload"),
		siteprotocol.OpProxy:    every("ProxyPayload"),
	}
}

// detailSchemaNames names, per known operation, the component of its
// result's detail (the same for every family; observe's exit_code is a
// batch Attempt's).
func detailSchemaNames() map[siteprotocol.Operation]string {
	return map[siteprotocol.Operation]string{
		siteprotocol.OpBindMember: "BindingDetail", siteprotocol.OpRetireMember: "BindingDetail", siteprotocol.OpPrepare: "PrepareDetail",
		siteprotocol.OpStart: "StateDetail", siteprotocol.OpObserve: "ObserveDetail", siteprotocol.OpCancel: "CancelDetail",
		siteprotocol.OpCleanup: "CleanupDetail", siteprotocol.OpReadLogs: "ReadLogsDetail", siteprotocol.OpReadFile: "ReadFileDetail",
		siteprotocol.OpProxy: "ProxyDetail",
	}
}

// schemaRef is the document's reference to component name.
func schemaRef(name string) string { return "#/components/schemas/" + name }

// knownShapes returns the anyOf of the named components (sorted, once
// each) and a generic object described by other, and the x- mapping of
// operations (and families) to components.
func knownShapes(names map[siteprotocol.Operation]map[siteprotocol.Family]string, other string) ([]*huma.Schema, map[string]any) {
	seen := map[string]bool{}
	byOp := map[string]any{}
	for _, op := range siteprotocol.Operations() {
		fams := names[op]
		if name, ok := fams[""]; ok && len(fams) == 1 {
			byOp[string(op)] = schemaRef(name)
			seen[name] = true
			continue
		}
		byFam := map[string]string{}
		for f, name := range fams {
			byFam[string(f)] = schemaRef(name)
			seen[name] = true
		}
		byOp[string(op)] = byFam
	}
	var shapes []*huma.Schema
	for _, name := range slices.Sorted(maps.Keys(seen)) {
		shapes = append(shapes, &huma.Schema{Ref: schemaRef(name)})
	}
	shapes = append(shapes, &huma.Schema{Type: huma.TypeObject, Description: other})
	return shapes, byOp
}

// demandSchema states in d, the schema of a demand map, the rules
// siteprotocol checks on append (docs/site-protocol.md#operations): cpu
// (millicores) and memory (bytes) required and at least 1, every other
// resource (gpu.<vendor>, devices) at least 0; other keys are refused
// (stated in words: Huma's schema has no patternProperties).
func demandSchema(d *huma.Schema) {
	one := 1.0
	zero := 0.0
	d.Properties = map[string]*huma.Schema{
		"cpu":    {Type: huma.TypeInteger, Format: "int64", Minimum: &one, Description: "CPU in millicores (at least 1), e.g. 1000 for one core."},
		"memory": {Type: huma.TypeInteger, Format: "int64", Minimum: &one, Description: "Memory in bytes (at least 1), e.g. 2147483648 for 2 GiB."},
	}
	d.Required = []string{"cpu", "memory"}
	d.AdditionalProperties = &huma.Schema{Type: huma.TypeInteger, Format: "int64", Minimum: &zero,
		Description: "Devices of a GPU vendor (at least 0) under gpu.<vendor>, e.g. gpu.nvidia; any other key is refused."}
}

// payloadSchema registers the payload components (those of the family
// variants derived from PreparePayload and StartPayload) and returns the
// schema of Command.payload: anyOf the known payloads and a generic object
// (an operation the server does not know is stored unchecked), with
// x-payload-schemas naming each known operation's (per family where they
// differ). The anyOf claims no check beyond "an object": the server's
// checks are the payload's schema for a known operation (and the rules in
// its description), which the mapping names.
func payloadSchema(reg huma.Registry) *huma.Schema {
	for _, t := range []reflect.Type{
		reflect.TypeFor[siteprotocol.BindMemberPayload](), reflect.TypeFor[siteprotocol.RetireMemberPayload](),
		reflect.TypeFor[siteprotocol.PreparePayload](), reflect.TypeFor[siteprotocol.StartPayload](),
		reflect.TypeFor[siteprotocol.ReadLogsPayload](), reflect.TypeFor[siteprotocol.ReadFilePayload](),
		reflect.TypeFor[siteprotocol.ProxyPayload](), reflect.TypeFor[siteprotocol.EmptyPayload](),
	} {
		reg.Schema(t, true, t.Name())
	}
	m := reg.Map()
	m["EmptyPayload"].Description = "The payload of observe, cancel and cleanup, and of an application or inference start (a service starts what prepare saved): an empty object, or left out."
	for _, name := range []string{"PreparePayload", "StartPayload"} {
		if s := m[name]; s != nil {
			if d := s.Properties["demand"]; d != nil {
				demandSchema(d)
			}
		}
	}
	if prep := m["PreparePayload"]; prep != nil {
		prep.Description = "Every member prepare takes; which ones a family takes is PrepareBatchPayload, PrepareApplicationPayload or PrepareInferencePayload."
		derive := func(name, desc string, props, required []string, kind siteprotocol.ServiceKind) {
			d := &huma.Schema{Type: huma.TypeObject, Description: desc, AdditionalProperties: false, Properties: map[string]*huma.Schema{}, Required: required}
			for _, p := range props {
				if prop := prep.Properties[p]; prop != nil {
					cp := *prop
					d.Properties[p] = &cp
				}
			}
			if sk := d.Properties["service_kind"]; sk != nil && kind != "" {
				sk.Enum = []any{string(kind)}
				sk.Description = "Must equal the family."
			}
			m[name] = d
		}
		derive("PrepareBatchPayload", "prepare of a batch Attempt: its private workspace, empty or checked out from an exact commit. Nothing else (a service member is 422).",
			[]string{"repository", "workspace_size_bytes"}, []string{"workspace_size_bytes"}, "")
		derive("PrepareApplicationPayload", "prepare of an application service: its workspace and the rendered specification saved for start (image pinned by digest, port, readiness, demand with cpu and memory).",
			[]string{"repository", "workspace_size_bytes", "service_kind", "image", "port", "readiness", "demand"},
			[]string{"workspace_size_bytes", "service_kind", "image", "port", "demand"}, siteprotocol.ServiceApplication)
		for _, c := range exampleCommands() {
			if c.name == "prepare-application" {
				m["PrepareApplicationPayload"].Examples = []any{c.command["payload"]}
			}
		}
		derive("PrepareInferencePayload", "prepare of an inference service (a KServe InferenceService): its workspace and the model saved for start (no image: the pinned serving runtime runs it).",
			[]string{"repository", "workspace_size_bytes", "service_kind", "model", "port", "readiness", "demand"},
			[]string{"workspace_size_bytes", "service_kind", "model", "port", "demand"}, siteprotocol.ServiceInference)
	}
	if start := m["StartPayload"]; start != nil {
		start.Description = "Every member start takes: a batch start's (StartBatchPayload); a service's start takes none (EmptyPayload)."
		d := *start
		d.Description = "start of a batch Attempt: the Job's demand (cpu and memory required), time limit and command."
		d.Required = []string{"demand", "time_limit_seconds", "argv"}
		m["StartBatchPayload"] = &d
	}
	shapes, byOp := knownShapes(payloadSchemaNames(), "The payload of an operation the server does not know: stored as sent (strict JSON); the Runtime answers the command refused unsupported-operation.")
	return &huma.Schema{
		Description: "The operation's payload object (x-payload-schemas names each known operation's, per family where they differ). " +
			"A known operation's payload is checked on append against its schema and rules (422 invalid-command naming the member); observe, cancel and cleanup take an empty object or none.",
		AnyOf:      shapes,
		Extensions: map[string]any{"x-payload-schemas": byOp},
	}
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

// documentOperation is the OpenAPI document's hook as Huma adds an
// operation (huma.OpenAPI.OnAddOperation): an operation whose metadata
// names a raw body (withRawBody) documents it as application/json of its
// schema instead of the bytes Huma reads. The principals and the reasons
// per status are documented by httpserver.DocumentAccess.
func documentOperation(oapi *huma.OpenAPI, op *huma.Operation) {
	rb, ok := op.Metadata[rawBodyKey].(rawBody)
	if !ok || op.RequestBody == nil {
		return
	}
	op.RequestBody.Description = rb.description
	op.RequestBody.Content = map[string]*huma.MediaType{"application/json": {Schema: rb.schema}}
	httpserver.DocumentExamples(oapi, op) // the new media type's examples
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
	details := map[siteprotocol.Operation]map[siteprotocol.Family]string{}
	for op, name := range detailSchemaNames() {
		details[op] = map[siteprotocol.Family]string{"": name}
	}
	shapes, byOp := knownShapes(details, "The detail of an operation the server does not know, or any other object: the server records a detail as the Runtime sent it.")
	s.Properties["detail"] = &huma.Schema{
		Description: "The operation's detail object (x-detail-schemas names each known operation's; the same for every family, observe's exit_code being a batch Attempt's). " +
			"The server checks only that it is an object and records it as sent; a refused result usually carries none.",
		AnyOf:      shapes,
		Extensions: map[string]any{"x-detail-schemas": byOp},
	}
	states := make([]string, 0, len(siteprotocol.States()))
	for _, st := range siteprotocol.States() {
		states = append(states, string(st))
	}
	for _, name := range []string{"StateDetail", "CancelDetail", "ObserveDetail"} {
		if d := reg.Map()[name]; d != nil && d.Properties["state"] != nil {
			d.Properties["state"].Description = "The native state observed: one of " + strings.Join(states, ", ") + " (the Runtime's vocabulary; the server does not check it)."
		}
	}
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

package siteprotocol

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/pharos-metallo/metallo/platform/ijson"
)

// FieldError is one broken rule, located by a JSON path such as
// "payload.demand.cpu".
type FieldError struct {
	Field   string
	Message string
}

// ValidationError lists every broken rule of one command or result. It
// wraps ErrInvalid.
type ValidationError struct {
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, 0, len(e.Fields))
	for _, f := range e.Fields {
		parts = append(parts, f.Field+": "+f.Message)
	}
	return "invalid: " + strings.Join(parts, "; ")
}

// Unwrap returns ErrInvalid.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

func invalid(fields ...FieldError) error { return &ValidationError{Fields: fields} }

type checker struct{ fields []FieldError }

func (c *checker) add(field, format string, args ...any) {
	c.fields = append(c.fields, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (c *checker) err() error {
	if len(c.fields) == 0 {
		return nil
	}
	return &ValidationError{Fields: c.fields}
}

var (
	uuidRe      = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	operationRe = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)
	timeRe      = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$`)
	digestRe    = regexp.MustCompile(`^[0-9a-f]{64}$`)
	dnsLabelRe  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	gpuKeyRe    = regexp.MustCompile(`^gpu\.[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$`)
	commitRe    = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)
	sha256Re    = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	// registryRe and pathComponentRe are the OCI distribution grammar's
	// domain (a host name with an optional port) and path component, which
	// go-containerregistry's parser checks only by character set.
	registryRe      = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*(:[0-9]{1,5})?$`)
	pathComponentRe = regexp.MustCompile(`^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*$`)
)

// MaxAccountUIDBytes bounds bind-member's account_uid, as
// resource_provisioning bounds the UID a Site's agent reports.
const MaxAccountUIDBytes = 256

// IsUUID reports whether s is a lower-case canonical UUID.
func IsUUID(s string) bool { return uuidRe.MatchString(s) }

// IsDigest reports whether s is 64 lower-case hex digits.
func IsDigest(s string) bool { return digestRe.MatchString(s) }

// IsDNSLabel reports whether s is a Kubernetes DNS-1123 label.
func IsDNSLabel(s string) bool { return dnsLabelRe.MatchString(s) }

// IsPinnedImage reports whether image is a container image reference
// pinned by a SHA-256 digest: "<registry>/<repository>[:<tag>]@sha256:<64
// lower-case hex>", parsed by go-containerregistry's reference parser with
// strict validation (the registry is explicit, nothing defaults to Docker
// Hub), and its registry and path components held to the OCI distribution
// grammar (a host name with an optional port; lower-case components
// separated by ".", "_", "__" or dashes). It is the one check of an image both sides apply: on append
// (payload.image of an application prepare) and in the Runtime (its
// batch image, the application's spec) (docs/site-protocol.md#operations).
func IsPinnedImage(image string) bool {
	d, err := name.NewDigest(image, name.StrictValidation)
	if err != nil || !sha256Re.MatchString(d.DigestStr()) || !registryRe.MatchString(d.Context().RegistryStr()) {
		return false
	}
	for _, c := range strings.Split(d.Context().RepositoryStr(), "/") {
		if !pathComponentRe.MatchString(c) {
			return false
		}
	}
	return true
}

// ValidReadinessPath reports whether p is an absolute HTTP path a
// readiness probe can request: it starts with "/" and holds no space,
// tab, CR, LF or NUL (docs/site-protocol.md#operations).
func ValidReadinessPath(p string) bool {
	return strings.HasPrefix(p, "/") && !strings.ContainsAny(p, " \t\r\n\x00")
}

// ValidTime reports whether s is RFC 3339 in UTC with "Z".
func ValidTime(s string) bool {
	if !timeRe.MatchString(s) {
		return false
	}
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}

// ValidDemandKey reports whether k is a canonical resource key: "cpu"
// (millicores), "memory" (bytes) or "gpu.<vendor>" (devices).
func ValidDemandKey(k string) bool {
	return k == "cpu" || k == "memory" || gpuKeyRe.MatchString(k)
}

// MemberAccount returns the native account of a Party: "member-<party>".
func MemberAccount(partyID string) string { return "member-" + partyID }

// Validate checks a command being appended to the stream of a Kubernetes
// environment: ValidateFor(c, BackendKubernetes).
func Validate(c Command) error { return ValidateFor(c, BackendKubernetes) }

// ValidateFor checks a command being appended to the stream of an
// environment of backend b: its envelope, for a known operation its
// payload by (operation, backend) (ValidatePayloadFor), and the rules only
// append holds (validateAppend). It returns a *ValidationError listing
// every broken rule of all three, envelope first, so that one refusal
// names every member at fault.
func ValidateFor(c Command, b Backend) error {
	checks := []func(Command) error{ValidateEnvelope}
	if c.Operation.Known() {
		checks = append(checks, func(c Command) error { return ValidatePayloadFor(c, b) }, func(c Command) error { return validateAppend(c, b) })
	}
	var fields []FieldError
	for _, check := range checks {
		var ve *ValidationError
		switch err := check(c); {
		case err == nil:
		case errors.As(err, &ve):
			fields = append(fields, ve.Fields...)
		default:
			return err
		}
	}
	if len(fields) == 0 {
		return nil
	}
	return &ValidationError{Fields: fields}
}

// validateAppend holds the rules refused on append only: a private read
// (read-logs, read-file, proxy) acts through the member's binding, so it
// needs account_ref; proxy reaches a service, so its family is
// application or inference; a read-logs container, when present, is
// not empty (docs/site-protocol.md#private-reads); and a workload
// command's family is one the environment's backend b runs
// (Backend.Families; docs/site-protocol.md#families-by-backend). A Runtime
// does not apply them to what it pulls (a command stored before them must
// not stop a stream): it answers a read without account_ref
// binding-missing, a batch proxy and a family its backend does not run
// unsupported-operation, and reads an empty container as the workload's
// main one. It returns a *ValidationError or nil.
func validateAppend(c Command, b Backend) error {
	var ck checker
	if c.Family.Valid() && c.Operation.NeedsFamily() && !b.Runs(c.Family) {
		ck.add("family", "a %s environment does not run %s workloads; it runs %s", b, c.Family, JoinFamilies(b.Families()))
	}
	switch c.Operation {
	case OpReadLogs, OpReadFile, OpProxy:
		if c.AccountRef == nil {
			ck.add("account_ref", "is required for %s: a read acts through the member's binding", c.Operation)
		}
	}
	if c.Operation == OpReadLogs {
		// "container": "" decodes like an absent container; on append it is
		// refused, so a stored command says what it means.
		var p struct {
			Container *string `json:"container"`
		}
		if json.Unmarshal(c.Payload, &p) == nil && p.Container != nil && *p.Container == "" {
			ck.add("payload.container", "must be a container name; leave it out for the workload's main container")
		}
	}
	if c.Operation == OpProxy && c.Family.Valid() && c.Family != FamilyApplication && c.Family != FamilyInference {
		ck.add("family", "must be application or inference for proxy: a %s Attempt has no service", c.Family)
	}
	return ck.err()
}

// JoinFamilies names families for a message: "batch, application and
// inference", "batch", or "no family".
func JoinFamilies(fs []Family) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = string(f)
	}
	switch len(names) {
	case 0:
		return "no family"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// ValidateEnvelope checks the fields every command carries: id, operation,
// issued_at, the identities each known operation needs, account_ref and
// family. Unknown operations are valid envelopes (the Runtime answers them
// unsupported-operation).
func ValidateEnvelope(c Command) error {
	var ck checker
	if !IsUUID(c.ID) {
		ck.add("id", "must be a lower-case UUID")
	}
	if !operationRe.MatchString(string(c.Operation)) || len(c.Operation) > 64 {
		ck.add("operation", "must be a kebab-case operation name")
	}
	if !ValidTime(c.IssuedAt) {
		ck.add("issued_at", "must be RFC 3339 in UTC with Z, e.g. 2026-11-29T10:00:00.123Z")
	}
	ids := []struct {
		name, value string
		required    bool
	}{
		{"run_id", c.RunID, c.Operation.NeedsFamily()},
		{"attempt_id", c.AttemptID, c.Operation.NeedsFamily()},
		{"member_id", c.MemberID, c.Operation.Known()},
		{"project_id", c.ProjectID, c.Operation.Known()},
	}
	for _, id := range ids {
		switch {
		case id.value == "" && id.required:
			ck.add(id.name, "is required for %s", c.Operation)
		case id.value != "" && !IsUUID(id.value):
			ck.add(id.name, "must be a lower-case UUID")
		}
	}
	if c.AccountRef != nil {
		if !IsUUID(c.AccountRef.BindingID) {
			ck.add("account_ref.binding_id", "must be a lower-case UUID")
		}
		if c.AccountRef.Generation < 1 {
			ck.add("account_ref.generation", "must be at least 1")
		}
	} else if c.Operation == OpPrepare || c.Operation == OpStart {
		ck.add("account_ref", "is required for %s", c.Operation)
	}
	switch {
	case c.Family != "" && !c.Family.Valid():
		ck.add("family", "must be batch, application or inference")
	case c.Family == "" && c.Operation.NeedsFamily():
		ck.add("family", "is required for %s", c.Operation)
	case c.Family != "" && c.Operation.Known() && !c.Operation.NeedsFamily():
		ck.add("family", "is not used by %s; leave it out", c.Operation)
	}
	if c.Digest != "" && !IsDigest(c.Digest) {
		ck.add("digest", "must be 64 lower-case hex digits")
	}
	return ck.err()
}

// ValidatePayload checks the payload of a known operation as a Runtime of
// a Kubernetes environment does: ValidatePayloadFor(c, BackendKubernetes).
func ValidatePayload(c Command) error { return ValidatePayloadFor(c, BackendKubernetes) }

// ValidatePayloadFor checks the payload of a known operation against its
// shape and rules at an environment of backend b: only bind-member's rules
// depend on the backend (validateBindMember). An unknown member is
// reported as a *ValidationError on "payload".
func ValidatePayloadFor(c Command, b Backend) error {
	var ck checker
	decode := func(v any) bool {
		if err := decodeInto(c, v); err != nil {
			var de *DecodeError
			var je *ijson.Error
			switch {
			case errors.As(err, &de) && de.Field != "":
				ck.add(de.Field, "%s", de.Message)
			case errors.As(err, &de):
				ck.add("payload", "%s", de.Message)
			case errors.As(err, &je):
				ck.add(je.Path.Location("payload"), "%s", je.Description())
			default:
				ck.add("payload", "%v", err)
			}
			return false
		}
		return true
	}
	switch c.Operation {
	case OpBindMember:
		var p BindMemberPayload
		if decode(&p) {
			validateBindMember(&ck, c, p, b)
		}
	case OpRetireMember:
		var p RetireMemberPayload
		if decode(&p) {
			if !IsUUID(p.BindingID) {
				ck.add("payload.binding_id", "must be a lower-case UUID")
			}
			if p.Generation < 1 {
				ck.add("payload.generation", "must be at least 1")
			}
		}
	case OpPrepare:
		var p PreparePayload
		if decode(&p) {
			validatePrepare(&ck, c, p)
		}
	case OpStart:
		var p StartPayload
		if decode(&p) {
			validateStart(&ck, c, p)
		}
	case OpObserve, OpCancel, OpCleanup:
		var p EmptyPayload
		decode(&p)
	case OpReadLogs:
		var p ReadLogsPayload
		if decode(&p) {
			if p.TailBytes < 1 || p.TailBytes > MaxReadBytes {
				ck.add("payload.tail_bytes", "must be between 1 and %d", MaxReadBytes)
			}
			if p.Container != "" && !IsDNSLabel(p.Container) {
				ck.add("payload.container", "must be a container name")
			}
		}
	case OpReadFile:
		var p ReadFilePayload
		if decode(&p) {
			if !SafeRelativePath(p.Path) {
				ck.add("payload.path", "must be a clean relative path inside the workspace of printable UTF-8, at most %d bytes with names of at most %d", MaxFilePathBytes, MaxFileNameBytes)
			}
			if p.MaxBytes < 1 || p.MaxBytes > MaxReadBytes {
				ck.add("payload.max_bytes", "must be between 1 and %d", MaxReadBytes)
			}
		}
	case OpProxy:
		var p ProxyPayload
		if decode(&p) {
			switch p.Method {
			case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS":
			default:
				ck.add("payload.method", "must be an HTTP method")
			}
			if !SafeProxyPath(p.Path) {
				ck.add("payload.path", "must be an absolute path (optionally with a query) without .., %%2e, %%2f, a backslash, space or control characters")
			}
			if err := CheckProxyHeaders(p.Headers); err != nil {
				ck.add("payload.headers", "%v", err)
			}
			if body, err := base64.StdEncoding.DecodeString(p.BodyBase64); err != nil {
				ck.add("payload.body_base64", "must be standard base64")
			} else if len(body) > MaxReadBytes {
				ck.add("payload.body_base64", "must decode to at most %d bytes", MaxReadBytes)
			}
		}
	}
	return ck.err()
}

// validateBindMember checks a bind-member payload at an environment of
// backend b (docs/site-protocol.md#member-identity-by-backend):
//   - Kubernetes: namespace a DNS-1123 label, account exactly
//     member-<party_id>, account_uid optional and kept as the Site's agent
//     reported it;
//   - Slurm: namespace a Slurm account (association) name, account a
//     lower-case POSIX user name (the Party's site username), account_uid
//     required, the account's decimal Unix uid;
//   - any other backend: refused, naming it.
func validateBindMember(ck *checker, c Command, p BindMemberPayload, b Backend) {
	if !IsUUID(p.PartyID) {
		ck.add("payload.party_id", "must be a lower-case UUID")
	} else if c.MemberID != "" && p.PartyID != c.MemberID {
		ck.add("payload.party_id", "must equal member_id")
	}
	switch b {
	case BackendKubernetes:
		if !IsDNSLabel(p.Namespace) {
			ck.add("payload.namespace", "must be a Kubernetes namespace name")
		}
		if p.Account != MemberAccount(p.PartyID) {
			ck.add("payload.account", "must be member-<party_id>")
		}
		// The UID as the Site's agent reported it (resource_provisioning
		// keeps any text there): the Runtime compares it byte for byte
		// with the live account's, so a shape check here could only
		// strand a delivery, never protect an identity
		// (docs/site-protocol.md#the-accounts-uid-in-a-binding).
		if len(p.AccountUID) > MaxAccountUIDBytes || !utf8.ValidString(p.AccountUID) || strings.ContainsFunc(p.AccountUID, unicode.IsControl) {
			ck.add("payload.account_uid", "must be the account's UID as its Site reports it (at most %d bytes of UTF-8 without control characters) or left out", MaxAccountUIDBytes)
		}
	case BackendSlurm:
		if !IsSlurmAccount(p.Namespace) {
			ck.add("payload.namespace", "must be a Slurm account name (lower-case letters, digits, _, - and ., at most 64) at a slurm environment")
		}
		if !IsUnixUser(p.Account) {
			ck.add("payload.account", "must be the member's Unix user name at the Site ([a-z_][a-z0-9_-]{0,31}) at a slurm environment")
		}
		if !IsUnixUID(p.AccountUID) {
			ck.add("payload.account_uid", "is required at a slurm environment: the account's Unix uid in decimal (1 to 4294967294)")
		}
	default:
		ck.add("payload", "no bind-member rules for backend %q", b)
	}
	if !IsUUID(p.BindingID) {
		ck.add("payload.binding_id", "must be a lower-case UUID")
	}
	if p.Revision < 1 {
		ck.add("payload.revision", "must be at least 1")
	}
	if p.Generation < 1 {
		ck.add("payload.generation", "must be at least 1")
	}
}

func decodeInto(c Command, v any) error {
	if len(c.Payload) == 0 {
		return nil
	}
	if _, err := checkJSON(c.Payload); err != nil {
		return err
	}
	return strictUnmarshalAt(c.Payload, v, "payload.")
}

func validatePrepare(ck *checker, c Command, p PreparePayload) {
	if p.WorkspaceSizeBytes < 1 {
		ck.add("payload.workspace_size_bytes", "must be a positive number of bytes")
	}
	if r := p.Repository; r != nil {
		if !strings.HasPrefix(r.URL, "https://") && !strings.HasPrefix(r.URL, "http://") {
			ck.add("payload.repository.url", "must be an http(s) URL")
		}
		if !commitRe.MatchString(r.Commit) {
			ck.add("payload.repository.commit", "must be a full lower-case commit hash")
		}
	}
	switch c.Family {
	case FamilyBatch:
		if p.ServiceKind != "" || p.Image != "" || p.Model != nil || p.Port != 0 || p.Readiness != nil || p.Demand != nil {
			ck.add("payload", "a batch prepare carries only repository and workspace_size_bytes")
		}
	case FamilyApplication, FamilyInference:
		if string(p.ServiceKind) != string(c.Family) {
			ck.add("payload.service_kind", "must equal the family (%s)", c.Family)
		}
		if c.Family == FamilyApplication && !IsPinnedImage(p.Image) {
			ck.add("payload.image", "must be an image reference with an explicit registry, pinned by digest (<registry>/<repository>@sha256:<64 hex>)")
		}
		if c.Family == FamilyApplication && p.Model != nil {
			ck.add("payload.model", "is for inference services")
		}
		if c.Family == FamilyInference {
			if p.Image != "" {
				ck.add("payload.image", "inference services run the pinned serving runtime; leave image out")
			}
			if p.Model == nil || p.Model.Format == "" || len(p.Model.Args) == 0 {
				ck.add("payload.model", "needs format and args")
			}
		}
		if p.Port < 1 || p.Port > 65535 {
			ck.add("payload.port", "must be an integer from 1 to 65535 (a TCP port)")
		}
		if r := p.Readiness; r != nil {
			if !ValidReadinessPath(r.Path) {
				ck.add("payload.readiness.path", "must be an absolute HTTP path (starting with /, without space, tab, CR, LF or NUL), e.g. /healthz")
			}
			if r.InitialDelaySeconds < 0 {
				ck.add("payload.readiness.initial_delay_seconds", "must be a number of seconds from 0 to 2147483647")
			}
			if r.PeriodSeconds < 0 {
				ck.add("payload.readiness.period_seconds", "must be a number of seconds from 0 to 2147483647")
			}
		}
		validateDemand(ck, "payload.demand", p.Demand)
	}
}

func validateStart(ck *checker, c Command, p StartPayload) {
	if c.Family != FamilyBatch {
		if p.Demand != nil || p.TimeLimitSeconds != 0 || p.Argv != nil || p.Env != nil {
			ck.add("payload", "services start what prepare saved; leave the payload empty")
		}
		return
	}
	validateDemand(ck, "payload.demand", p.Demand)
	if p.TimeLimitSeconds < 1 {
		ck.add("payload.time_limit_seconds", "must be a positive number of seconds")
	}
	if len(p.Argv) == 0 {
		ck.add("payload.argv", "must name the program to run")
	}
	for k := range p.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			ck.add("payload.env", "variable names must be non-empty without '=' or NUL")
			break
		}
	}
}

func validateDemand(ck *checker, field string, d map[string]int64) {
	if d["cpu"] < 1 {
		ck.add(field+".cpu", "must be a positive number of millicores")
	}
	if d["memory"] < 1 {
		ck.add(field+".memory", "must be a positive number of bytes")
	}
	for k, v := range d {
		if !ValidDemandKey(k) {
			ck.add(field+"."+k, "unknown resource key: use cpu (millicores), memory (bytes) or gpu.<vendor> (devices)")
		} else if v < 0 && k != "cpu" && k != "memory" {
			ck.add(field+"."+k, "must not be negative")
		}
	}
}

// SafeRelativePath reports whether p is a clean relative path that cannot
// leave its root: not absolute, no "..", no empty name, at most
// MaxFilePathBytes bytes with names of at most MaxFileNameBytes bytes, and
// printable UTF-8 (no control or format characters such as NUL, newline,
// DEL or a bidirectional override): a path that no file system could hold
// is refused before any native effect (docs/site-protocol.md#private-reads).
func SafeRelativePath(p string) bool {
	if p == "" || len(p) > MaxFilePathBytes || strings.HasPrefix(p, "/") || !utf8.ValidString(p) {
		return false
	}
	for _, r := range p {
		if r != ' ' && !unicode.IsPrint(r) {
			return false
		}
	}
	for name := range strings.SplitSeq(p, "/") {
		if len(name) > MaxFileNameBytes {
			return false
		}
	}
	clean := path.Clean(p)
	return clean == p && clean != "." && clean != ".." && !strings.HasPrefix(clean, "../")
}

// ValidateResult checks a result's fields (not its digest).
func ValidateResult(r Result) error {
	var ck checker
	if !IsUUID(r.CommandID) {
		ck.add("command_id", "must be a lower-case UUID")
	}
	if !IsDigest(r.CommandDigest) {
		ck.add("command_digest", "must be 64 lower-case hex digits")
	}
	if r.Sequence < 1 {
		ck.add("sequence", "must be a positive integer")
	}
	if !r.Outcome.Valid() {
		ck.add("outcome", "must be succeeded, failed or refused")
	}
	if want, known := r.Reason.Outcome(); !known {
		ck.add("reason", "must be a reason of the protocol's vocabulary")
	} else if r.Outcome.Valid() && r.Outcome != want {
		ck.add("reason", "%s is a reason of outcome %s, not %s", r.Reason, want, r.Outcome)
	}
	if len(r.Detail) > 0 && (r.Detail[0] != '{') {
		ck.add("detail", "must be a JSON object")
	}
	for i, ref := range r.NativeRefs {
		if ref.Kind == "" || ref.Name == "" {
			ck.add(fmt.Sprintf("native_refs[%d]", i), "needs kind and name")
		}
	}
	if r.Digest != "" && !IsDigest(r.Digest) {
		ck.add("digest", "must be 64 lower-case hex digits")
	}
	return ck.err()
}

// SafeProxyPath reports whether p is a path the proxy may request at a
// service: absolute, at most 4096 bytes, without "..", without the
// percent-encoded dot or slash (%2e, %2f, any case) or a backslash that
// could reach another path once decoded, and without space, control
// characters or a fragment; a query after "?" is allowed.
func SafeProxyPath(p string) bool {
	if !strings.HasPrefix(p, "/") || len(p) > 4096 || strings.Contains(p, "..") || strings.Contains(p, "\\") || strings.Contains(p, "#") {
		return false
	}
	l := strings.ToLower(p)
	if strings.Contains(l, "%2e") || strings.Contains(l, "%2f") || strings.Contains(l, "%5c") {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// CheckProxyHeaders checks a proxied request's headers: names are HTTP
// tokens (RFC 9110), values carry no CR, LF or NUL, at most
// MaxProxyHeaders values and MaxProxyHeaderBytes bytes of names and
// values in all.
func CheckProxyHeaders(h map[string][]string) error {
	n, size := 0, 0
	for name, values := range h {
		if !httpToken(name) {
			return fmt.Errorf("header name %q is not an HTTP token", name)
		}
		for _, v := range values {
			if strings.ContainsAny(v, "\r\n\x00") {
				return fmt.Errorf("header %s has a value with CR, LF or NUL", name)
			}
			n++
			size += len(name) + len(v)
		}
	}
	if n > MaxProxyHeaders || size > MaxProxyHeaderBytes {
		return fmt.Errorf("must hold at most %d values and %d bytes (it holds %d values, %d bytes)", MaxProxyHeaders, MaxProxyHeaderBytes, n, size)
	}
	return nil
}

func httpToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

package siteprotocol

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

const bindCmd = `{"id":"3f9a6c1e-2b7d-4e5f-9a10-6c2d8e4b7f01","issued_at":"2026-11-29T10:00:00.000Z","member_id":"9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80","operation":"bind-member","payload":{"account":"member-9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80","binding_id":"5d1e7f20-8a3b-4c6d-9e0f-1a2b3c4d5e6f","generation":1,"namespace":"project-0a1b2c3d","party_id":"9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80","revision":1},"project_id":"0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9"}`

// TestBindMemberAccountUIDIsOptionalAndShapeChecked covers the optional
// account_uid of bind-member (docs/site-protocol.md#the-accounts-uid-in-a-binding):
// absent is valid and decodes empty, a UID is kept as the Site reported it
// (any text resource_provisioning accepts), a control character, an
// over-long text or a non-string is refused.
func TestBindMemberAccountUIDIsOptionalAndShapeChecked(t *testing.T) {
	withUID := func(uid string) string {
		return strings.Replace(bindCmd, `"revision":1}`, `"revision":1,"account_uid":`+uid+`}`, 1)
	}
	for name, raw := range map[string]string{"absent": bindCmd, "uid": withUID(`"b3c1a2d4-5e6f-4a7b-8c9d-0e1f2a3b4c5d"`)} {
		c, _, err := ParseAppend([]byte(raw))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var p BindMemberPayload
		if err := decodeInto(c, &p); err != nil {
			t.Fatalf("%s: decode: %v", name, err)
		}
		if want := map[string]string{"absent": "", "uid": "b3c1a2d4-5e6f-4a7b-8c9d-0e1f2a3b4c5d"}[name]; p.AccountUID != want {
			t.Fatalf("%s: account_uid = %q, want %q", name, p.AccountUID, want)
		}
	}
	for _, bad := range []string{`"uid\u0007"`, `"` + strings.Repeat("u", MaxAccountUIDBytes+1) + `"`, `7`} {
		_, _, err := ParseAppend([]byte(withUID(bad)))
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("account_uid %s: want ErrInvalid, got %v", bad, err)
		}
	}
}

// slurmBind is bindCmd as delivered to a slurm environment: the member's
// Unix account jdoe with uid 1001, charged to the Slurm account proj-a.
var slurmBind = strings.NewReplacer(
	`"account":"member-9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80"`, `"account":"jdoe"`,
	`"namespace":"project-0a1b2c3d"`, `"namespace":"proj-a"`,
	`"revision":1}`, `"revision":1,"account_uid":"1001"}`,
).Replace(bindCmd)

// TestBindMemberIsValidatedByBackend: bind-member's identity rules follow
// the environment's backend (docs/site-protocol.md#member-identity-by-backend):
// at a slurm environment the account is a POSIX user name, the uid a
// required decimal Unix uid and the namespace a Slurm account; the
// Kubernetes form is refused there naming each field, and the Slurm form
// is refused at a Kubernetes environment naming the account.
func TestBindMemberIsValidatedByBackend(t *testing.T) {
	c, _, err := ParseAppendFor([]byte(slurmBind), BackendSlurm)
	if err != nil {
		t.Fatalf("slurm bind-member at a slurm environment: %v", err)
	}
	p, err := DecodePayload[BindMemberPayload](c)
	if err != nil || p.Account != "jdoe" || p.AccountUID != "1001" || p.Namespace != "proj-a" {
		t.Fatalf("decoded %+v, %v", p, err)
	}
	fields := func(err error) []string {
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("want a *ValidationError, got %v", err)
		}
		var out []string
		for _, f := range ve.Fields {
			out = append(out, f.Field)
		}
		return out
	}
	// The Slurm form at a Kubernetes environment (and so through
	// ParseAppend, the Kubernetes rules): the account is named.
	_, _, err = ParseAppend([]byte(slurmBind))
	if got := fields(err); !slices.Contains(got, "payload.account") || slices.Contains(got, "payload.account_uid") {
		t.Fatalf("slurm form at kubernetes: fields %v", got)
	}
	// The Kubernetes form at a slurm environment: account (member-<party>
	// is 43 characters, no POSIX user name), the missing uid and the
	// namespace are all named.
	_, _, err = ParseAppendFor([]byte(bindCmd), BackendSlurm)
	if got := fields(err); !slices.Equal(got, []string{"payload.account", "payload.account_uid"}) {
		t.Fatalf("kubernetes form at slurm: fields %v", got)
	}
	bad := map[string]string{
		`"account":"JDoe"`:                            "payload.account",
		`"account":"1jdoe"`:                           "payload.account",
		`"account":"` + strings.Repeat("a", 33) + `"`: "payload.account",
		`"account_uid":"0"`:                           "payload.account_uid",
		`"account_uid":"01001"`:                       "payload.account_uid",
		`"account_uid":"4294967295"`:                  "payload.account_uid",
		`"account_uid":"-1"`:                          "payload.account_uid",
		`"account_uid":"uid-1001"`:                    "payload.account_uid",
		`"namespace":"Proj-A"`:                        "payload.namespace",
		`"namespace":"proj a"`:                        "payload.namespace",
	}
	for repl, field := range bad {
		key := repl[:strings.Index(repl, ":")]
		var orig string
		switch key {
		case `"account"`:
			orig = `"account":"jdoe"`
		case `"account_uid"`:
			orig = `"account_uid":"1001"`
		default:
			orig = `"namespace":"proj-a"`
		}
		_, _, err := ParseAppendFor([]byte(strings.Replace(slurmBind, orig, repl, 1)), BackendSlurm)
		if got := fields(err); !slices.Equal(got, []string{field}) {
			t.Fatalf("%s: fields %v, want [%s]", repl, got, field)
		}
	}
	for _, ok := range []string{"_svc", "j", "jdoe-2_x", strings.Repeat("a", 32)} {
		if _, _, err := ParseAppendFor([]byte(strings.Replace(slurmBind, `"account":"jdoe"`, `"account":"`+ok+`"`, 1)), BackendSlurm); err != nil {
			t.Fatalf("account %q: %v", ok, err)
		}
	}
	if err := ValidatePayloadFor(c, Backend("nomad")); err == nil {
		t.Fatal("a backend outside the set has no bind-member rules")
	}
}

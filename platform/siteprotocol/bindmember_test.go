package siteprotocol

import (
	"errors"
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

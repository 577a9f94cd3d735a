package siteprotocol

import (
	"strings"
	"testing"
)

func proxyCommand(payload string) string {
	return `{"id": "3e8d2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6f", "operation": "proxy",
  "issued_at": "2026-11-29T10:00:00.123Z",
  "run_id": "5b0e2f9c-3a51-4f0e-9d7a-2f7c8e1b6a10", "attempt_id": "7d1f0c2a-6c4e-4b8f-a2d1-0e9f3b5c7a24",
  "member_id": "9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80", "project_id": "0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9",
  "account_ref": {"binding_id": "e41f0000-0000-4000-8000-000000000001", "generation": 1}, "family": "application",
  "payload": ` + payload + `}`
}

// A proxy's path, headers and body are checked on append: an absolute
// path with a query and multi-valued headers pass; "..", its
// percent-encoded forms, a backslash, a fragment, space or a relative path
// are refused naming payload.path; a header name that is not a token, a
// value with CR or LF, more than 64 values or 16 KiB are refused naming
// payload.headers.
func TestProxyPayloadRulesOnAppend(t *testing.T) {
	if _, _, err := ParseAppend([]byte(proxyCommand(`{"method": "POST", "path": "/v2/models/m/infer?x=1&y=%20", "headers": {"X-A": ["1", "2"]}, "body_base64": "e30="}`))); err != nil {
		t.Fatalf("a good proxy: %v", err)
	}
	many := make([]string, 65)
	for i := range many {
		many[i] = `"v"`
	}
	for name, c := range map[string]struct{ payload, field string }{
		"dot dot":         {`{"method": "GET", "path": "/a/../b"}`, "payload.path"},
		"encoded dot":     {`{"method": "GET", "path": "/a/%2E%2e/b"}`, "payload.path"},
		"encoded slash":   {`{"method": "GET", "path": "/a%2fb"}`, "payload.path"},
		"backslash":       {`{"method": "GET", "path": "/a\\b"}`, "payload.path"},
		"fragment":        {`{"method": "GET", "path": "/a#b"}`, "payload.path"},
		"space":           {`{"method": "GET", "path": "/a b"}`, "payload.path"},
		"relative":        {`{"method": "GET", "path": "a"}`, "payload.path"},
		"bad name":        {`{"method": "GET", "path": "/", "headers": {"X A": ["1"]}}`, "payload.headers"},
		"CR in value":     {`{"method": "GET", "path": "/", "headers": {"X-A": ["1\r\nX-B: 2"]}}`, "payload.headers"},
		"too many values": {`{"method": "GET", "path": "/", "headers": {"X-A": [` + strings.Join(many, ",") + `]}}`, "payload.headers"},
		"too many bytes":  {`{"method": "GET", "path": "/", "headers": {"X-A": ["` + strings.Repeat("x", MaxProxyHeaderBytes) + `"]}}`, "payload.headers"},
	} {
		fields := fieldErrors(t, proxyCommand(c.payload))
		if len(fields) == 0 || fields[0].Field != c.field {
			t.Errorf("%s: refused %v, want %s", name, fields, c.field)
		}
	}
}

// A private read needs account_ref on append (it acts through the member's
// binding), and proxy a service family: a batch proxy and a read without
// account_ref are refused naming the member, while the pulled side
// (ParsePulled) still takes them, so that a command stored before the rule
// never stops a stream (docs/site-protocol.md#private-reads).
func TestAReadNeedsItsBindingAndAProxyAServiceOnAppendOnly(t *testing.T) {
	withoutRef := func(raw string) string {
		return strings.Replace(raw, `"account_ref": {"binding_id": "e41f0000-0000-4000-8000-000000000001", "generation": 1}, `, "", 1)
	}
	read := func(op, payload string) string {
		return strings.Replace(proxyCommand(payload), `"operation": "proxy"`, `"operation": "`+op+`"`, 1)
	}
	get := `{"method": "GET", "path": "/"}`
	for name, c := range map[string]struct{ raw, field string }{
		"a batch proxy":               {strings.Replace(proxyCommand(get), `"family": "application"`, `"family": "batch"`, 1), "family"},
		"a proxy without account_ref": {withoutRef(proxyCommand(get)), "account_ref"},
		"a read-logs without it":      {withoutRef(read("read-logs", `{"tail_bytes": 10}`)), "account_ref"},
		"a read-file without it":      {withoutRef(read("read-file", `{"path": "a", "max_bytes": 10}`)), "account_ref"},
		"an empty container":          {read("read-logs", `{"container": "", "tail_bytes": 10}`), "payload.container"},
	} {
		fields := fieldErrors(t, c.raw)
		if len(fields) != 1 || fields[0].Field != c.field {
			t.Errorf("%s: refused %v, want exactly %s", name, fields, c.field)
		}
		if _, _, err := ParseAppend([]byte(strings.Replace(c.raw, `"family": "batch"`, `"family": "inference"`, 1))); c.field == "family" && err != nil {
			t.Errorf("%s as inference: %v", name, err)
		}
	}
	for name, raw := range map[string]string{
		"an inference proxy":     strings.Replace(proxyCommand(get), `"family": "application"`, `"family": "inference"`, 1),
		"a batch read-logs":      strings.Replace(read("read-logs", `{"tail_bytes": 10}`), `"family": "application"`, `"family": "batch"`, 1),
		"an inference read-file": strings.Replace(read("read-file", `{"path": "a", "max_bytes": 10}`), `"family": "application"`, `"family": "inference"`, 1),
	} {
		if _, _, err := ParseAppend([]byte(raw)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// As pulled: the same batch proxy without account_ref is a valid envelope.
	c, _, err := ParseAppend([]byte(read("observe", "{}")))
	if err != nil {
		t.Fatal(err)
	}
	c.Operation, c.Family, c.AccountRef, c.Payload = OpProxy, FamilyBatch, nil, []byte(get)
	if err := ValidateEnvelope(c); err != nil {
		t.Errorf("a stored batch proxy without account_ref as pulled: %v", err)
	}
}

// One refusal names every member at fault, whichever check finds it: the
// envelope's, the payload's and append's own rules together.
func TestAnAppendRefusalNamesEveryMemberAtFault(t *testing.T) {
	raw := strings.Replace(proxyCommand(`{"method": "GET", "path": "/a/../b"}`), `"family": "application"`, `"family": "batch"`, 1)
	raw = strings.Replace(raw, `"account_ref": {"binding_id": "e41f0000-0000-4000-8000-000000000001", "generation": 1}, `, "", 1)
	raw = strings.Replace(raw, `"2026-11-29T10:00:00.123Z"`, `"yesterday"`, 1)
	var got []string
	for _, f := range fieldErrors(t, raw) {
		got = append(got, f.Field)
	}
	if want := []string{"issued_at", "payload.path", "account_ref", "family"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("refused %v, want %v", got, want)
	}
}

package siteprotocol

import (
	"errors"
	"strings"
	"testing"
)

const testImage = "registry.example.org/lab/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// appPrepare is an application prepare whose payload members are
// replaced by the cases below.
func appPrepare(payload string) string {
	return `{"id": "3e8d2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e", "operation": "prepare",
  "issued_at": "2026-11-29T10:00:00.123Z",
  "run_id": "5b0e2f9c-3a51-4f0e-9d7a-2f7c8e1b6a10", "attempt_id": "7d1f0c2a-6c4e-4b8f-a2d1-0e9f3b5c7a24",
  "member_id": "9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80", "project_id": "0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9",
  "account_ref": {"binding_id": "e41f0000-0000-4000-8000-000000000001", "generation": 1}, "family": "application",
  "payload": {"workspace_size_bytes": 1073741824, "service_kind": "application", ` + payload + `}}`
}

const goodApp = `"image": "` + testImage + `", "port": 8080, "readiness": {"path": "/healthz", "initial_delay_seconds": 0, "period_seconds": 5}, "demand": {"cpu": 500, "memory": 536870912}`

// fieldErrors returns the fields and messages ParseAppend refuses raw
// with, or fails the test when it is accepted.
func fieldErrors(t *testing.T, raw string) []FieldError {
	t.Helper()
	_, _, err := ParseAppend([]byte(raw))
	var ve *ValidationError
	var de *DecodeError
	switch {
	case errors.As(err, &ve):
		return ve.Fields
	case errors.As(err, &de):
		return []FieldError{{Field: de.Field, Message: de.Message}}
	}
	t.Fatalf("accepted or refused otherwise: %v", err)
	return nil
}

func TestAnApplicationPrepareIsAccepted(t *testing.T) {
	if _, _, err := ParseAppend([]byte(appPrepare(goodApp))); err != nil {
		t.Fatal(err)
	}
}

// The readiness rules of docs/site-protocol.md#operations are checked on
// append, each fault once under its own member.
func TestReadinessRulesAreCheckedOnAppend(t *testing.T) {
	cases := []struct{ name, readiness, field, message string }{
		{"relative path", `{"path": "healthz"}`, "payload.readiness.path", "must be an absolute HTTP path"},
		{"path with a space", `{"path": "/a b"}`, "payload.readiness.path", "must be an absolute HTTP path"},
		{"no path", `{}`, "payload.readiness.path", "must be an absolute HTTP path"},
		{"negative delay", `{"path": "/h", "initial_delay_seconds": -5}`, "payload.readiness.initial_delay_seconds", "must be a number of seconds from 0 to 2147483647"},
		{"negative period", `{"path": "/h", "period_seconds": -1}`, "payload.readiness.period_seconds", "must be a number of seconds from 0 to 2147483647"},
		{"period beyond int32", `{"path": "/h", "period_seconds": 2147483648}`, "payload.readiness.period_seconds", "must be an integer from 0 to 2147483647"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			payload := strings.Replace(goodApp, `{"path": "/healthz", "initial_delay_seconds": 0, "period_seconds": 5}`, c.readiness, 1)
			fs := fieldErrors(t, appPrepare(payload))
			if len(fs) != 1 || fs[0].Field != c.field || !strings.HasPrefix(fs[0].Message, c.message) {
				t.Fatalf("got %+v; want one %s: %s…", fs, c.field, c.message)
			}
		})
	}
}

func TestPortAndDemandFaultsGetOnePreciseMessage(t *testing.T) {
	cases := []struct{ name, from, to, field, message string }{
		{"port 0", `"port": 8080`, `"port": 0`, "payload.port", "must be an integer from 1 to 65535"},
		{"port 65536", `"port": 8080`, `"port": 65536`, "payload.port", "must be an integer from 1 to 65535"},
		{"port 2^40", `"port": 8080`, `"port": 1099511627776`, "payload.port", "must be an integer from 1 to 65535"},
		{"port with an exponent", `"port": 8080`, `"port": 1e3`, "payload.port", "must be an integer written in digits, without a fraction or an exponent, from 1 to 65535"},
		{"port with a fraction", `"port": 8080`, `"port": 8080.5`, "payload.port", "must be an integer written in digits, without a fraction or an exponent, from 1 to 65535"},
		{"negative cpu", `"cpu": 500`, `"cpu": -1`, "payload.demand.cpu", "must be a positive number of millicores"},
		{"negative memory", `"memory": 536870912`, `"memory": -1`, "payload.demand.memory", "must be a positive number of bytes"},
		{"negative gpu", `"cpu": 500`, `"cpu": 500, "gpu.nvidia": -1`, "payload.demand.gpu.nvidia", "must not be negative"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := fieldErrors(t, appPrepare(strings.Replace(goodApp, c.from, c.to, 1)))
			if len(fs) != 1 || fs[0].Field != c.field || !strings.HasPrefix(fs[0].Message, c.message) {
				t.Fatalf("got %+v; want one %s: %s…", fs, c.field, c.message)
			}
			if strings.Contains(fs[0].Message, "9007199254740991") {
				t.Fatalf("the I-JSON range is not this member's: %q", fs[0].Message)
			}
		})
	}
}

// Image references are parsed as OCI references (go-containerregistry,
// strict), not matched by outline only.
func TestIsPinnedImage(t *testing.T) {
	const h = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	good := []string{
		"registry.example.org/lab/app@sha256:" + h,
		"localhost:5000/a/b@sha256:" + h,
		"registry.example.org/lab/app:v1@sha256:" + h,
		"registry.example.org/lab/my_app-x.y@sha256:" + h,
	}
	bad := []string{
		"::://@sha256:" + h,
		"registry.example.org/@sha256:" + h,
		"registry.example.org//app@sha256:" + h,
		"busybox@sha256:" + h,                       // registry not explicit
		"registry.example.org/App@sha256:" + h,      // upper case repository
		"registry.example.org/app@sha512:" + h,      // not sha256
		"registry.example.org/app@sha256:" + h[:63], // short digest
		"registry.example.org/app@sha256:" + strings.ToUpper(h),
		"registry.example.org/app:v1", // a tag alone
		"-registry.example.org/app@sha256:" + h,
		"registry.example.org/-app@sha256:" + h,
		"registry.example.org/a pp@sha256:" + h,
	}
	for _, s := range good {
		if !IsPinnedImage(s) {
			t.Errorf("refused %q", s)
		}
	}
	for _, s := range bad {
		if IsPinnedImage(s) {
			t.Errorf("accepted %q", s)
		}
	}
	fs := fieldErrors(t, appPrepare(strings.Replace(goodApp, testImage, "::://@sha256:"+h, 1)))
	if len(fs) != 1 || fs[0].Field != "payload.image" {
		t.Fatalf("got %+v; want one payload.image", fs)
	}
}

package siteprotocol

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
)

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// The operator's view of a command and of a result keeps their envelope and
// replaces every private value (read contents, proxied bodies and header
// values, env values) by its size and SHA-256, so no byte of it is left
// (docs/operations.md#operator-reads).
func TestTheOperatorViewShowsPrivateValuesAsSizesAndDigestsOnly(t *testing.T) {
	secret := "password=hunter2 and the model's private log line"
	b64 := base64.StdEncoding.EncodeToString([]byte(secret))
	cmd := `{"id":"x","operation":"start","payload":{"argv":["run"],"env":{"TOKEN":"` + secret + `"}}}`
	proxy := `{"id":"y","operation":"proxy","payload":{"method":"POST","path":"/v2/infer","headers":{"X-Key":["` + secret + `"]},"body_base64":"` + b64 + `"}}`
	result := `{"command_id":"x","outcome":"succeeded","reason":"read","message":"read 49 bytes","detail":{"container":"main","content_base64":"` + b64 + `","truncated":false},"digest":"d"}`
	answer := `{"command_id":"y","outcome":"succeeded","reason":"proxied","message":"200","detail":{"status":200,"headers":{"Content-Type":["` + secret + `"]},"body_base64":"` + b64 + `","truncated":false}}`
	for _, raw := range []string{cmd, proxy, result, answer} {
		v, err := OperatorView([]byte(raw))
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if strings.Contains(string(v), secret) || strings.Contains(string(v), b64) || strings.Contains(string(v), "hunter2") {
			t.Fatalf("the view shows private bytes: %s", v)
		}
		if !strings.Contains(string(v), `"sha256":"`+digestOf(secret)+`"`) || !strings.Contains(string(v), `"size_bytes":49`) {
			t.Fatalf("the view lacks the private value's size and digest: %s", v)
		}
		var back map[string]json.RawMessage
		if err := json.Unmarshal(v, &back); err != nil || back["id"] == nil && back["command_id"] == nil {
			t.Fatalf("the view lost its envelope: %s (%v)", v, err)
		}
	}
	v, _ := OperatorView([]byte(result))
	var r struct {
		Detail struct {
			Container string       `json:"container"`
			Content   PrivateValue `json:"content"`
		} `json:"detail"`
	}
	if err := json.Unmarshal(v, &r); err != nil || r.Detail.Container != "main" || !r.Detail.Content.Private || r.Detail.Content.SizeBytes != len(secret) {
		t.Fatalf("a read's content in the view: %s (%v)", v, err)
	}
	if _, err := OperatorView([]byte(`[1]`)); err == nil {
		t.Fatal("an array has an operator view")
	}
}

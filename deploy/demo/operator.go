package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"

	"github.com/google/uuid"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// operatorView is the operator's look at every stream with `metallo ctl`
// (docs/operations.md#operator-reads), run as processes of the binary with
// the operator key operator:demo from a key file (METALLO_KEY_FILE): the
// listing shows alpha-k8s with its head, acknowledged sequence and lag, its
// installation and Runtime version; the commands show the member's
// read-logs results with the log content as its size and SHA-256 — the
// demo checks that digest against the exact bytes the service key reads —
// and no byte of it; the operator key's append is refused 403, and the
// audit log names the refusal.
func (d *demo) operatorView(ctx context.Context) error {
	d.section("An operator sees every stream with metallo ctl (an operator:demo key; member data as sizes and digests)")
	keyFile := d.path("operator.key")
	env := append(os.Environ(), "METALLO_KEY_FILE="+keyFile)
	ctl := func(args ...string) ([]byte, error) {
		full := append([]string{"ctl", "--server", d.base}, args...)
		if d.caFile != "" {
			full = append([]string{"ctl", "--server", d.base, "--ca-file", d.caFile}, args...)
		}
		cmd := exec.CommandContext(ctx, d.bin, full...)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return out, fmt.Errorf("metallo %s: %w: %s", strings.Join(full, " "), err, stderr.String())
		}
		return out, nil
	}

	table, err := ctl("environments")
	if err != nil {
		return err
	}
	d.say("METALLO_KEY_FILE=%s metallo ctl environments:", rel(keyFile))
	for _, line := range strings.Split(strings.TrimRight(string(table), "\n"), "\n") {
		d.say("  | %s", line)
	}
	raw, err := ctl("environments", "-o", "json")
	if err != nil {
		return err
	}
	var listing struct {
		Environments []struct {
			Environment          string  `json:"environment"`
			HeadSequence         int64   `json:"head_sequence"`
			AcknowledgedSequence int64   `json:"acknowledged_sequence"`
			Lag                  int64   `json:"lag"`
			InstallationID       string  `json:"installation_id"`
			RuntimeVersion       *string `json:"runtime_version"`
			Stop                 *struct {
				Reason string `json:"reason"`
			} `json:"stop"`
		} `json:"environments"`
	}
	if err := json.Unmarshal(raw, &listing); err != nil {
		return err
	}
	found := false
	for _, e := range listing.Environments {
		if e.Environment != environment {
			continue
		}
		found = true
		if e.HeadSequence == 0 || e.Lag != e.HeadSequence-e.AcknowledgedSequence || e.InstallationID == "" || e.RuntimeVersion == nil || e.Stop != nil {
			return fmt.Errorf("the listing's %s: %s", environment, raw)
		}
		d.say("%s: head %d, acknowledged %d, lag %d, installation %s, Runtime %s, no stop on record",
			environment, e.HeadSequence, e.AcknowledgedSequence, e.Lag, e.InstallationID, *e.RuntimeVersion)
	}
	if !found {
		return fmt.Errorf("the listing has no %s: %s", environment, raw)
	}

	table, err = ctl("commands", environment, "--operation", "read-logs")
	if err != nil {
		return err
	}
	d.say("metallo ctl commands %s --operation read-logs:", environment)
	for _, line := range strings.Split(strings.TrimRight(string(table), "\n"), "\n") {
		d.say("  | %s", line)
	}
	raw, err = ctl("commands", environment, "--operation", "read-logs", "-o", "json")
	if err != nil {
		return err
	}
	var page struct {
		Commands []struct {
			ID      string          `json:"id"`
			Outcome string          `json:"outcome"`
			Result  json.RawMessage `json:"result"`
		} `json:"commands"`
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		return err
	}
	checked := 0
	for _, c := range page.Commands {
		if c.Outcome != string(siteprotocol.OutcomeSucceeded) {
			continue
		}
		var view struct {
			Detail struct {
				Content       *siteprotocol.PrivateValue `json:"content"`
				ContentBase64 *string                    `json:"content_base64"`
			} `json:"detail"`
		}
		if err := json.Unmarshal(c.Result, &view); err != nil || view.Detail.Content == nil || view.Detail.ContentBase64 != nil {
			return fmt.Errorf("read-logs %s as the operator sees it: %s (%v)", c.ID, c.Result, err)
		}
		// The exact bytes, with the service key (the member's path).
		var rec siteprotocol.CommandRecord
		if _, _, err := d.call(ctx, http.MethodGet, "/execution/v1/streams/"+environment+"/commands/"+c.ID, d.keys["service:execution"], nil, &rec); err != nil {
			return err
		}
		r, err := siteprotocol.ParseResult(rec.Result)
		if err != nil {
			return err
		}
		detail, err := siteprotocol.DecodeDetail[siteprotocol.ReadLogsDetail](r)
		if err != nil {
			return err
		}
		content, err := base64.StdEncoding.DecodeString(detail.ContentBase64)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(content)
		if view.Detail.Content.SizeBytes != len(content) || view.Detail.Content.SHA256 != hex.EncodeToString(sum[:]) {
			return fmt.Errorf("read-logs %s: the operator sees %+v; the content is %d bytes with SHA-256 %x", c.ID, *view.Detail.Content, len(content), sum)
		}
		for _, shown := range [][]byte{table, raw} {
			if len(content) > 0 && (bytes.Contains(shown, content) || bytes.Contains(shown, []byte(detail.ContentBase64))) {
				return fmt.Errorf("metallo ctl shows the member's log of %s", c.ID)
			}
		}
		checked++
	}
	if checked == 0 {
		return fmt.Errorf("no succeeded read-logs among the commands: %s", raw)
	}
	d.say("%d read-logs results: the log content shown as its size and SHA-256 (the digest of the exact bytes the service key reads), never the bytes", checked)

	attempt := d.path("operator-append.json")
	if err := os.WriteFile(attempt, []byte(`{"id":"`+uuid.NewString()+`","operation":"observe","issued_at":"2026-08-20T10:40:00Z"}`), 0o600); err != nil {
		return err
	}
	refused, err := ctl("append", environment, "--file", attempt)
	if err == nil || !strings.Contains(err.Error(), "403 forbidden") {
		return fmt.Errorf("the operator key's append was not refused 403: %s %v", refused, err)
	}
	d.say("metallo ctl append with the operator key: 403 forbidden (append, rebind and plan take a service key)")
	log, err := os.ReadFile(d.path("central.log"))
	if err != nil {
		return err
	}
	for _, line := range bytes.Split(log, []byte("\n")) {
		var l map[string]any
		if json.Unmarshal(line, &l) != nil || l["logger"] != "audit" || l["principal"] != "operator:demo" || l["operation"] != "append-command" {
			continue
		}
		if l["outcome"] != "refused" || l["status"] != float64(http.StatusForbidden) {
			return fmt.Errorf("the audit line of the refused append: %s", line)
		}
		d.say("the audit log: principal %v, %v %v, target %v, %v %v, request %v", l["principal"], l["method"], l["route"], l["target"], l["status"], l["outcome"], l["request_id"])
		return nil
	}
	return fmt.Errorf("no audit line of the operator's refused append in %s", rel(d.path("central.log")))
}

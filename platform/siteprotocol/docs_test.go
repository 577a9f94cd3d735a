package siteprotocol_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// protocolDoc is the normative protocol document, docs/site-protocol.md.
const protocolDoc = "../../docs/site-protocol.md"

// docExample is one JSON example of the protocol document: the kind named
// by the marker line `<!-- example: KIND -->` right before its ```json
// fence, its text and the line it starts on.
type docExample struct {
	kind string
	text []byte
	line int
}

var exampleMarker = regexp.MustCompile(`^<!-- example: ([a-z]+) -->$`)

// docExamples returns every ```json block of the document. A block
// without a marker right before it is an error: every JSON example of the
// protocol must be one the test checks.
func docExamples(t *testing.T) []docExample {
	t.Helper()
	raw, err := os.ReadFile(protocolDoc)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	var out []docExample
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```json" {
			continue
		}
		kind := ""
		if i > 0 {
			if m := exampleMarker.FindStringSubmatch(strings.TrimSpace(lines[i-1])); m != nil {
				kind = m[1]
			}
		}
		if kind == "" {
			t.Errorf("%s:%d: a ```json block without an `<!-- example: KIND -->` line right before it", protocolDoc, i+1)
		}
		start := i + 1
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("%s:%d: unterminated ```json block", protocolDoc, start)
		}
		out = append(out, docExample{kind: kind, text: []byte(strings.Join(body, "\n")), line: start + 1})
	}
	return out
}

// strictDecode decodes b into v refusing unknown members, after the
// protocol's strict JSON check.
func strictDecode(b []byte, v any) error {
	if err := siteprotocol.CheckJSON(b); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// problemReasons are the reasons a Site route's problem may carry
// (siteprotocol.Problem…).
var problemReasons = []string{
	siteprotocol.ProblemOutOfOrder, siteprotocol.ProblemIdentityMismatch, siteprotocol.ProblemResultConflict,
	siteprotocol.ProblemInstallationMismatch, siteprotocol.ProblemConflictingRetry, siteprotocol.ProblemUnknownEnvironment,
	siteprotocol.ProblemUnknownCommand, siteprotocol.ProblemInvalidCommand, siteprotocol.ProblemInvalidResult,
	siteprotocol.ProblemInstallationRequired, siteprotocol.ProblemForbidden, siteprotocol.ProblemUnauthenticated,
}

// TestTheProtocolDocumentsExamplesDecodeAndCarryTheDigestsTheCodecComputes
// reads every JSON example of docs/site-protocol.md and checks it with the
// codec the server and the Runtime use:
//   - appended commands pass ParseAppend (a digest given must be the
//     computed one) and pulled commands ParsePulled (their digest is
//     verified);
//   - the canonical form shown is exactly the JCS form of its command
//     without sequence and digest, and digests to that command's digest;
//   - results pass ParseResult (their digest is verified), and name the
//     digest and sequence of the command they answer;
//   - an append receipt names its command's digest, an acknowledgement
//     the digest of the result it acknowledges;
//   - observe details, stream states, rebinds and problems decode strictly into their wire
//     types, a rebind names exactly one of installation_id and unbind, and
//     a problem's reason is one of the protocol's.
func TestTheProtocolDocumentsExamplesDecodeAndCarryTheDigestsTheCodecComputes(t *testing.T) {
	examples := docExamples(t)
	type known struct {
		digest   string
		sequence int64 // 0 when only appended
	}
	commands := map[string]*known{}
	results := map[int64]string{} // sequence → result digest
	remember := func(ex docExample, c siteprotocol.Command) {
		k := commands[c.ID]
		if k == nil {
			k = &known{digest: c.Digest}
			commands[c.ID] = k
		}
		if k.digest != c.Digest {
			t.Errorf("line %d: command %s digests to %s here and to %s in an earlier example", ex.line, c.ID, c.Digest, k.digest)
		}
		if c.Sequence != 0 {
			k.sequence = c.Sequence
		}
	}
	// Commands first, wherever they appear, so that every later check can
	// refer to them.
	for _, ex := range examples {
		switch ex.kind {
		case "append":
			c, _, err := siteprotocol.ParseAppend(ex.text)
			if err != nil {
				t.Errorf("line %d: an appended command the codec refuses: %v", ex.line, err)
				continue
			}
			remember(ex, c)
		case "command":
			c, err := siteprotocol.ParsePulled(ex.text)
			if err != nil {
				t.Errorf("line %d: a pulled command the codec refuses: %v", ex.line, err)
				continue
			}
			remember(ex, c)
		case "record":
			var rec siteprotocol.CommandRecord
			if err := strictDecode(ex.text, &rec); err != nil {
				t.Errorf("line %d: a command record that does not decode: %v", ex.line, err)
				continue
			}
			c, err := siteprotocol.ParsePulled(rec.Command)
			if err != nil {
				t.Errorf("line %d: a recorded command the codec refuses: %v", ex.line, err)
				continue
			}
			remember(ex, c)
		case "pull":
			var p siteprotocol.Pull
			if err := strictDecode(ex.text, &p); err != nil {
				t.Errorf("line %d: a pull answer that does not decode: %v", ex.line, err)
				continue
			}
			if len(p.Commands) == 0 {
				t.Errorf("line %d: a pull example without commands", ex.line)
			}
			for _, raw := range p.Commands {
				c, err := siteprotocol.ParsePulled(raw)
				if err != nil {
					t.Errorf("line %d: a pulled command the codec refuses: %v", ex.line, err)
					continue
				}
				remember(ex, c)
				if c.Sequence > p.HeadSequence || c.Sequence <= p.AcknowledgedSequence {
					t.Errorf("line %d: command %d outside (acknowledged %d, head %d]", ex.line, c.Sequence, p.AcknowledgedSequence, p.HeadSequence)
				}
			}
		}
	}
	for _, ex := range examples {
		switch ex.kind {
		case "append", "command", "pull":
		case "canonical":
			canonical, err := siteprotocol.Canonical(ex.text)
			if err != nil || !bytes.Equal(canonical, ex.text) {
				t.Errorf("line %d: not in canonical (RFC 8785) form: %v\n got: %s\nwant: %s", ex.line, err, ex.text, canonical)
				continue
			}
			digest, _, err := siteprotocol.CommandDigest(ex.text)
			if err != nil {
				t.Errorf("line %d: %v", ex.line, err)
				continue
			}
			var c siteprotocol.Command
			if err := strictDecode(ex.text, &c); err != nil {
				t.Errorf("line %d: %v", ex.line, err)
				continue
			}
			if k := commands[c.ID]; k == nil || k.digest != digest {
				t.Errorf("line %d: the canonical form of command %s digests to %s, which no command example has", ex.line, c.ID, digest)
			}
		case "result":
			r, err := siteprotocol.ParseResult(ex.text)
			if err != nil {
				t.Errorf("line %d: a result the codec refuses: %v", ex.line, err)
				continue
			}
			k := commands[r.CommandID]
			switch {
			case k == nil:
				t.Errorf("line %d: the result answers command %s, which no example shows", ex.line, r.CommandID)
			case r.CommandDigest != k.digest:
				t.Errorf("line %d: command_digest %s; command %s digests to %s", ex.line, r.CommandDigest, r.CommandID, k.digest)
			case k.sequence != 0 && r.Sequence != k.sequence:
				t.Errorf("line %d: the result names sequence %d; command %s is sequence %d", ex.line, r.Sequence, r.CommandID, k.sequence)
			}
			results[r.Sequence] = r.Digest
		case "record":
			checkRecordedResult(t, ex, results)
		}
	}
	for _, ex := range examples {
		switch ex.kind {
		case "append", "command", "pull", "canonical", "result", "record":
		case "receipt":
			var a siteprotocol.AppendReceipt
			if err := strictDecode(ex.text, &a); err != nil {
				t.Errorf("line %d: an append receipt that does not decode: %v", ex.line, err)
				continue
			}
			k := commands[a.ID]
			switch {
			case k == nil:
				t.Errorf("line %d: a receipt for command %s, which no example shows", ex.line, a.ID)
			case a.Digest != k.digest:
				t.Errorf("line %d: the receipt names digest %s; command %s digests to %s", ex.line, a.Digest, a.ID, k.digest)
			case k.sequence != 0 && a.Sequence != k.sequence:
				t.Errorf("line %d: the receipt names sequence %d; command %s is sequence %d", ex.line, a.Sequence, a.ID, k.sequence)
			}
		case "acknowledgement":
			var a siteprotocol.Acknowledgement
			if err := strictDecode(ex.text, &a); err != nil {
				t.Errorf("line %d: an acknowledgement that does not decode: %v", ex.line, err)
				continue
			}
			if got, ok := results[a.AcknowledgedSequence]; !ok || got != a.ResultDigest {
				t.Errorf("line %d: acknowledges sequence %d with result digest %s; the result example of that sequence digests to %q", ex.line, a.AcknowledgedSequence, a.ResultDigest, got)
			}
		case "state":
			var s siteprotocol.StreamState
			if err := strictDecode(ex.text, &s); err != nil {
				t.Errorf("line %d: a stream state that does not decode: %v", ex.line, err)
				continue
			}
			if s.AcknowledgedSequence > s.HeadSequence {
				t.Errorf("line %d: acknowledged %d beyond head %d", ex.line, s.AcknowledgedSequence, s.HeadSequence)
			}
		case "rebind":
			var r siteprotocol.Rebind
			if err := strictDecode(ex.text, &r); err != nil {
				t.Errorf("line %d: a rebind that does not decode: %v", ex.line, err)
				continue
			}
			if (r.InstallationID == "") == !r.Unbind || r.Reason == "" {
				t.Errorf("line %d: a rebind names exactly one of installation_id and unbind, and a reason: %s", ex.line, ex.text)
			}
		case "observe":
			var d siteprotocol.ObserveDetail
			if err := strictDecode(ex.text, &d); err != nil {
				t.Errorf("line %d: an observe detail that does not decode: %v", ex.line, err)
				continue
			}
			if d.State == "" {
				t.Errorf("line %d: an observe detail without a state: %s", ex.line, ex.text)
			}
		case "readlogs":
			var d siteprotocol.ReadLogsDetail
			if err := strictDecode(ex.text, &d); err != nil {
				t.Errorf("line %d: a read-logs detail that does not decode: %v", ex.line, err)
				continue
			}
			if _, err := base64.StdEncoding.DecodeString(d.ContentBase64); err != nil || d.Container == "" {
				t.Errorf("line %d: a read-logs detail needs standard base64 content and its container: %s (%v)", ex.line, ex.text, err)
			}
		case "problem":
			var p struct {
				Type   string `json:"type"`
				Title  string `json:"title"`
				Status int    `json:"status"`
				Detail string `json:"detail"`
				Reason string `json:"reason"`
				// Instance is the request's ID (every problem of the
				// central roles carries it).
				Instance string `json:"instance"`
			}
			if err := strictDecode(ex.text, &p); err != nil {
				t.Errorf("line %d: a problem that does not decode: %v", ex.line, err)
				continue
			}
			if p.Status < 400 || p.Status > 599 || !slices.Contains(problemReasons, p.Reason) || !strings.HasPrefix(p.Instance, "urn:metallo:request:") {
				t.Errorf("line %d: status %d, reason %q, instance %q: want a 4xx or 5xx, one of %v and the request's ID", ex.line, p.Status, p.Reason, p.Instance, problemReasons)
			}
		default:
			t.Errorf("line %d: unknown example kind %q", ex.line, ex.kind)
		}
	}
	if len(commands) == 0 || len(results) == 0 {
		t.Fatalf("the document shows %d commands and %d results; it must show both", len(commands), len(results))
	}
}

// TestTheExampleCheckFailsOnAWrongDigest proves the document test can
// fail: the start command's example with one digit of its digest changed
// is refused by the codec.
func TestTheExampleCheckFailsOnAWrongDigest(t *testing.T) {
	for _, ex := range docExamples(t) {
		if ex.kind != "command" {
			continue
		}
		c, err := siteprotocol.ParsePulled(ex.text)
		if err != nil {
			t.Fatal(err)
		}
		wrong := strings.Replace(string(ex.text), c.Digest, strings.Repeat("0", 64), 1)
		if _, err := siteprotocol.ParsePulled([]byte(wrong)); err == nil {
			t.Fatalf("a pulled command with digest 000… was accepted")
		}
		return
	}
	t.Fatal("the document has no pulled command example")
}

// checkRecordedResult checks a command record example
// (docs/site-protocol.md#read-results-expire): a record with its result
// names the result's digest and answers its command; an expired one
// (result_expired_at) has no result, is a read's, and keeps the digest of
// the result recorded for its sequence in an earlier example.
func checkRecordedResult(t *testing.T, ex docExample, results map[int64]string) {
	t.Helper()
	var rec siteprotocol.CommandRecord
	if err := strictDecode(ex.text, &rec); err != nil {
		return // reported in the first pass
	}
	c, err := siteprotocol.ParsePulled(rec.Command)
	if err != nil {
		return
	}
	if !siteprotocol.IsDigest(rec.ResultDigest) || rec.AcknowledgedAt == "" {
		t.Errorf("line %d: a record example without result_digest or acknowledged_at", ex.line)
		return
	}
	if rec.ResultExpiredAt == "" {
		r, err := siteprotocol.ParseResult(rec.Result)
		switch {
		case err != nil:
			t.Errorf("line %d: a recorded result the codec refuses: %v", ex.line, err)
		case r.Digest != rec.ResultDigest || r.CommandID != c.ID || r.CommandDigest != c.Digest || r.Sequence != c.Sequence:
			t.Errorf("line %d: the recorded result (%s, for %s/%d) does not match result_digest %s or the command %s/%d", ex.line, r.Digest, r.CommandID, r.Sequence, rec.ResultDigest, c.ID, c.Sequence)
		default:
			results[c.Sequence] = r.Digest
		}
		return
	}
	switch {
	case rec.Result != nil:
		t.Errorf("line %d: an expired record still carries its result", ex.line)
	case !c.Operation.IsRead():
		t.Errorf("line %d: an expired record of %s, which is not a read", ex.line, c.Operation)
	case results[c.Sequence] != rec.ResultDigest:
		t.Errorf("line %d: the expired record keeps digest %s; the result of sequence %d digests to %q", ex.line, rec.ResultDigest, c.Sequence, results[c.Sequence])
	}
}

// readmeBlocks returns the ```json blocks of the README's section that
// starts with heading, each as its non-empty lines.
func readmeBlocks(t *testing.T, heading string) [][]string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no section %q", heading)
	}
	if end := strings.Index(section, "\n#"); end >= 0 {
		section = section[:end]
	}
	var blocks [][]string
	for _, part := range strings.Split(section, "```json\n")[1:] {
		body, _, _ := strings.Cut(part, "```")
		var lines []string
		for _, l := range strings.Split(body, "\n") {
			if strings.TrimSpace(l) != "" {
				lines = append(lines, l)
			}
		}
		blocks = append(blocks, lines)
	}
	return blocks
}

// The README's private-read examples are what the protocol takes and
// answers: each payload passes ValidatePayload for its operation, and
// each result detail decodes strictly into read-logs', read-file's and
// proxy's detail, in that order, its content valid base64.
func TestTheREADMEsPrivateReadExamplesAreValid(t *testing.T) {
	blocks := readmeBlocks(t, "### Private reads")
	if len(blocks) != 2 || len(blocks[0]) < 3 || len(blocks[1]) != 3 {
		t.Fatalf("want a block of payloads and one of three details, got %q", blocks)
	}
	seen := map[siteprotocol.Operation]bool{}
	for _, line := range blocks[0] {
		var ex struct {
			Operation siteprotocol.Operation `json:"operation"`
			Payload   json.RawMessage        `json:"payload"`
		}
		if err := strictDecode([]byte(line), &ex); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		family := siteprotocol.Family("batch")
		if ex.Operation == siteprotocol.OpProxy {
			family = "application"
		}
		c := siteprotocol.Command{Operation: ex.Operation, Family: family, Payload: ex.Payload}
		if err := siteprotocol.ValidatePayload(c); err != nil {
			t.Errorf("%s: %v", line, err)
		}
		seen[ex.Operation] = true
	}
	for _, op := range []siteprotocol.Operation{siteprotocol.OpReadLogs, siteprotocol.OpReadFile, siteprotocol.OpProxy} {
		if !seen[op] {
			t.Errorf("no example of %s", op)
		}
	}
	var logs siteprotocol.ReadLogsDetail
	var file siteprotocol.ReadFileDetail
	var proxy siteprotocol.ProxyDetail
	contents := []func() string{
		func() string { return logs.ContentBase64 }, func() string { return file.ContentBase64 }, func() string { return proxy.BodyBase64 },
	}
	for i, v := range []any{&logs, &file, &proxy} {
		if err := strictDecode([]byte(blocks[1][i]), v); err != nil {
			t.Fatalf("%s: %v", blocks[1][i], err)
		}
		if _, err := base64.StdEncoding.DecodeString(contents[i]()); err != nil || contents[i]() == "" {
			t.Errorf("%s: content %q is not standard base64 (%v)", blocks[1][i], contents[i](), err)
		}
	}
}

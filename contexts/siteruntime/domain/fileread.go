package domain

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// FileRead is the one line `metallo workspace-read` writes to standard
// output in the workspace reader Pod, which the Runtime reads back through
// pods/log (docs/site-runtime.md#the-workspace-reader):
//
//	{"outcome":"succeeded","content_base64":"…","truncated":false,"bytes":12}
//	{"outcome":"refused","reason":"path-rejected","message":"…"}
//	{"outcome":"failed","reason":"native-error","message":"…"}
//
// A succeeded read carries the file's first bytes (at most the asked
// max_bytes), standard base64, and Bytes, their count; Truncated is true
// when the file held more. A refusal is path-rejected (the path is not a
// regular file inside the workspace); a failure native-error (the file
// could not be read: permissions, I/O).
type FileRead struct {
	Outcome       siteprotocol.Outcome `json:"outcome"`
	Reason        siteprotocol.Reason  `json:"reason,omitempty"`
	Message       string               `json:"message,omitempty"`
	ContentBase64 string               `json:"content_base64,omitempty"`
	Truncated     bool                 `json:"truncated,omitempty"`
	Bytes         int64                `json:"bytes,omitempty"`
}

// MaxFileReadLineBytes bounds the reader's line: the base64 of
// siteprotocol.MaxReadBytes and room for the other members. A log longer
// than this is no outcome.
const MaxFileReadLineBytes = (siteprotocol.MaxReadBytes+2)/3*4 + 8192

// FileReadRefused is the reader's path-rejected refusal; FileReadFailed
// its native-error failure.
func FileReadRefused(format string, a ...any) FileRead {
	return FileRead{Outcome: siteprotocol.OutcomeRefused, Reason: siteprotocol.ReasonPathRejected, Message: fmt.Sprintf(format, a...)}
}

// FileReadFailed is the reader's native-error failure.
func FileReadFailed(format string, a ...any) FileRead {
	return FileRead{Outcome: siteprotocol.OutcomeFailed, Reason: siteprotocol.ReasonNativeError, Message: fmt.Sprintf(format, a...)}
}

// Encode is the line: the JSON object and a newline, HTML characters not
// escaped.
func (r FileRead) Encode() []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(r) // strings, numbers and booleans always encode; Encode ends the line
	return buf.Bytes()
}

// ParseFileRead reads the reader's log strictly: exactly one JSON object
// of FileRead's members (no unknown member, nothing before or after it
// but one final newline; the kubelet joins a line it split into records
// of 16 KiB, so the line comes back whole), a succeeded read whose
// content decodes to Bytes bytes, at most maxBytes, or a refusal
// path-rejected or a failure native-error. It returns the content
// decoded. Errors name what is wrong; the caller answers native-error.
func ParseFileRead(log []byte, maxBytes int64) (FileRead, []byte, error) {
	if len(log) > MaxFileReadLineBytes {
		return FileRead{}, nil, fmt.Errorf("the reader's log holds more than %d bytes", MaxFileReadLineBytes)
	}
	line := bytes.TrimSuffix(log, []byte("\n"))
	if len(line) == 0 {
		return FileRead{}, nil, errors.New("the reader's log is empty")
	}
	if bytes.ContainsAny(line, "\r\n") {
		return FileRead{}, nil, errors.New("the reader's log holds more than its one line")
	}
	var r FileRead
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return FileRead{}, nil, fmt.Errorf("the reader's line: %w", err)
	}
	if dec.More() || dec.InputOffset() != int64(len(line)) {
		return FileRead{}, nil, errors.New("the reader's line holds more than one JSON value")
	}
	switch {
	case r.Outcome == siteprotocol.OutcomeSucceeded && r.Reason == "":
		content, err := base64.StdEncoding.Strict().DecodeString(r.ContentBase64)
		switch {
		case err != nil:
			return FileRead{}, nil, fmt.Errorf("the reader's content: %w", err)
		case int64(len(content)) != r.Bytes:
			return FileRead{}, nil, fmt.Errorf("the reader's content holds %d bytes; its line says %d", len(content), r.Bytes)
		case int64(len(content)) > maxBytes:
			return FileRead{}, nil, fmt.Errorf("the reader answered %d bytes; at most %d were asked for", len(content), maxBytes)
		case r.Message != "":
			return FileRead{}, nil, errors.New("the reader's read carries a message")
		}
		return r, content, nil
	case (r.Outcome == siteprotocol.OutcomeRefused && r.Reason == siteprotocol.ReasonPathRejected) ||
		(r.Outcome == siteprotocol.OutcomeFailed && r.Reason == siteprotocol.ReasonNativeError):
		if r.ContentBase64 != "" || r.Truncated || r.Bytes != 0 {
			return FileRead{}, nil, fmt.Errorf("the reader's %s / %s carries content", r.Outcome, r.Reason)
		}
		return r, nil, nil
	}
	return FileRead{}, nil, fmt.Errorf("the reader's line is %s with reason %q, not an outcome of workspace-read", r.Outcome, r.Reason)
}

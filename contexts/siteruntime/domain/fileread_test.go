package domain_test

import (
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// The reader's log is read strictly: exactly its one line, as the kubelet
// gives it back (a line it stored as several 16 KiB records is joined
// again), and nothing else.
func TestParseFileReadTakesOnlyTheOneLine(t *testing.T) {
	ok := domain.FileRead{Outcome: siteprotocol.OutcomeSucceeded, ContentBase64: "aGk=", Bytes: 2}.Encode()
	if r, content, err := domain.ParseFileRead(ok, 2); err != nil || string(content) != "hi" || r.Truncated {
		t.Fatalf("ParseFileRead(%s) = %+v %q %v", ok, r, content, err)
	}
	// Without its final newline too.
	if _, _, err := domain.ParseFileRead(ok[:len(ok)-1], 2); err != nil {
		t.Fatal(err)
	}
	refused := domain.FileReadRefused("x is a directory, not a regular file").Encode()
	if r, content, err := domain.ParseFileRead(refused, 10); err != nil || r.Reason != siteprotocol.ReasonPathRejected || content != nil {
		t.Fatalf("refusal: %+v %v", r, err)
	}
	long := domain.FileRead{Outcome: siteprotocol.OutcomeSucceeded, ContentBase64: strings.Repeat("QUFB", 100000), Bytes: 300000}.Encode()
	if _, content, err := domain.ParseFileRead(long, siteprotocol.MaxReadBytes); err != nil || len(content) != 300000 {
		t.Fatalf("a long line: %d bytes, %v", len(content), err)
	}
	for name, log := range map[string]string{
		"empty":               "",
		"two lines":           string(ok) + string(ok),
		"stderr before":       "metallo: oops\n" + string(ok),
		"stderr after":        string(ok) + "metallo: oops\n",
		"two values":          strings.TrimSuffix(string(ok), "\n") + "{}",
		"unknown member":      `{"outcome":"succeeded","content_base64":"aGk=","bytes":2,"path":"x"}`,
		"bytes disagree":      `{"outcome":"succeeded","content_base64":"aGk=","bytes":3}`,
		"more than asked":     `{"outcome":"succeeded","content_base64":"aGVsbG8=","bytes":5}`,
		"not base64":          `{"outcome":"succeeded","content_base64":"a$k=","bytes":2}`,
		"other reason":        `{"outcome":"failed","reason":"size-exceeded","message":"x"}`,
		"refusal with bytes":  `{"outcome":"refused","reason":"path-rejected","message":"x","content_base64":"aGk=","bytes":2}`,
		"succeeded with why":  `{"outcome":"succeeded","reason":"read","content_base64":"aGk=","bytes":2}`,
		"carriage return":     strings.TrimSuffix(string(ok), "\n") + "\r\n",
		"over the line bound": strings.Repeat(" ", domain.MaxFileReadLineBytes+1),
	} {
		if r, _, err := domain.ParseFileRead([]byte(log), 4); err == nil {
			t.Errorf("%s: ParseFileRead accepted %+v", name, r)
		}
	}
}

package failpoint

import (
	"bytes"
	"strings"
	"testing"
)

func TestAnArmedPointKillsAtItsHitAndUnarmedPointsDoNothing(t *testing.T) {
	var log bytes.Buffer
	s, err := Parse("after-send@3, after-ack", []string{"after-send", "after-ack", "other"}, &log)
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	s.kill = func() { killed++ }
	s.Hit("other")
	s.Hit("after-send")
	s.Hit("after-send")
	if killed != 0 {
		t.Fatal("killed before the armed hit")
	}
	s.Hit("after-send")
	if killed != 1 || !strings.Contains(log.String(), "failpoint after-send: hit 3") {
		t.Fatalf("killed %d, log %q", killed, log.String())
	}
	s.Hit("after-ack")
	if killed != 2 {
		t.Fatal("the second armed point did not fire")
	}
	var inert *Set
	inert.Hit("after-send")
	if inert.Armed() {
		t.Fatal("nil set is armed")
	}
}

func TestUnknownPointsAndBadCountsAreRefused(t *testing.T) {
	for _, spec := range []string{"after-sned", "after-send@0", "after-send@x"} {
		if _, err := Parse(spec, []string{"after-send"}, nil); err == nil {
			t.Errorf("%q accepted", spec)
		}
	}
	s, err := Parse("", []string{"after-send"}, nil)
	if err != nil || s.Armed() {
		t.Fatalf("empty spec: %v armed=%v", err, s.Armed())
	}
}

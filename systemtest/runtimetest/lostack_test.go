package runtimetest

import (
	"bytes"
	"testing"

	"github.com/pharos-metallo/metallo/systemtest/harness"
)

// TestALostAcknowledgementIsFollowedByAByteIdenticalReplayTheSameAcknowledgementAndNoSecondExecute:
// the proxy forwards the first result PUT, lets the server commit it and
// drops the answer (closes the connection); the Runtime must send the same
// bytes again and get the same acknowledgement, executing nothing twice.
func TestALostAcknowledgementIsFollowedByAByteIdenticalReplayTheSameAcknowledgementAndNoSecondExecute(t *testing.T) {
	e := newEnv(t)
	e.site.Proxy.DropNextResponses(1)
	e.append(t, startCmd(1, nil))
	p := e.start(t, "")
	rec := e.waitAcknowledged(t, p, id(1, 1))
	waitMetric(t, p, "metallo_runtime_acknowledged_sequence", 1)
	if err := p.Stop(30e9); err != nil {
		t.Fatal(err)
	}
	puts := e.site.Proxy.Puts()
	if len(puts) != 2 || !puts[0].Dropped || puts[1].Dropped {
		t.Fatalf("want a dropped PUT and its replay, got %d PUTs", len(puts))
	}
	if !bytes.Equal(puts[0].Body, puts[1].Body) || !bytes.Equal(puts[0].Body, rec.Result) {
		t.Fatalf("the replay is not byte-identical:\n%s\n%s", puts[0].Body, puts[1].Body)
	}
	if puts[0].Status != 200 || puts[1].Status != 200 || !bytes.Equal(puts[0].Response, puts[1].Response) {
		t.Fatalf("acknowledgements differ: %d %s / %d %s", puts[0].Status, puts[0].Response, puts[1].Status, puts[1].Response)
	}
	effects, err := harness.ReadEffects(e.rt.Effects)
	if err != nil || len(effects) != 1 {
		t.Fatalf("the native effect happened %d times (%v)", len(effects), err)
	}
	if cp := checkpoint(t, e.rt.JournalDir); cp.Acknowledged != 1 || cp.Pending != nil {
		t.Fatalf("journal after the replay: %+v", cp)
	}
}

package processtest

import (
	"os"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/platform/testsetup"
	"github.com/pharos-metallo/metallo/systemtest/harness"
)

// TestMain removes the metallo binary the process tests share
// (testsetup.Binary) when they end.
func TestMain(m *testing.M) { os.Exit(testsetup.Run(m)) }

// killLine is the line a Runtime logs when a failpoint kills it.
var killLine = harness.KillLine

func waitAcknowledged(t *testing.T, site *harness.Site, p *harness.Process, id string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		rec, err := site.Command(id)
		if err == nil && len(rec.Result) > 0 {
			return
		}
		if p.Exited() || time.Now().After(deadline) {
			t.Fatalf("command %s not acknowledged (%v):\n%s", id, err, p.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

package processtest

import (
	"os"
	"testing"

	"github.com/pharos-metallo/metallo/platform/testsetup"
)

// TestMain removes the metallo binary the process tests share
// (testsetup.Binary) when they end.
func TestMain(m *testing.M) { os.Exit(testsetup.Run(m)) }

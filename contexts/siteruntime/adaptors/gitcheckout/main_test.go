package gitcheckout_test

import (
	"os"
	"testing"

	"github.com/pharos-metallo/metallo/platform/testsetup"
)

// TestMain removes the metallo binary the workspace-init tests run
// (testsetup.Binary) when they end.
func TestMain(m *testing.M) { os.Exit(testsetup.Run(m)) }

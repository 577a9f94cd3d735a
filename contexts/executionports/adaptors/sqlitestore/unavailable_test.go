package sqlitestore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/sqlitestore"
	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/platform/database"
)

// TestUnavailabilityCarriesNoDriverText: the error value of an unusable
// database is application.ErrUnavailable's sentence only (the driver's text
// can name the file); the cause is kept for the log
// (docs/architecture.md#a-central-contexts-database).
func TestUnavailabilityCarriesNoDriverText(t *testing.T) {
	h := open(t)
	h.Close()
	_, err := sqlitestore.New(h.DB).State(t.Context(), "alpha-k8s")
	if !errors.Is(err, application.ErrUnavailable) || err.Error() != application.ErrUnavailable.Error() {
		t.Fatalf("state of a closed handle: %v, want ErrUnavailable's sentence only", err)
	}
	if cause := database.LogCause(err); !strings.Contains(cause, "sql") {
		t.Fatalf("the log cause %q lost the driver's error", cause)
	}
}

package resourceprovisioning_test

import (
	"errors"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning"
	"github.com/pharos-metallo/metallo/platform/config"
)

func validConfig() resourceprovisioning.Config {
	return resourceprovisioning.Config{MaxConns: resourceprovisioning.DefaultMaxConns, WaldurInstance: "https://waldur.example.org", Freshness: 15 * time.Minute, ReportClockSkew: 5 * time.Minute}
}

// TestWaldurInstanceMustBeAnAbsoluteHTTPURL: anything else is refused at
// start naming --waldur-instance.
func TestWaldurInstanceMustBeAnAbsoluteHTTPURL(t *testing.T) {
	for _, ok := range []string{"https://waldur.example.org", "http://127.0.0.1:8080", "https://waldur.example.org/api"} {
		c := validConfig()
		c.WaldurInstance = ok
		if err := c.Validate(); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "waldur.example.org", "/waldur", "ftp://waldur.example.org", "https://", "https:///path",
		"https://user:secret@waldur.example.org", "https://waldur.example.org?x=1", "https://waldur.example.org#f", "https://waldur example.org", "mailto:waldur@example.org"} {
		c := validConfig()
		c.WaldurInstance = bad
		var fe *config.FlagError
		if err := c.Validate(); !errors.As(err, &fe) || fe.Flag != "waldur-instance" {
			t.Errorf("%q: %v, want a flag error naming waldur-instance", bad, err)
		}
	}
}

func TestReportClockSkewMustBePositive(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		c := validConfig()
		c.ReportClockSkew = d
		var fe *config.FlagError
		if err := c.Validate(); !errors.As(err, &fe) || fe.Flag != "report-clock-skew" {
			t.Errorf("%s: %v, want a flag error naming report-clock-skew", d, err)
		}
	}
}

package resourceprovisioning_test

import (
	"errors"
	"strings"
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

// Every fault of the configuration is named at once, each with its flag and its variable, so
// one edit fixes them all.
func TestValidateNamesEveryFaultAtOnce(t *testing.T) {
	c := validConfig()
	c.DatabaseURL = "mysql://db"
	c.MaxConns = 0
	c.WaldurInstance = "waldur.example.org"
	c.Freshness = 0
	c.ReportClockSkew = -time.Second
	err := c.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, flag := range []string{"provisioning-database-url", "provisioning-database-max-conns", "waldur-instance", "allocation-freshness", "report-clock-skew"} {
		if !strings.Contains(err.Error(), "--"+flag+" ("+config.EnvName(flag)+")") {
			t.Errorf("the refusal does not name --%s and its variable:\n%v", flag, err)
		}
	}
	if err := validConfig().Validate(); err != nil {
		t.Errorf("a valid configuration: %v", err)
	}
}

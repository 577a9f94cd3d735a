package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestEnvironmentFillsFlagsNotGiven(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	url := fs.String("provisioning-database-url", "", "")
	listen := fs.String("listen", "127.0.0.1:8080", "")
	if err := fs.Parse([]string{"--listen", "0.0.0.0:1"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"METALLO_PROVISIONING_DATABASE_URL": "postgres://x/y",
		"METALLO_LISTEN":                    "ignored:2",
		"METALLO_UNRELATED":                 "x",
	}
	if err := BindEnv(fs, lookup(env)); err != nil {
		t.Fatal(err)
	}
	if *url != "postgres://x/y" {
		t.Fatalf("url = %q", *url)
	}
	if *listen != "0.0.0.0:1" {
		t.Fatalf("command line must win over environment, got %q", *listen)
	}
}

func TestBadEnvironmentValueNamesTheFlag(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.Duration("freshness", 15*time.Minute, "")
	err := BindEnv(fs, lookup(map[string]string{"METALLO_FRESHNESS": "soon"}))
	if err == nil {
		t.Fatal("want error")
	}
	if !errors.Is(err, ErrInvalidFlag) || !strings.Contains(err.Error(), "--freshness") || !strings.Contains(err.Error(), "METALLO_FRESHNESS") {
		t.Fatalf("error does not name the flag: %v", err)
	}
}

func lookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

package siteprotocol

import (
	"regexp"
	"strings"
	"testing"
)

func TestTheRuntimeVersionRuleAcceptsVisibleASCIIUpToItsBoundAndTheSenderAlwaysMeetsIt(t *testing.T) {
	pattern := regexp.MustCompile(RuntimeVersionPattern)
	for _, v := range []string{"v1.4.0", "v0.0.0-20261207192130-0f41f17e8bbd+dirty", "0f41f17e8bbd", "(devel)", strings.Repeat("x", MaxRuntimeVersionBytes)} {
		if !ValidRuntimeVersion(v) || !pattern.MatchString(v) {
			t.Errorf("%q refused", v)
		}
		if got := RuntimeVersionValue(v); got != v {
			t.Errorf("RuntimeVersionValue(%q) = %q; a valid version must pass unchanged", v, got)
		}
	}
	for v, sent := range map[string]string{
		"":                                  "unknown",
		"v1 beta":                           "v1_beta",
		"v1\x00":                            "v1_",
		"v1\x7f":                            "v1_",
		"vé":                                "v__", // two bytes beyond ASCII
		"v1\n":                              "v1_",
		strings.Repeat("y", 200):            strings.Repeat("y", MaxRuntimeVersionBytes),
		strings.Repeat("é", 100):            strings.Repeat("_", MaxRuntimeVersionBytes),
		strings.Repeat("z", 127) + "\u00e9": strings.Repeat("z", 127) + "_",
	} {
		if ValidRuntimeVersion(v) || (v != "" && len(v) <= MaxRuntimeVersionBytes && pattern.MatchString(v)) {
			t.Errorf("%q accepted", v)
		}
		got := RuntimeVersionValue(v)
		if got != sent || !ValidRuntimeVersion(got) {
			t.Errorf("RuntimeVersionValue(%q) = %q; want %q, which the rule accepts", v, got, sent)
		}
	}
}

package domain_test

import (
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// A checkout outcome fits a termination message, keeps its reason when
// its message is cut, and parses back only as an outcome of the
// vocabulary.
func TestACheckoutOutcomeFitsTheTerminationMessage(t *testing.T) {
	long := domain.CheckoutFailed(siteprotocol.ReasonLFSMissing, "%s", strings.Repeat("é", 5000))
	b := long.Encode()
	if len(b) > domain.MaxTerminationMessageBytes {
		t.Fatalf("%d bytes", len(b))
	}
	got, err := domain.ParseCheckoutOutcome(b)
	if err != nil || got.Outcome != siteprotocol.OutcomeFailed || got.Reason != siteprotocol.ReasonLFSMissing || !strings.HasSuffix(got.Message, "…") {
		t.Fatalf("parsed %+v %v", got, err)
	}
	if c := domain.CheckoutFailed(siteprotocol.ReasonCredentialUnavailable, "x"); c.Outcome != siteprotocol.OutcomeRefused {
		t.Fatalf("credential-unavailable is %s", c.Outcome)
	}
	for _, bad := range []string{
		`{"outcome":"failed","reason":"credential-unavailable","message":""}`,
		`{"outcome":"succeeded","reason":"lfs-missing","message":""}`,
		`{"outcome":"failed","reason":"made-up","message":""}`,
		`{"outcome":"failed","message":""}`,
		`{"outcome":"succeeded","message":"","extra":1}`,
		`not json`,
	} {
		if _, err := domain.ParseCheckoutOutcome([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	if _, err := domain.ParseCheckoutOutcome([]byte(`{"outcome":"succeeded","message":"ok","commit":"abc","verified":true}`)); err != nil {
		t.Error(err)
	}
}

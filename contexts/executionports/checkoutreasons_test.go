package executionports_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// prepare returns a batch prepare command with id n checking out a
// repository at an exact commit.
func prepare(n int) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"operation":"prepare","issued_at":%q,"run_id":%q,"attempt_id":%q,"member_id":%q,"project_id":%q,`+
		`"account_ref":{"binding_id":%q,"generation":1},"family":"batch",`+
		`"payload":{"repository":{"url":"https://git.example.org/lab/model.git","commit":"0123456789abcdef0123456789abcdef01234567","lfs":true},"workspace_size_bytes":1073741824}}`,
		uuid(n), issued, uuid(1000+n), uuid(2000+n), uuid(3000+n), uuid(4000+n), uuid(5000+n)))
}

// The execution role accepts a prepare result with each repository
// checkout reason and its outcome — a Runtime and a central server of the
// same version agree — and refuses one with another outcome, recording
// nothing (docs/site-protocol.md#repository-checkout-reasons).
func TestTheExecutionRoleAcceptsEachCheckoutReasonWithItsOutcome(t *testing.T) {
	s := startServer(t, options{})
	reasons := []siteprotocol.Reason{
		siteprotocol.ReasonRepositoryUnavailable, siteprotocol.ReasonCommitMissing, siteprotocol.ReasonSizeExceeded,
		siteprotocol.ReasonSymlinkEscape, siteprotocol.ReasonLFSMissing, siteprotocol.ReasonCredentialUnavailable,
	}
	for i := range reasons {
		wantStatus(t, s.appendCommand(t, "alpha-k8s", prepare(i+1)), http.StatusCreated, "")
	}
	page := decode[siteprotocol.Pull](t, s.pull(t, "alpha-k8s", s.alphaKey, installA, 0, 100, 0))
	if len(page.Commands) != len(reasons) {
		t.Fatalf("pulled %d commands, want %d", len(page.Commands), len(reasons))
	}
	for i, r := range reasons {
		c, err := siteprotocol.ParsePulled(page.Commands[i])
		must(t, err)
		want, _ := r.Outcome()
		wrong := siteprotocol.OutcomeFailed
		if want == siteprotocol.OutcomeFailed {
			wrong = siteprotocol.OutcomeRefused
		}
		// Encoded by hand: NewResult itself refuses the wrong pairing.
		bad := siteprotocol.Result{CommandID: c.ID, CommandDigest: c.Digest, Sequence: c.Sequence, Outcome: wrong, Reason: r, Message: "checkout"}
		wantStatus(t, s.ack(t, "alpha-k8s", s.alphaKey, installA, c.Sequence, withDigest(t, bad)), http.StatusUnprocessableEntity, siteprotocol.ProblemInvalidResult)
		_, good, err := siteprotocol.NewResult(c, want, r, "checkout: "+string(r), nil, nil)
		must(t, err)
		wantStatus(t, s.ack(t, "alpha-k8s", s.alphaKey, installA, c.Sequence, good), http.StatusOK, "")
	}
}

// withDigest encodes r with its digest (the JCS form of every other
// member), without the validation EncodeResult applies.
func withDigest(t *testing.T, r siteprotocol.Result) []byte {
	t.Helper()
	b, err := json.Marshal(r)
	must(t, err)
	canonical, err := siteprotocol.Canonical(b)
	must(t, err)
	r.Digest = siteprotocol.Digest(canonical)
	out, err := json.Marshal(r)
	must(t, err)
	return out
}

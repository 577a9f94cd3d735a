package storetest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// readTests are CommandsAfter: the stored canonical form, oldest first, within the byte budget.
var readTests = []testCase{
	{"CommandsAfterReturnsStoredCanonicalFormOldestFirst", testCommandsAfter},
	{"CommandsAfterStopsAtTheByteBudgetButAlwaysServesTheNext", testCommandsAfterByteBudget},
}

func testCommandsAfter(t *testing.T, s application.StreamStore) {
	cs := appendN(t, s, "alpha-k8s", 1, 5)
	got, err := s.CommandsAfter(context.Background(), "alpha-k8s", 1, 3, siteprotocol.MaxPullBytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("got %d commands, want 3", len(got))
	}
	for i, c := range got {
		want := cs[i+1]
		if c.Sequence != int64(i+2) || c.Digest != want.Digest || !bytes.Equal(c.Canonical, want.Canonical) {
			t.Fatalf("command %d: got %+v", i, c)
		}
		served, err := siteprotocol.EncodeStored(c.Canonical, c.Sequence, c.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := siteprotocol.ParsePulled(served); err != nil {
			t.Fatalf("served command %d does not verify: %v", c.Sequence, err)
		}
	}
	if rest, _ := s.CommandsAfter(context.Background(), "alpha-k8s", 5, 100, siteprotocol.MaxPullBytes); len(rest) != 0 {
		t.Fatalf("after the head: got %d commands", len(rest))
	}
}

// Padded returns a command with id n whose canonical form is exactly size
// bytes (an operation the codec does not know, so any payload goes).
func Padded(t testing.TB, salt, n, size int) application.NewCommand {
	t.Helper()
	head := fmt.Sprintf(`{"id":%q,"issued_at":"2026-11-29T10:00:00.123Z","operation":"x-pad","payload":{"pad":"`, uuidFor(salt, n))
	tail := `"}}`
	pad := size - len(head) - len(tail)
	if pad < 0 {
		t.Fatalf("a padded command needs at least %d bytes", len(head)+len(tail))
	}
	raw := head + strings.Repeat("x", pad) + tail
	digest, canonical, err := siteprotocol.CommandDigest([]byte(raw))
	if err != nil {
		t.Fatalf("build padded command: %v", err)
	}
	if len(canonical) != size {
		t.Fatalf("padded command is %d canonical bytes, want %d", len(canonical), size)
	}
	return application.NewCommand{ID: uuidFor(salt, n), Digest: digest, Canonical: canonical}
}

// testCommandsAfterByteBudget: the commands answered add up to at most
// maxBytes of canonical form, except that the first is always answered (a
// command larger than the budget never stalls the stream).
func testCommandsAfterByteBudget(t *testing.T, s application.StreamStore) {
	ctx := context.Background()
	for i, size := range []int{1000, 1000, 1000, 5000, 1000} {
		if _, err := s.Append(ctx, "alpha-k8s", Padded(t, 70, i+1, size), t0); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		after    int64
		limit    int
		maxBytes int64
		want     []int64
	}{
		{0, 100, 2999, []int64{1, 2}},
		{0, 100, 3000, []int64{1, 2, 3}}, // exactly the budget
		{0, 100, 100, []int64{1}},        // the first always
		{3, 100, 4999, []int64{4}},       // alone over the budget
		{3, 100, 6000, []int64{4, 5}},
		{0, 2, 1 << 20, []int64{1, 2}}, // the count limit still holds
		{0, 100, 1 << 20, []int64{1, 2, 3, 4, 5}},
		{5, 100, 1 << 20, nil},
	} {
		got, err := s.CommandsAfter(ctx, "alpha-k8s", tc.after, tc.limit, tc.maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []int64
		for _, c := range got {
			seqs = append(seqs, c.Sequence)
		}
		if fmt.Sprint(seqs) != fmt.Sprint(tc.want) {
			t.Errorf("after %d, limit %d, %d bytes: got sequences %v, want %v", tc.after, tc.limit, tc.maxBytes, seqs, tc.want)
		}
	}
}

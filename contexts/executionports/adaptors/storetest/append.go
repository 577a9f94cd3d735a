package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
)

// appendTests are appends: gapless sequences, idempotent retries, conflicting retries and concurrent appenders.
var appendTests = []testCase{
	{"AppendAssignsGaplessSequencesFromOne", testAppendAssignsSequences},
	{"AppendOfTheSameContentReturnsTheOriginalSequence", testIdempotentAppend},
	{"AppendOfAKnownIDWithOtherContentIsAConflictingRetry", testConflictingRetry},
	{"CommandIDsAreUniqueAcrossStreams", testIDUniqueAcrossStreams},
	{"ConcurrentAppendersGetGaplessUniqueSequences", testConcurrentAppends},
}

func testAppendAssignsSequences(t *testing.T, s application.StreamStore) {
	appendN(t, s, "alpha-k8s", 1, 5)
	appendN(t, s, "beta-k8s", 2, 2) // another stream starts at 1 again
	if st := mustState(t, s, "alpha-k8s"); st.HeadSequence != 5 || st.AcknowledgedSequence != 0 {
		t.Fatalf("state %+v, want head 5, acknowledged 0", st)
	}
}

func testIdempotentAppend(t *testing.T, s application.StreamStore) {
	cs := appendN(t, s, "alpha-k8s", 1, 3)
	a, err := s.Append(context.Background(), "alpha-k8s", cs[1], t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if a.Sequence != 2 || a.Created || a.Digest != cs[1].Digest {
		t.Fatalf("retry: got %+v, want sequence 2, created false", a)
	}
	if st := mustState(t, s, "alpha-k8s"); st.HeadSequence != 3 {
		t.Fatalf("a retry moved the head to %d", st.HeadSequence)
	}
}

func testConflictingRetry(t *testing.T, s application.StreamStore) {
	cs := appendN(t, s, "alpha-k8s", 1, 2)
	other := cs[0]
	other.Digest = cs[1].Digest
	other.Canonical = cs[1].Canonical
	if _, err := s.Append(context.Background(), "alpha-k8s", other, t0); !errors.Is(err, domain.ErrConflictingRetry) {
		t.Fatalf("got %v, want ErrConflictingRetry", err)
	}
	if st := mustState(t, s, "alpha-k8s"); st.HeadSequence != 2 {
		t.Fatalf("a conflicting retry moved the head to %d", st.HeadSequence)
	}
}

func testIDUniqueAcrossStreams(t *testing.T, s application.StreamStore) {
	cs := appendN(t, s, "alpha-k8s", 1, 1)
	if _, err := s.Append(context.Background(), "beta-k8s", cs[0], t0); !errors.Is(err, domain.ErrConflictingRetry) {
		t.Fatalf("same ID on another stream: got %v, want ErrConflictingRetry", err)
	}
	if st := mustState(t, s, "beta-k8s"); st.HeadSequence != 0 {
		t.Fatalf("the refused append moved beta's head to %d", st.HeadSequence)
	}
}

func testConcurrentAppends(t *testing.T, s application.StreamStore) {
	const workers, each = 8, 40
	ctx := context.Background()
	var (
		mu   sync.Mutex
		seen = map[int64]string{}
		wg   sync.WaitGroup
		errs = make(chan error, workers*each*2)
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				c, _ := Command(t, 100, w*each+i)
				a, err := s.Append(ctx, "alpha-k8s", c, t0)
				if err != nil {
					errs <- err
					return
				}
				// Every worker also retries a command of its neighbour,
				// concurrently with its first append.
				n, _ := Command(t, 100, ((w+1)%workers)*each+i)
				if _, err := s.Append(ctx, "alpha-k8s", n, t0); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if prev, dup := seen[a.Sequence]; dup && prev != c.ID {
					errs <- fmt.Errorf("sequence %d given to %s and %s", a.Sequence, prev, c.ID)
				}
				seen[a.Sequence] = c.ID
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != workers*each {
		t.Fatalf("%d distinct sequences for %d commands", len(seen), workers*each)
	}
	for i := int64(1); i <= workers*each; i++ {
		if _, ok := seen[i]; !ok {
			t.Fatalf("gap at sequence %d", i)
		}
	}
	if st := mustState(t, s, "alpha-k8s"); st.HeadSequence != workers*each {
		t.Fatalf("head %d, want %d", st.HeadSequence, workers*each)
	}
}

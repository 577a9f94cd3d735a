package application_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// A start whose commit #1 SQLite discarded is pulled and executed again
// (docs/site-runtime.md#a-discarded-last-commit): Execute is safe against
// the start's own earlier effect in every state the kill can have left —
// the Job created and recorded, or created with only its creating record
// saved; and a Job of its rendering under its name without a record (the
// create finds the name taken) is adopted too — and answers the bytes
// of a clean create, with one Job for the Attempt. The Kubernetes API
// server is the fake of batch_test.go (outside the application layer).
func TestAStartExecutedAgainAfterItsCommitWasDiscardedAdoptsItsOwnJob(t *testing.T) {
	ref := newBatchFixture(t, time.Second)
	ref.prepared(t)
	clean := ref.run(t, ref.cmd(t, siteprotocol.OpStart, startBody), false)

	cases := []struct {
		name string
		// before runs the first Execute the kill interrupted.
		before func(t *testing.T, f *batchFixture, p *domain.Pending)
	}{
		{"the Job created and recorded", func(t *testing.T, f *batchFixture, p *domain.Pending) {
			f.run(t, p, false)
		}},
		{"the Job created, only its creating record saved", func(t *testing.T, f *batchFixture, p *domain.Pending) {
			f.native.createLost, f.native.createErr = true, errors.New("killed")
			if _, err := f.reg.Execute(context.Background(), p); err == nil {
				t.Fatal("the interrupted create answered")
			}
		}},
		{"the Job under its name, no record of it", func(t *testing.T, f *batchFixture, p *domain.Pending) {
			f.run(t, p, false)
			f.records.mu.Lock()
			for k, r := range f.records.rows {
				if r.Kind == domain.KindJob {
					delete(f.records.rows, k)
				}
			}
			f.records.mu.Unlock()
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newBatchFixture(t, time.Second)
			f.prepared(t)
			p := f.cmd(t, siteprotocol.OpStart, startBody)
			c.before(t, f, p)
			again := f.run(t, p, false)
			if again.Digest != clean.Digest {
				t.Fatalf("executed again %s\nclean          %s", mustJSON(again), mustJSON(clean))
			}
			if len(f.native.creates) != 2 { // the claim and the one Job
				t.Fatalf("%d Job creates; want one", len(f.native.creates)-1)
			}
			recs, _ := f.records.Records(context.Background(), attempt)
			job := domain.FindRecord(recs, domain.KindJob)
			if job == nil || job.Phase != domain.PhaseCreated || job.UID != again.NativeRefs[0].UID {
				t.Fatalf("the Job's record %+v does not name the adopted Job %s", job, again.NativeRefs[0].UID)
			}
		})
	}
}

package journal_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/database"
)

// BenchmarkJournalCommandCycle is one command's journal path: commit #1
// (pending), #2 (result) and #3 (clear); compare with three
// BenchmarkRawSQLiteCommit for the journal's own overhead.
func BenchmarkJournalCommandCycle(b *testing.B) {
	j := open(b, install(b))
	ctx := context.Background()
	cmds := make([]domain.Pending, b.N)
	results := make([][]byte, b.N)
	digests := make([]string, b.N)
	for i := range b.N {
		cmds[i] = pulled(b, int64(i+1), i+1)
		results[i], digests[i] = result(b, cmds[i], "bench")
	}
	b.ResetTimer()
	for i := range b.N {
		seq := int64(i + 1)
		if err := j.SavePending(ctx, cmds[i], nil); err != nil {
			b.Fatal(err)
		}
		if err := j.SaveResult(ctx, seq, results[i], digests[i]); err != nil {
			b.Fatal(err)
		}
		if err := j.Acknowledge(ctx, domain.Acknowledgement{Sequence: seq, ResultDigest: digests[i]}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawSQLiteCommit is one durable single-row commit with the
// journal's settings.
func BenchmarkRawSQLiteCommit(b *testing.B) {
	db, err := database.OpenSQLite(filepath.Join(b.TempDir(), "raw.sqlite"), 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)"); err != nil {
		b.Fatal(err)
	}
	v := make([]byte, 700)
	b.ResetTimer()
	for i := range b.N {
		err := func() error {
			tx, err := db.Begin()
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback() }()
			if _, err := tx.Exec("INSERT INTO t VALUES (?, ?)", i, v); err != nil {
				return err
			}
			return tx.Commit()
		}()
		if err != nil {
			b.Fatal(err)
		}
	}
}

// Package journal is the Site Runtime's SQLite journal set: delivery.sqlite
// (binding, checkpoint, pending command and exact result, member bindings),
// jobs.sqlite and services.sqlite (native records) in one directory
// (docs/site-runtime.md#journals).
//
//   - A fixed schema per version (SchemaVersion), created by `metallo
//     runtime install` (Set.Initialise), never goose-migrated: an earlier
//     version is converted only by the installation hook's explicit,
//     versioned upgrade (Set.Upgrade, upgrade.go), atomic as a set
//     (upgraded copies, a commit marker, renames; recovered on every open)
//     and keeping every row and digest; Open refuses a set that is not at
//     SchemaVersion, naming the upgrade.
//   - WAL, synchronous=FULL, a busy timeout and foreign keys on every
//     connection; every write is one transaction (BEGIN IMMEDIATE) and one
//     durable commit.
//   - An exclusive OS lock (flock) on the directory itself for the process
//     lifetime: a second Runtime fails fast naming the lock.
//   - Every row carries a digest (SHA-256 over its table name and values);
//     saved commands and results are also checked against their protocol
//     digests, specifications against their spec digest.
//   - Open verifies the whole set read-only first — opening a damaged file
//     neither creates nor modifies its -wal/-shm — and refuses to start
//     with an *IntegrityError naming the file and row. Nothing is ever
//     rewritten, deleted or reset. Open never creates a missing journal.
package journal

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"strconv"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// SchemaVersion is the schema version of every journal file this Runtime
// creates and opens: version 1 and each explicit upgrade after it
// (upgradeSteps). A set of an earlier version is upgraded by `metallo
// runtime install` (Set.Upgrade); Open refuses it, naming the upgrade.
const SchemaVersion = 4

// IntegrityError says which file and row failed which check. It wraps
// application.ErrJournalIntegrity and the cause.
type IntegrityError struct {
	// File is the journal file's name, e.g. "delivery.sqlite".
	File string
	// Row names the row, e.g. "pending (sequence 7)"; empty for the file.
	Row string
	Err error
}

func (e *IntegrityError) Error() string {
	if e.Row == "" {
		return fmt.Sprintf("journal %s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("journal %s, row %s: %v", e.File, e.Row, e.Err)
}

// Unwrap returns the cause and application.ErrJournalIntegrity.
func (e *IntegrityError) Unwrap() []error { return []error{e.Err, application.ErrJournalIntegrity} }

func integrity(file, row, format string, args ...any) *IntegrityError {
	return &IntegrityError{File: file, Row: row, Err: fmt.Errorf(format, args...)}
}

// rowDigester computes a row's digest: SHA-256 (hex) over the table name
// and each value, every one tagged with its type and length-prefixed, so no
// two different rows share an encoding.
type rowDigester struct{ h hash.Hash }

func rowDigest(table string) *rowDigester {
	d := &rowDigester{h: sha256.New()}
	return d.put('t', []byte(table))
}

func (d *rowDigester) put(tag byte, b []byte) *rowDigester {
	var n [9]byte
	n[0] = tag
	binary.BigEndian.PutUint64(n[1:], uint64(len(b)))
	d.h.Write(n[:])
	d.h.Write(b)
	return d
}

// S adds a string.
func (d *rowDigester) S(s string) *rowDigester { return d.put('s', []byte(s)) }

// I adds an integer.
func (d *rowDigester) I(i int64) *rowDigester { return d.put('i', strconv.AppendInt(nil, i, 10)) }

// B adds bytes; nil (SQL NULL) differs from empty.
func (d *rowDigester) B(b []byte) *rowDigester {
	if b == nil {
		return d.put('n', nil)
	}
	return d.put('b', b)
}

// Sum returns the hex digest.
func (d *rowDigester) Sum() string { return hex.EncodeToString(d.h.Sum(nil)) }

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		return true, nil
	case os.IsNotExist(err):
		return false, nil
	}
	return false, fmt.Errorf("stat %s: %w", path, err)
}

func presentFiles(dir string) (domain.JournalSet, error) {
	var set domain.JournalSet
	for _, f := range domain.JournalFiles() {
		ok, err := exists(filepath.Join(dir, f))
		if err != nil {
			return set, err
		}
		if ok {
			set.Present = append(set.Present, f)
		}
	}
	return set, nil
}

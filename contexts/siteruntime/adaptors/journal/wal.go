package journal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// WALDiscard says which frames at the end of a journal file's write-ahead
// log SQLite does not read because one of them is damaged — it fails its
// checksum, or carries a salt other than the log's while continuing its
// checksum chain — with no intact commit after it and no index (-shm)
// recording it as committed. That is a torn last commit or damage confined
// to the last commit's frames; the two cannot be told apart, and the
// journal is read as it was before that commit
// (docs/site-runtime.md#a-discarded-last-commit). Frames are numbered from 1.
type WALDiscard struct {
	// File is the log's name, e.g. "delivery.sqlite-wal".
	File string
	// Kept is the number of frames SQLite reads: through the last intact
	// commit frame before the damage (0: none, the log is read as empty).
	Kept int
	// First and Last are the frames SQLite discards (First = Kept+1).
	First, Last int
	// Damaged is the first damaged frame; 0 means the log's header.
	Damaged int
	// Damage says what is wrong with it, e.g. "fails its checksum".
	Damage string
	// Commit says the discarded frames include one marked as a commit's
	// last frame: a commit was (or seemed) complete.
	Commit bool
}

// String describes the discard for a log line.
func (d WALDiscard) String() string {
	what := fmt.Sprintf("frame %d %s", d.Damaged, d.Damage)
	if d.Damaged == 0 {
		what = "the log's header " + d.Damage
	}
	frames := fmt.Sprintf("frames %d-%d", d.First, d.Last)
	if d.First == d.Last {
		frames = fmt.Sprintf("frame %d", d.First)
	}
	commit := "no frame among them marks a complete commit"
	if d.Commit {
		commit = "among them is a commit frame: a commit was written and is lost"
	}
	return fmt.Sprintf("%s: SQLite reads the first %d frames and discards %s; %s, no intact commit follows it and no index (-shm) records it as committed; %s",
		d.File, d.Kept, frames, what, commit)
}

// walFrame is one frame of the log's current generation as scanned.
type walFrame struct {
	// commit: the frame's header marks the last frame of a commit
	// (database size in pages, bytes 4-8, non-zero). Trustworthy only when
	// the frame is intact.
	commit bool
	// intact: the frame carries the log's salt and its checksum continues
	// the chain.
	intact bool
	// damage says why a frame is not intact.
	damage string
}

// walScan is a write-ahead log as SQLite's recovery reads it
// (SQLite file format, "The WAL File Format").
type walScan struct {
	headerOK bool
	salt     []byte
	// frames are those of the current generation: a frame belongs to it
	// when it carries the header's salt or its checksum continues the
	// chain (its salt alone is damaged); the first frame that does neither
	// is a leftover of an earlier generation and ends the log.
	frames []walFrame
	// partial is a frame of the current generation cut short at the end of
	// the file (a torn write): at least its salt is there and is the log's.
	// SQLite ignores it; partialCommit says its header marks a commit's end.
	partial, partialCommit bool
}

// scanWAL reads the log's header and frames; it fails only on a log whose
// magic number or page size SQLite could not read either.
func scanWAL(wal []byte, file string) (*walScan, error) {
	if len(wal) < 32 {
		return nil, nil // an empty log (or one too short to hold a header) holds no frame
	}
	var order binary.ByteOrder
	switch binary.BigEndian.Uint32(wal[0:4]) {
	case 0x377f0682:
		order = binary.LittleEndian
	case 0x377f0683:
		order = binary.BigEndian
	default:
		return nil, integrity(file+"-wal", "", "not a write-ahead log (bad magic number)")
	}
	pageSize := int(binary.BigEndian.Uint32(wal[8:12]))
	if pageSize < 512 || pageSize > 65536 || pageSize&(pageSize-1) != 0 {
		return nil, integrity(file+"-wal", "", "bad page size %d", pageSize)
	}
	s := &walScan{salt: wal[16:24]}
	s0, s1 := walChecksum(order, 0, 0, wal[:24])
	prev0, prev1 := binary.BigEndian.Uint32(wal[24:28]), binary.BigEndian.Uint32(wal[28:32])
	s.headerOK = s0 == prev0 && s1 == prev1
	frameSize := 24 + pageSize
	chained := func(off int, p0, p1 uint32) bool {
		hdr := wal[off : off+24]
		c0, c1 := walChecksum(order, p0, p1, hdr[:8])
		c0, c1 = walChecksum(order, c0, c1, wal[off+24:off+frameSize])
		return c0 == binary.BigEndian.Uint32(hdr[16:20]) && c1 == binary.BigEndian.Uint32(hdr[20:24])
	}
	if !s.headerOK && 32+frameSize <= len(wal) && chained(32, prev0, prev1) {
		// The header is damaged but its checksum still seeds the first
		// frame's: the log's salt is the one that frame carries.
		s.salt = wal[32+8 : 32+16]
	}
	for off := 32; off+frameSize <= len(wal); off += frameSize {
		hdr := wal[off : off+24]
		stored0, stored1 := binary.BigEndian.Uint32(hdr[16:20]), binary.BigEndian.Uint32(hdr[20:24])
		chained := chained(off, prev0, prev1)
		salted := bytes.Equal(hdr[8:16], s.salt)
		if !chained && !salted {
			break // a frame of an earlier log generation: the log ends here
		}
		f := walFrame{commit: binary.BigEndian.Uint32(hdr[4:8]) != 0, intact: chained && salted}
		switch {
		case !chained:
			f.damage = "fails its checksum"
		case !salted:
			f.damage = "carries a salt other than the log's"
		}
		s.frames = append(s.frames, f)
		prev0, prev1 = stored0, stored1
	}
	if end := 32 + len(s.frames)*frameSize; end < len(wal) && end+frameSize > len(wal) && len(wal)-end >= 16 &&
		bytes.Equal(wal[end+8:end+16], s.salt) {
		s.partial = true
		s.partialCommit = binary.BigEndian.Uint32(wal[end+4:end+8]) != 0
	}
	return s, nil
}

// checkWAL verifies the frames of a journal's write-ahead log before the
// log is read and returns what SQLite will discard, if anything. SQLite
// trusts its index and does not verify frames it has indexed, while a
// reader that rebuilds the index stops at the first damaged frame and
// silently drops every frame after it, committed or not. So damage is
// refused (an *IntegrityError naming the frame) when a commit that returned
// would be lost:
//   - a damaged frame followed by an intact commit frame (a later commit
//     started after the damaged one had returned — a torn write damages
//     only the tail). This holds even when the damaged frame may belong to
//     the same last commit: its own header, which would mark a commit's
//     end, cannot be trusted;
//   - a damaged header with any frame after the generation's first intact
//     commit (the header is written with that commit, so a later frame
//     proves it returned);
//   - a damaged frame at or below the committed frame count recorded in a
//     valid -shm index;
//   - a valid -shm index recording more committed frames than the log holds
//     whole (a log cut short; without a header at all, any).
//
// Anything else damaged is a discarded last commit, returned as a
// *WALDiscard, and so is a last frame cut short (a torn write); intact
// frames after the last commit frame are a commit that never completed
// (SQLite ignores them; nothing is returned)
// (docs/site-runtime.md#what-a-torn-last-commit-means,
// docs/site-runtime.md#a-discarded-last-commit).
func checkWAL(walPath, shmPath, file string) (*WALDiscard, error) {
	wal, err := os.ReadFile(walPath)
	if err != nil {
		return nil, fmt.Errorf("read %s-wal: %w", file, err)
	}
	s, err := scanWAL(wal, file)
	if err != nil {
		return nil, err
	}
	log := file + "-wal"
	if s == nil {
		// No header: nothing SQLite could read, which only an index that
		// records committed frames contradicts.
		if mx, _, ok := indexHeader(shmPath); ok && mx > 0 {
			return nil, integrity(log, "", "the log holds %d bytes, no header; the index (-shm) records %d committed frames", len(wal), mx)
		}
		return nil, nil
	}
	mx, indexed := indexedFrames(shmPath, s.salt)
	if indexed && mx > len(s.frames) {
		// Frames SQLite indexed as committed are gone: the log was cut
		// short (truncated, or copied while it was written).
		return nil, integrity(log, "", "the index (-shm) records %d committed frames and the log holds %d whole frames", mx, len(s.frames))
	}
	if len(s.frames) == 0 && !s.partial {
		return nil, nil
	}
	damaged := 0 // the first damaged frame (none: 0)
	for i, f := range s.frames {
		if !f.intact {
			damaged = i + 1
			break
		}
	}
	intact := s.frames
	if damaged > 0 {
		intact = s.frames[:damaged-1]
		for i, f := range s.frames[damaged:] {
			if f.intact && f.commit {
				return nil, integrity(log, "", "frame %d %s and committed frame %d follows it", damaged, s.frames[damaged-1].damage, damaged+1+i)
			}
		}
	}
	kept, first := 0, 0 // the last and the first intact commit frame before the damage
	for i, f := range intact {
		if f.commit {
			kept = i + 1
			if first == 0 {
				first = i + 1
			}
		}
	}
	if !s.headerOK {
		// The header is written with the generation's first commit: a
		// frame after that commit's end proves the commit returned.
		if first > 0 && first < len(s.frames) {
			return nil, integrity(log, "", "the log's header fails its checksum and frame %d follows committed frame %d", first+1, first)
		}
		damaged, kept = 0, 0
	} else if damaged == 0 {
		if s.partial {
			// A torn last frame: a torn write of the last commit, which
			// SQLite discards with the frames of that commit before it.
			d := &WALDiscard{File: log, Kept: kept, First: kept + 1, Last: len(s.frames) + 1, Damaged: len(s.frames) + 1,
				Damage: "is cut short at the end of the log (a torn write)", Commit: s.partialCommit}
			for _, f := range s.frames[kept:] {
				d.Commit = d.Commit || f.commit
			}
			return d, nil
		}
		return nil, nil // intact frames after the last commit frame never completed a commit
	}
	if indexed && mx >= max(damaged, 1) {
		if damaged == 0 {
			return nil, integrity(log, "", "the log's header fails its checksum; the index (-shm) records %d committed frames", mx)
		}
		return nil, integrity(log, "", "frame %d %s; the index (-shm) records %d committed frames", damaged, s.frames[damaged-1].damage, mx)
	}
	d := &WALDiscard{File: log, Kept: kept, First: kept + 1, Last: len(s.frames), Damaged: damaged, Damage: "fails its checksum"}
	if damaged > 0 {
		d.Damage = s.frames[damaged-1].damage
	}
	for _, f := range s.frames[kept:] {
		d.Commit = d.Commit || f.commit
	}
	return d, nil
}

// walDiscards returns, for each journal file of dir with a write-ahead
// log, what SQLite will discard when it reads the log (checkWAL), in the
// order of domain.JournalFiles; cp is delivery.sqlite's checkpoint as
// verified. A discarded last commit of jobs.sqlite or services.sqlite is
// refused unless cp holds a pending command of a family that writes the
// file, without a saved result: a native record is written while its
// command executes and its commit returns before the command's result is
// saved, so only then can the discarded commit be the executing command's,
// which Recover redoes; in any other state it is a record a saved or
// acknowledged result depends on
// (docs/site-runtime.md#a-discarded-last-commit).
func walDiscards(dir string, cp domain.Checkpoint) ([]WALDiscard, error) {
	var out []WALDiscard
	for _, f := range domain.JournalFiles() {
		path := filepath.Join(dir, f)
		ok, err := exists(path + "-wal")
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		d, err := checkWAL(path+"-wal", path+"-shm", f)
		if err != nil {
			return nil, err
		}
		if d == nil {
			continue
		}
		if f != domain.DeliveryFile {
			if why := notExecuting(cp, f); why != "" {
				return nil, integrity(d.File, "", "%s; %s holds no executing command whose record it could be (%s), so a record a result depends on would be lost",
					d, domain.DeliveryFile, why)
			}
		}
		out = append(out, *d)
	}
	return out, nil
}

// notExecuting says why cp holds no executing command that writes the
// native records of file (jobs.sqlite: a batch command; services.sqlite:
// an application or inference one), or "" when it holds one: pending,
// with no result saved.
func notExecuting(cp domain.Checkpoint, file string) string {
	p := cp.Pending
	switch {
	case p == nil:
		return fmt.Sprintf("nothing is pending after sequence %d", cp.Acknowledged)
	case p.HasResult():
		return fmt.Sprintf("command %d's result is saved", p.Sequence)
	case (p.Command.Family == siteprotocol.FamilyBatch) != (file == domain.JobsFile) || p.Command.Family == "":
		return fmt.Sprintf("pending command %d (%s, family %q) writes no record to %s", p.Sequence, p.Command.Operation, p.Command.Family, file)
	}
	return ""
}

// walChecksum continues SQLite's WAL checksum (s0, s1) over b, read as
// 32-bit words in order.
func walChecksum(order binary.ByteOrder, s0, s1 uint32, b []byte) (uint32, uint32) {
	for i := 0; i+8 <= len(b); i += 8 {
		s0 += order.Uint32(b[i:]) + s1
		s1 += order.Uint32(b[i+4:]) + s0
	}
	return s0, s1
}

// indexHeader reads a -shm index's header (ok false: no -shm, or no
// valid header: its two copies differ or its version is not 1). The header
// is in native byte order; its salt copies the log's header bytes verbatim.
func indexHeader(shmPath string) (frames int, salt []byte, ok bool) {
	shm, err := os.ReadFile(shmPath)
	if err != nil || len(shm) < 96 || !bytes.Equal(shm[0:48], shm[48:96]) || shm[12] != 1 {
		return 0, nil, false
	}
	return int(binary.NativeEndian.Uint32(shm[16:20])), shm[32:40], true
}

// missingWAL refuses a journal file whose log is gone while its index
// (-shm) records committed frames: those commits are lost, and SQLite would
// read the file as it was before them. (Without the index a deleted log
// cannot be seen here; the server's acknowledged sequence is then the
// check, docs/site-runtime.md#a-discarded-last-commit.)
func missingWAL(shmPath, file string) error {
	if mx, _, ok := indexHeader(shmPath); ok && mx > 0 {
		return integrity(file+"-wal", "", "the log is missing and the index (-shm) records %d committed frames", mx)
	}
	return nil
}

// indexedFrames reads mxFrame from a -shm index whose two header copies
// agree, which is initialised and which describes the log with salt.
func indexedFrames(shmPath string, salt []byte) (int, bool) {
	frames, indexed, ok := indexHeader(shmPath)
	if !ok || !bytes.Equal(indexed, salt) {
		return 0, false
	}
	return frames, true
}

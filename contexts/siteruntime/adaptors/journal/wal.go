package journal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
)

// checkWAL verifies the frames of a journal's write-ahead log (SQLite file
// format, "The WAL File Format") before the log is read. SQLite trusts its
// index and does not verify frames it has indexed, while a reader that
// rebuilds the index stops at the first frame whose checksum fails and
// silently drops every committed frame after it. Either way a damaged
// frame would go unnoticed, so damage is refused here:
//   - a frame whose checksum fails followed by a valid commit frame of the
//     same log generation (damage in the middle: a torn final write can
//     only damage the tail);
//   - a frame whose checksum fails at or below the committed frame count
//     recorded in a valid -shm index.
//
// A torn, uncommitted tail without an index saying otherwise is what a
// crash leaves; SQLite ignores it, and so does this check
// (docs/site-runtime.md#what-a-torn-last-commit-means).
func checkWAL(walPath, shmPath, file string) error {
	wal, err := os.ReadFile(walPath)
	if err != nil {
		return fmt.Errorf("read %s-wal: %w", file, err)
	}
	if len(wal) < 32 {
		return nil // an empty log (or one too short to hold a header) holds no frame
	}
	var order binary.ByteOrder
	switch binary.BigEndian.Uint32(wal[0:4]) {
	case 0x377f0682:
		order = binary.LittleEndian
	case 0x377f0683:
		order = binary.BigEndian
	default:
		return integrity(file+"-wal", "", "not a write-ahead log (bad magic number)")
	}
	pageSize := int(binary.BigEndian.Uint32(wal[8:12]))
	if pageSize < 512 || pageSize > 65536 || pageSize&(pageSize-1) != 0 {
		return integrity(file+"-wal", "", "bad page size %d", pageSize)
	}
	s0, s1 := walChecksum(order, 0, 0, wal[:24])
	if s0 != binary.BigEndian.Uint32(wal[24:28]) || s1 != binary.BigEndian.Uint32(wal[28:32]) {
		return nil // the header is torn: SQLite ignores the whole log
	}
	salt := wal[16:24]
	frameSize := 24 + pageSize
	firstBad := 0
	prev0, prev1 := s0, s1
	for i, off := 1, 32; off+frameSize <= len(wal); i, off = i+1, off+frameSize {
		hdr := wal[off : off+24]
		if !bytes.Equal(hdr[8:16], salt) {
			break // a frame of an earlier log generation: the log ends here
		}
		c0, c1 := walChecksum(order, prev0, prev1, hdr[:8])
		c0, c1 = walChecksum(order, c0, c1, wal[off+24:off+frameSize])
		stored0, stored1 := binary.BigEndian.Uint32(hdr[16:20]), binary.BigEndian.Uint32(hdr[20:24])
		valid := c0 == stored0 && c1 == stored1
		switch {
		case !valid && firstBad == 0:
			firstBad = i
		case valid && firstBad != 0 && binary.BigEndian.Uint32(hdr[4:8]) != 0:
			return integrity(file+"-wal", "", "frame %d fails its checksum and committed frame %d follows it", firstBad, i)
		}
		prev0, prev1 = stored0, stored1
	}
	if firstBad == 0 {
		return nil
	}
	if mx, ok := indexedFrames(shmPath, salt); ok && mx >= firstBad {
		return integrity(file+"-wal", "", "frame %d fails its checksum; the index (-shm) records %d committed frames", firstBad, mx)
	}
	return nil
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

// indexedFrames reads mxFrame from a -shm index whose two header copies
// agree, which is initialised and which describes the log with salt.
func indexedFrames(shmPath string, salt []byte) (int, bool) {
	shm, err := os.ReadFile(shmPath)
	if err != nil || len(shm) < 96 || !bytes.Equal(shm[0:48], shm[48:96]) || shm[12] != 1 {
		return 0, false
	}
	// The index header is in native byte order; its salt copies the log's
	// header bytes verbatim.
	if !bytes.Equal(shm[32:40], salt) {
		return 0, false
	}
	return int(binary.NativeEndian.Uint32(shm[16:20])), true
}

// Package journaltest damages journal write-ahead logs the way the tests of
// a discarded last commit need (docs/site-runtime.md#a-discarded-last-commit):
// one flipped byte inside the last frame of a log — the frame that ends its
// last commit — in the frame's page or in its salt, so that the damage is
// confined to the last commit.
package journaltest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
)

// Frames describes a write-ahead log's frames as laid out in the file
// (SQLite file format, "The WAL File Format"): its page size and the byte
// offset of each frame's 24-byte header, in file order.
type Frames struct {
	PageSize int
	Offsets  []int
}

// ReadFrames lays out the frames of the log at path. It fails when the
// file is not a write-ahead log.
func ReadFrames(path string) ([]byte, Frames, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, Frames{}, err
	}
	if len(b) < 32 || binary.BigEndian.Uint32(b[0:4])&^1 != 0x377f0682 {
		return nil, Frames{}, fmt.Errorf("%s is not a write-ahead log", path)
	}
	f := Frames{PageSize: int(binary.BigEndian.Uint32(b[8:12]))}
	for off := 32; off+24+f.PageSize <= len(b); off += 24 + f.PageSize {
		f.Offsets = append(f.Offsets, off)
	}
	return b, f, nil
}

// IsCommit reports whether frame i (0-based, in file order) of the log b
// marks the end of a commit (its header's database size is non-zero).
func (f Frames) IsCommit(b []byte, i int) bool {
	off := f.Offsets[i]
	return binary.BigEndian.Uint32(b[off+4:off+8]) != 0
}

// LastFrameIsCommit reports whether the log's last frame in the file marks
// the end of a commit.
func (f Frames) LastFrameIsCommit(b []byte) bool {
	return len(f.Offsets) > 0 && f.IsCommit(b, len(f.Offsets)-1)
}

// FlipInLastFrame flips the lowest bit of the last byte of the last
// occurrence of marker inside the page of the log's last frame, which must
// end a commit (an empty marker: the page's last byte). It fails when the
// last frame is no commit frame or its page does not hold marker.
func FlipInLastFrame(path, marker string) error {
	b, f, err := ReadFrames(path)
	if err != nil {
		return err
	}
	if !f.LastFrameIsCommit(b) {
		return fmt.Errorf("the last frame of %s does not end a commit", path)
	}
	off := f.Offsets[len(f.Offsets)-1]
	page := b[off+24 : off+24+f.PageSize]
	i := bytes.LastIndex(page, []byte(marker))
	if i < 0 {
		return fmt.Errorf("the last frame of %s does not hold %q", path, marker)
	}
	page[i+len(marker)-1] ^= 0x01
	return os.WriteFile(path, b, 0o640)
}

// FlipSaltOfLastFrame flips one bit of the salt copied into the header of
// the log's last frame, which must end a commit: the frame's checksum still
// continues the chain, but SQLite no longer reads it as part of the log.
func FlipSaltOfLastFrame(path string) error {
	b, f, err := ReadFrames(path)
	if err != nil {
		return err
	}
	if !f.LastFrameIsCommit(b) {
		return errors.New("the last frame of " + path + " does not end a commit")
	}
	b[f.Offsets[len(f.Offsets)-1]+12] ^= 0x01
	return os.WriteFile(path, b, 0o640)
}

// FlipInHeader flips one bit of the log's header (its second salt word), so
// the header fails its checksum.
func FlipInHeader(path string) error {
	b, _, err := ReadFrames(path)
	if err != nil {
		return err
	}
	b[20] ^= 0x01
	return os.WriteFile(path, b, 0o640)
}

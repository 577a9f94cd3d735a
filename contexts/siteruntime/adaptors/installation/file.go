package installation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// File is the record as a JSON file (domain.Installation's shape).
type File struct{ path string }

// NewFile returns the record at path.
func NewFile(path string) *File { return &File{path: path} }

// Describe names the record.
func (f *File) Describe() string { return "installation record file " + f.path }

// Read returns the record, nil when the file does not exist.
func (f *File) Read(context.Context) (*domain.Installation, error) {
	b, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec domain.Installation
	if err := json.Unmarshal(b, &rec); err != nil || rec.InstallationID == "" {
		return nil, fmt.Errorf("%s does not hold an installation record: %v", f.path, err)
	}
	return &rec, nil
}

// Create writes the record durably without ever replacing an existing one:
// it is written to a temporary file, synced, then linked into place (link
// fails when the record exists: application.ErrRecordExists).
func (f *File) Create(_ context.Context, rec domain.Installation) error {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(f.path), 0o750); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.path), "."+filepath.Base(f.path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(append(b, '\n'))
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), f.path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return application.ErrRecordExists
		}
		return err
	}
	d, err := os.Open(filepath.Dir(f.path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

var _ application.InstallationRecord = (*File)(nil)

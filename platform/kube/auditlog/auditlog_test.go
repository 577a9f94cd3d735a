package auditlog

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// line is one completed create of the Job name, as the API server writes it.
func line(t *testing.T, name string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"stage": "ResponseComplete", "verb": "create",
		"user":           map[string]any{"username": "creator-of-" + name},
		"objectRef":      map[string]any{"resource": "jobs", "namespace": "ns", "name": name},
		"responseStatus": map[string]any{"code": 201},
	})
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func appendTo(t *testing.T, path string, lines ...[]byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, l := range lines {
		if _, err := f.Write(l); err != nil {
			t.Fatal(err)
		}
	}
}

// rotate renames the log as kube-apiserver's rotation does and starts a new, empty one.
func rotate(t *testing.T, dir, stamp string) {
	t.Helper()
	if err := os.Rename(filepath.Join(dir, "audit.log"), filepath.Join(dir, "audit-"+stamp+".log")); err != nil {
		t.Fatal(err)
	}
	appendTo(t, filepath.Join(dir, "audit.log"))
}

func TestAnEventWrittenJustBeforeARotationIsFoundInTheBackup(t *testing.T) {
	dir := t.TempDir()
	log := &Log{Path: filepath.Join(dir, "audit.log")}
	appendTo(t, log.Path, line(t, "before"))
	found := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() {
		ev, err := log.Creation(ctx, "jobs", "ns", "train")
		if err == nil && ev.Actor() != "creator-of-train" {
			err = os.ErrInvalid
		}
		found <- err
	}()
	// Whether Find read the log before, between or after these steps, it must find the event:
	// it is written to the log, which is then rotated away, and the new log never holds it.
	appendTo(t, log.Path, line(t, "train"))
	rotate(t, dir, "2026-12-07T23-14-22.396")
	appendTo(t, log.Path, line(t, "after"))
	if err := <-found; err != nil {
		t.Fatalf("the create written before the rotation: %v", err)
	}
}

func TestANewLogAfterARotationIsReadFromItsStart(t *testing.T) {
	dir := t.TempDir()
	log := &Log{Path: filepath.Join(dir, "audit.log")}
	// A long log, rotated, and an event as the new log's first line: an offset carried over
	// from the old file by name would skip it.
	for i := 0; i < 50; i++ {
		appendTo(t, log.Path, line(t, "filler"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	found := make(chan error, 1)
	go func() {
		_, err := log.Creation(ctx, "jobs", "ns", "train")
		found <- err
	}()
	rotate(t, dir, "2026-12-07T23-14-22.396")
	appendTo(t, log.Path, line(t, "train"))
	if err := <-found; err != nil {
		t.Fatalf("the create at the new log's start: %v", err)
	}
}

func TestBackupsLastWrittenBeforeSinceAreSkippedAndTheRestRead(t *testing.T) {
	dir := t.TempDir()
	since := time.Now()
	old, recent := filepath.Join(dir, "audit-2026-12-07T20-00-00.000.log"), filepath.Join(dir, "audit-2026-12-07T21-00-00.000.log")
	appendTo(t, old, line(t, "old"))
	appendTo(t, recent, line(t, "recent"))
	appendTo(t, filepath.Join(dir, "audit.log"), line(t, "now"))
	if err := os.Chtimes(old, since.Add(-time.Hour), since.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(recent, since.Add(time.Second), since.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	evs, err := (&Log{Path: filepath.Join(dir, "audit.log"), Since: since}).Events()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ev := range evs {
		names = append(names, ev.ObjectRef.Name)
	}
	if len(names) != 2 || names[0] != "recent" || names[1] != "now" {
		t.Fatalf("events %v, want [recent now] (the backup older than Since skipped, oldest first)", names)
	}
	all, err := (&Log{Path: filepath.Join(dir, "audit.log")}).Events()
	if err != nil || len(all) != 3 {
		t.Fatalf("without Since: %d events, %v; want all 3", len(all), err)
	}
}

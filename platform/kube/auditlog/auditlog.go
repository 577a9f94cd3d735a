// Package auditlog reads a kube-apiserver's audit log (audit.k8s.io/v1
// Events, one JSON event a line, at least the Metadata level): who
// authenticated, who a request acted as (impersonation) and what it did to
// which object. The local cluster's tests (platform/kube/kubetest) and the
// demo read the local cluster's log with it.
package auditlog

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Log reads the API server's audit log (one JSON event a line, Metadata level), together with
// the backups the API server rotates it into (kube-apiserver's --audit-log-maxsize, 100 MB by
// default: Path's name with a timestamp, such as audit-2026-12-07T23-14-22.396.log, in the same
// directory), so that an event written just before a rotation is still found.
type Log struct {
	// Path is the log the API server writes now.
	Path string
	// Since, when set, skips the backups last written before it: they hold only earlier events.
	Since time.Time
}

// logFile is one file of the log and the offset up to which Find has read it.
type logFile struct {
	path   string
	info   os.FileInfo
	offset int64
}

// files lists the log's backups last written at or after Since, oldest first, then Path.
func (a *Log) files() ([]logFile, error) {
	base := filepath.Base(a.Path)
	ext := filepath.Ext(base)
	backups, err := filepath.Glob(filepath.Join(filepath.Dir(a.Path), strings.TrimSuffix(base, ext)+"-*"+ext))
	if err != nil {
		return nil, err
	}
	sort.Strings(backups) // the timestamp in the name sorts them by age
	var out []logFile
	for _, p := range append(backups, a.Path) {
		fi, err := os.Stat(p)
		if err != nil {
			// A backup removed since the listing (the API server keeps a bounded number), or
			// the log between its rotation's rename and the new file's creation.
			if os.IsNotExist(err) && (p != a.Path || len(out) > 0) {
				continue
			}
			return nil, err
		}
		if p != a.Path && !a.Since.IsZero() && fi.ModTime().Before(a.Since) {
			continue
		}
		out = append(out, logFile{path: p, info: fi})
	}
	return out, nil
}

// Event is the part of an audit.k8s.io/v1 Event that its readers look at.
type Event struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	// User is who authenticated; ImpersonatedUser, when set, is who the request acted as.
	User             authenticationv1.UserInfo  `json:"user"`
	ImpersonatedUser *authenticationv1.UserInfo `json:"impersonatedUser,omitempty"`
	UserAgent        string                     `json:"userAgent"`
	ObjectRef        *ObjectRef                 `json:"objectRef,omitempty"`
	ResponseStatus   *metav1.Status             `json:"responseStatus,omitempty"`
	Received         metav1.MicroTime           `json:"requestReceivedTimestamp"`
}

// ObjectRef names the object of an audit event.
type ObjectRef struct {
	Resource    string `json:"resource"`
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	UID         string `json:"uid"`
	APIGroup    string `json:"apiGroup"`
	APIVersion  string `json:"apiVersion"`
	Subresource string `json:"subresource"`
}

// Actor is the user the request acted as: the impersonated user if any, else the
// authenticated one.
func (e Event) Actor() string {
	if e.ImpersonatedUser != nil {
		return e.ImpersonatedUser.Username
	}
	return e.User.Username
}

// Code is the response's HTTP status code (0 when unknown).
func (e Event) Code() int32 {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

// Events returns every completed request recorded so far (stage ResponseComplete), oldest file
// first.
func (a *Log) Events() ([]Event, error) {
	files, err := a.files()
	if err != nil {
		return nil, err
	}
	var out []Event
	for _, f := range files {
		evs, _, _, err := readFrom(f.path, func(os.FileInfo) int64 { return 0 })
		if err != nil {
			return out, err
		}
		out = append(out, evs...)
	}
	return out, nil
}

// readFrom opens the file at path and parses its complete lines from offsetOf(the opened file)
// on; it returns the opened file's identity and the offset after those lines. The identity is
// the opened file's, not the path's: a rotation may rename the path between a listing and here.
func readFrom(path string, offsetOf func(os.FileInfo) int64) ([]Event, os.FileInfo, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, 0, err
	}
	evs, offset, err := readLines(f, offsetOf(info))
	return evs, info, offset, err
}

// readLines parses f's complete lines from offset on and returns the offset after them.
func readLines(f *os.File, offset int64) ([]Event, int64, error) {
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, offset, err
	}
	var out []Event
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			// EOF: a partial last line is read again next time.
			if err == io.EOF {
				return out, offset, nil
			}
			return out, offset, err
		}
		offset += int64(len(line))
		var ev Event
		if json.Unmarshal(line, &ev) == nil && ev.Stage == "ResponseComplete" {
			out = append(out, ev)
		}
	}
}

// Find returns the first completed request for which match holds, waiting for the API server
// to write it (the audit event of a request lands just after its response) until ctx ends. It
// reads each file once, following a file across its rotation into a backup (by identity, not
// name), and reads the new log from its start.
func (a *Log) Find(ctx context.Context, match func(Event) bool) (Event, error) {
	var seen []logFile
	for {
		files, err := a.files()
		if err != nil {
			return Event{}, err
		}
		read := make([]logFile, 0, len(files))
		for _, f := range files {
			evs, info, next, err := readFrom(f.path, func(info os.FileInfo) int64 {
				for _, s := range seen {
					if os.SameFile(s.info, info) {
						return s.offset
					}
				}
				return 0
			})
			if err != nil {
				if os.IsNotExist(err) {
					continue // gone since the listing: its file is read under its new name next time
				}
				return Event{}, err
			}
			read = append(read, logFile{path: f.path, info: info, offset: next})
			for _, ev := range evs {
				if match(ev) {
					return ev, nil
				}
			}
		}
		seen = read
		select {
		case <-ctx.Done():
			return Event{}, fmt.Errorf("no matching audit event in %s: %w", a.Path, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Creation returns the audit event of the successful create of an object, such as
// Creation(ctx, "jobs", ns, "train"); its Actor is who created it.
func (a *Log) Creation(ctx context.Context, resource, namespace, name string) (Event, error) {
	return a.Find(ctx, func(ev Event) bool {
		r := ev.ObjectRef
		return ev.Verb == "create" && r != nil && r.Resource == resource && r.Subresource == "" &&
			r.Namespace == namespace && r.Name == name && ev.Code() >= 200 && ev.Code() < 300
	})
}

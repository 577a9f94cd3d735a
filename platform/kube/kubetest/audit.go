package kubetest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AuditLog reads the API server's audit log (one JSON event a line, Metadata level).
type AuditLog struct {
	Path string
}

// AuditEvent is the part of an audit.k8s.io/v1 Event that tests look at.
type AuditEvent struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	// User is who authenticated; ImpersonatedUser, when set, is who the request acted as.
	User             authenticationv1.UserInfo  `json:"user"`
	ImpersonatedUser *authenticationv1.UserInfo `json:"impersonatedUser,omitempty"`
	UserAgent        string                     `json:"userAgent"`
	ObjectRef        *AuditObjectRef            `json:"objectRef,omitempty"`
	ResponseStatus   *metav1.Status             `json:"responseStatus,omitempty"`
	Received         metav1.MicroTime           `json:"requestReceivedTimestamp"`
}

// AuditObjectRef names the object of an audit event.
type AuditObjectRef struct {
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
func (e AuditEvent) Actor() string {
	if e.ImpersonatedUser != nil {
		return e.ImpersonatedUser.Username
	}
	return e.User.Username
}

// Code is the response's HTTP status code (0 when unknown).
func (e AuditEvent) Code() int32 {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

// Events returns every completed request recorded so far (stage ResponseComplete).
func (a *AuditLog) Events() ([]AuditEvent, error) {
	evs, _, err := a.readFrom(0)
	return evs, err
}

// readFrom parses the complete lines from offset on and returns the offset after them.
func (a *AuditLog) readFrom(offset int64) ([]AuditEvent, int64, error) {
	f, err := os.Open(a.Path)
	if err != nil {
		return nil, offset, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, offset, err
	}
	var out []AuditEvent
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
		var ev AuditEvent
		if json.Unmarshal(line, &ev) == nil && ev.Stage == "ResponseComplete" {
			out = append(out, ev)
		}
	}
}

// Find returns the first completed request for which match holds, waiting for the API server
// to write it (the audit event of a request lands just after its response) until ctx ends.
func (a *AuditLog) Find(ctx context.Context, match func(AuditEvent) bool) (AuditEvent, error) {
	var offset int64
	for {
		evs, next, err := a.readFrom(offset)
		if err != nil {
			return AuditEvent{}, err
		}
		offset = next
		for _, ev := range evs {
			if match(ev) {
				return ev, nil
			}
		}
		select {
		case <-ctx.Done():
			return AuditEvent{}, fmt.Errorf("no matching audit event in %s: %w", a.Path, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Creation returns the audit event of the successful create of an object, such as
// Creation(ctx, "jobs", ns, "train"); its Actor is who created it.
func (a *AuditLog) Creation(ctx context.Context, resource, namespace, name string) (AuditEvent, error) {
	return a.Find(ctx, func(ev AuditEvent) bool {
		r := ev.ObjectRef
		return ev.Verb == "create" && r != nil && r.Resource == resource && r.Subresource == "" &&
			r.Namespace == namespace && r.Name == name && ev.Code() >= 200 && ev.Code() < 300
	})
}

// WhoCreated returns who created the object (the Actor of its create request), waiting up to
// 30 seconds for the audit event; it fails the test when there is none.
func (e *Env) WhoCreated(resource, namespace, name string) AuditEvent {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ev, err := e.AuditLog().Creation(ctx, resource, namespace, name)
	if err != nil {
		e.T.Fatalf("kubetest: who created %s %s/%s: %v", resource, namespace, name, err)
	}
	return ev
}

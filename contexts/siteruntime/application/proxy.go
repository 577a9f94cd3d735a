package application

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/textproto"
	"slices"
	"strings"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// ProxyRequest is one HTTP request to an Attempt's Service.
type ProxyRequest struct {
	Method string
	// Path is the absolute path (with its query) at the service.
	Path    string
	Headers map[string][]string
	Body    []byte
}

// ProxyResponse is the service's answer.
type ProxyResponse struct {
	Status  int
	Headers map[string][]string
	// Body is the answer's first siteprotocol.MaxReadBytes bytes;
	// Truncated is true when it was longer.
	Body      []byte
	Truncated bool
	// Cut is true when the body was still arriving at the context's
	// deadline: Body is what was read by then.
	Cut bool
	// Service is the live Service the request went through (its UID as
	// read before the send).
	Service siteprotocol.NativeRef
}

// ProxyTarget is what a proxy goes to (docs/site-runtime.md#private-reads):
// the Attempt's recorded workload object and, where the Runtime created
// the Service itself, that Service's record.
type ProxyTarget struct {
	// Root is the recorded workload object (the application family's
	// Deployment, the inference family's InferenceService) with its
	// recorded UID, and RootSpec its saved specification.
	Root     siteprotocol.NativeRef
	RootSpec []byte
	// Service is the Service the Runtime recorded (the application
	// family's attempt-<attempt>) and ServiceSpec its saved specification.
	// Both are zero where a controller makes the Service from Root
	// (KServe's predictor Service of an InferenceService).
	Service     siteprotocol.NativeRef
	ServiceSpec []byte
}

// ErrNoAnswer is returned (wrapped) by ServiceProxy when the service's
// answer did not begin — no status line and headers — by the context's
// deadline: the request was sent, and may have reached the service.
var ErrNoAnswer = errors.New("no answer within the bound")

// ServiceProxy sends requests to an Attempt's Service through the API
// server's service proxy, as the Runtime (docs/site-runtime.md#private-reads).
type ServiceProxy interface {
	// ProxyService sends req to t's Service after checking it live. A
	// recorded Service (t.Service set): its name holds its recorded UID,
	// it carries id's identity labels, and its type, selector and port are
	// those of t.ServiceSpec. A controller's Service (t.Service zero): the
	// family's rule, e.g. KServe's predictor Service controlled by t.Root
	// by UID, selecting exactly the Attempt's exact Pods. Errors: wrapping
	// ErrNativeIdentityMismatch (nothing was sent), ErrWorkloadGone (the
	// recorded Service is gone), ErrEndpointUnavailable (no Service or
	// endpoint the API server could reach; nothing usable was sent), any
	// other error (the request may or may not have reached the service).
	// ctx's deadline bounds the exchange — connecting, the answer's
	// headers and its whole body (docs/site-runtime.md#command-bounds): a
	// body still arriving at it is answered as read so far (Cut); an
	// answer that did not begin by it wraps ErrNoAnswer.
	ProxyService(ctx context.Context, t ProxyTarget, id ObjectIdentity, req ProxyRequest) (ProxyResponse, error)
}

// WithProxy makes r answer proxy through p to the Service of the recorded
// kind service, or, with service empty, to the Service a controller makes
// from the root object (KServe's predictor Service). It returns r.
func (r *PrivateReads) WithProxy(p ServiceProxy, service string) *PrivateReads {
	r.proxy, r.service = p, service
	return r
}

// droppedHeaders are never proxied, either way: hop-by-hop headers (RFC
// 9110 section 7.6.1), credentials and cookies (a member's request must
// not carry the Site's, nor a service's answer set any), and the framing
// the Runtime sets itself; also the API server's own Audit-Id.
var droppedHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer",
	"Transfer-Encoding", "Upgrade", "Authorization", "Cookie", "Set-Cookie", "Set-Cookie2", "Host", "Content-Length",
	"Audit-Id", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Uri", "Forwarded",
	"Impersonate-User", "Impersonate-Group", "Impersonate-Uid",
}

// FilterHeaders returns h with canonical names, without droppedHeaders,
// the headers the Connection header names, and any Impersonate-Extra-*
// header, keeping every value in order; then at most
// siteprotocol.MaxProxyHeaders values and siteprotocol.MaxProxyHeaderBytes
// bytes, in name order (truncated says some were left out).
func FilterHeaders(h map[string][]string) (out map[string][]string, truncated bool) {
	drop := map[string]bool{}
	for _, n := range droppedHeaders {
		drop[n] = true
	}
	for name, values := range h {
		if textproto.CanonicalMIMEHeaderKey(name) != "Connection" {
			continue
		}
		for _, v := range values {
			for _, f := range strings.Split(v, ",") {
				drop[textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(f))] = true
			}
		}
	}
	merged := map[string][]string{}
	for name, values := range h {
		c := textproto.CanonicalMIMEHeaderKey(name)
		if drop[c] || strings.HasPrefix(c, "Impersonate-") {
			continue
		}
		merged[c] = append(merged[c], values...)
	}
	names := make([]string, 0, len(merged))
	for n := range merged {
		names = append(names, n)
	}
	slices.Sort(names)
	n, size := 0, 0
	for _, name := range names {
		for _, v := range merged[name] {
			if n+1 > siteprotocol.MaxProxyHeaders || size+len(name)+len(v) > siteprotocol.MaxProxyHeaderBytes {
				truncated = true
				continue
			}
			if out == nil {
				out = map[string][]string{}
			}
			out[name] = append(out[name], v)
			n++
			size += len(name) + len(v)
		}
	}
	return out, truncated
}

// Proxy answers proxy for a service Attempt: after the checks of
// PrivateReads (the workload's record, binding, fresh execution.read,
// every Pod of the Attempt exact by its family's chain — Pod → ReplicaSet
// → Deployment, or → Deployment → InferenceService with the private
// argument rule), the Service is checked live (ServiceProxy): the
// application family's recorded Service, whose record must hold a UID
// (not-started otherwise; removed: native-missing), or the inference
// family's predictor Service, which KServe's controller makes. A method,
// path or header the protocol does not admit is invalid-payload
// (siteprotocol's payload rules); a workload without a ready Pod, or a
// Service the API server reaches no endpoint of, fails
// endpoint-unavailable with nothing sent. The answer is the service's
// status — an upstream error is the service's answer, never a Runtime
// failure — its filtered headers and its body up to 1 MiB (truncated when
// longer). The exchange is bounded by ReadConfig.ProxyTimeout from the
// send (docs/site-runtime.md#command-bounds): a body still arriving then is
// answered as read so far, truncated; an answer that did not begin fails
// deadline-exceeded. A proxy is sent at most once: Recover of a proxy whose
// answer was not saved fails native-error without sending it again (it
// may have reached the service).
func (r *PrivateReads) Proxy(ctx context.Context, cmd siteprotocol.Command, recovering bool) (domain.Answer, error) {
	if r.proxy == nil {
		return domain.Refused(siteprotocol.ReasonUnsupportedOperation, "this family does not proxy to a service"), nil
	}
	p, err := siteprotocol.DecodePayload[siteprotocol.ProxyPayload](cmd)
	if err != nil {
		return domain.Refused(siteprotocol.ReasonInvalidPayload, "proxy payload: %v", err), nil
	}
	// DecodePayload has checked the method, the path
	// (siteprotocol.SafeProxyPath), the headers and the body's bound.
	body, err := base64.StdEncoding.DecodeString(p.BodyBase64)
	if err != nil {
		return domain.Refused(siteprotocol.ReasonInvalidPayload, "proxy payload: body_base64: %v", err), nil
	}
	rec, id, refusal, err := r.check(ctx, cmd)
	if refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	target := ProxyTarget{Root: RecordRef(*rec), RootSpec: rec.Spec}
	// svcRef names the Service in answers: the recorded one, or until the
	// live one is read, the root object its controller makes it from.
	svcRef := target.Root
	if r.service != "" {
		records, err := r.life.Records(ctx, cmd.AttemptID)
		if err != nil {
			return domain.Answer{}, err
		}
		svc := domain.FindRecord(records, r.service)
		if svc == nil || svc.UID == "" {
			return domain.Refused(siteprotocol.ReasonNotStarted, "attempt %s has no service to proxy to", cmd.AttemptID), nil
		}
		svcRef = RecordRef(*svc)
		if svc.Phase == domain.PhaseRemoved || svc.Phase == domain.PhaseDeleting {
			return domain.Answer{Outcome: siteprotocol.OutcomeFailed, Reason: siteprotocol.ReasonNativeMissing,
				Message:    fmt.Sprintf("%s %s/%s (uid %s) was removed by command %s", svcRef.Kind, svcRef.Namespace, svcRef.Name, svcRef.UID, svc.CommandID),
				NativeRefs: []siteprotocol.NativeRef{svcRef}}, nil
		}
		target.Service, target.ServiceSpec = svcRef, svc.Spec
	}
	pod, refusal, err := r.pod(ctx, *rec, id, noPodUnavailable)
	if refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	unavailable := func(why string) domain.Answer {
		return domain.Answer{Outcome: siteprotocol.OutcomeFailed, Reason: siteprotocol.ReasonEndpointUnavailable,
			Message: "nothing was sent: " + why, NativeRefs: []siteprotocol.NativeRef{svcRef}}
	}
	if !pod.Ready {
		return unavailable(fmt.Sprintf("Pod %s of %s %s is not Ready", pod.Name, rec.Kind, rec.Name)), nil
	}
	if recovering {
		return domain.Answer{Outcome: siteprotocol.OutcomeFailed, Reason: siteprotocol.ReasonNativeError,
			Message: fmt.Sprintf("the proxied %s %s to %s %s was interrupted before its answer was saved; it may have reached the service and is not sent again",
				p.Method, p.Path, svcRef.Kind, svcRef.Name),
			NativeRefs: []siteprotocol.NativeRef{svcRef}}, nil
	}
	headers, _ := FilterHeaders(p.Headers)
	// The exchange is bounded from its send (a proxy is never sent again,
	// so a restart has no wait to resume; docs/site-runtime.md#command-bounds).
	until := time.Now().Add(r.cfg.ProxyTimeout)
	pctx, cancel := context.WithDeadline(ctx, until)
	end := beginWait(ctx, fmt.Sprintf("the answer to %s %s through %s %s", p.Method, p.Path, svcRef.Kind, svcRef.Name), until)
	resp, err := r.proxy.ProxyService(pctx, target, id, ProxyRequest{Method: p.Method, Path: p.Path, Headers: headers, Body: body})
	cancel()
	if errors.Is(err, ErrNoAnswer) || resp.Cut {
		end(waitAtBound)
	} else {
		end(waitDone)
	}
	switch {
	case errors.Is(err, ErrNoAnswer) && ctx.Err() == nil:
		return domain.Answer{Outcome: siteprotocol.OutcomeFailed, Reason: siteprotocol.ReasonDeadlineExceeded,
			Message: fmt.Sprintf("%s %s was sent through %s %s, and no answer began within %s, the proxy's bound; it may have reached the service and is not sent again",
				p.Method, p.Path, svcRef.Kind, svcRef.Name, r.cfg.ProxyTimeout),
			NativeRefs: []siteprotocol.NativeRef{svcRef}}, nil
	case errors.Is(err, ErrNativeIdentityMismatch):
		return domain.Answer{Outcome: siteprotocol.OutcomeRefused, Reason: siteprotocol.ReasonNativeIdentityMismatch,
			Message: fmt.Sprintf("nothing was sent: %v", err), NativeRefs: []siteprotocol.NativeRef{svcRef}}, nil
	case errors.Is(err, ErrWorkloadGone):
		return domain.Answer{Outcome: siteprotocol.OutcomeFailed, Reason: siteprotocol.ReasonNativeMissing,
			Message: fmt.Sprintf("nothing was sent: %v", err), NativeRefs: []siteprotocol.NativeRef{svcRef}}, nil
	case errors.Is(err, ErrEndpointUnavailable):
		return unavailable(err.Error()), nil
	case err != nil:
		return domain.Answer{}, fmt.Errorf("proxy %s %s to %s %s/%s: %w", p.Method, p.Path, svcRef.Kind, svcRef.Namespace, svcRef.Name, err)
	}
	if resp.Service.Name != "" {
		svcRef = resp.Service
	}
	out, headersTruncated := FilterHeaders(resp.Headers)
	msg := fmt.Sprintf("%s %s answered %d (%d body bytes) through %s %s", p.Method, p.Path, resp.Status, len(resp.Body), svcRef.Kind, svcRef.Name)
	switch {
	case resp.Truncated:
		msg += fmt.Sprintf("; the body was longer than %d bytes and is truncated", siteprotocol.MaxReadBytes)
	case resp.Cut:
		msg += fmt.Sprintf("; the body was still arriving at the proxy's bound, %s after the send, and is truncated there", r.cfg.ProxyTimeout)
	}
	return domain.Succeeded(siteprotocol.ReasonProxied, msg, siteprotocol.ProxyDetail{
		Status: resp.Status, Headers: out, HeadersTruncated: headersTruncated,
		BodyBase64: base64.StdEncoding.EncodeToString(resp.Body), Truncated: resp.Truncated || resp.Cut,
	}, svcRef, pod.Ref()), nil
}

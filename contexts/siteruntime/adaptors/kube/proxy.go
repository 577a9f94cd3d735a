package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// ServiceOf finds and checks, live, the Service a proxy to the recorded
// object root (saved: its saved specification; id: the Attempt's
// identity) goes to, for a family whose Service the Runtime does not
// record (KServe's predictor Service of an InferenceService). Errors wrap
// application.ErrEndpointUnavailable (no Service now),
// application.ErrNativeIdentityMismatch (not exact), or are a failed read.
type ServiceOf func(ctx context.Context, root siteprotocol.NativeRef, saved []byte, id application.ObjectIdentity) (*corev1.Service, error)

// WithServiceOf makes a proxy to a recorded object of kind, without a
// recorded Service, go to the Service of finds (a family's own). It
// returns w.
func (w *Workloads) WithServiceOf(kind string, of ServiceOf) *Workloads {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.services[kind] = of
	return w
}

func (w *Workloads) serviceOf(kind string) (ServiceOf, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	of, ok := w.services[kind]
	return of, ok
}

// ProxyService sends req to the Attempt's Service through the API
// server's service proxy (/api/v1/namespaces/<ns>/services/<name>:<port>/proxy<path>),
// as the Runtime (its services/proxy grant in project namespaces;
// application.ServiceProxy). First the live Service is checked: a
// recorded Service (t.Service, the application family's) against its
// record and saved specification (recordedService); else the Service a
// family finds for its recorded kind (WithServiceOf: KServe's predictor
// Service of a recorded InferenceService, checked by its controller, its
// selector and the Pods it selects). Otherwise nothing is sent
// (application.ErrNativeIdentityMismatch). The request goes to
// the Service's first port. The answer's body is read up to
// siteprotocol.MaxReadBytes (Truncated when longer), and until ctx's
// deadline: a body still arriving then is answered as read so far (Cut),
// an answer without its headers by then wraps application.ErrNoAnswer
// (docs/site-runtime.md#command-bounds). An error status that
// the API server itself answers (a metav1.Status body: no endpoints, an
// endpoint it cannot reach) wraps application.ErrEndpointUnavailable;
// every other status is the service's.
func (w *Workloads) ProxyService(ctx context.Context, t application.ProxyTarget, id application.ObjectIdentity, req application.ProxyRequest) (application.ProxyResponse, error) {
	var live *corev1.Service
	var err error
	switch {
	case t.Service.UID != "":
		live, err = w.recordedService(ctx, t.Service, t.ServiceSpec, id)
	default:
		of, ok := w.serviceOf(t.Root.Kind)
		if !ok {
			return application.ProxyResponse{}, fmt.Errorf("the Runtime proxies to no Service of %s objects", t.Root.Kind)
		}
		live, err = of(ctx, t.Root, t.RootSpec, id)
	}
	if err != nil {
		return application.ProxyResponse{}, err
	}
	client, err := rest.HTTPClientFor(w.config)
	if err != nil {
		return application.ProxyResponse{}, fmt.Errorf("http client of the API server: %w", err)
	}
	port := strconv.Itoa(int(live.Spec.Ports[0].Port))
	target := strings.TrimRight(w.config.Host, "/") + "/api/v1/namespaces/" + url.PathEscape(live.Namespace) +
		"/services/" + url.PathEscape(live.Name) + ":" + port + "/proxy" + req.Path
	hr, err := http.NewRequestWithContext(ctx, req.Method, target, bytes.NewReader(req.Body))
	if err != nil {
		return application.ProxyResponse{}, fmt.Errorf("proxy request: %w", err)
	}
	for name, values := range req.Headers {
		for _, v := range values {
			hr.Header.Add(name, v)
		}
	}
	resp, err := client.Do(hr)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return application.ProxyResponse{}, fmt.Errorf("%w: %v", application.ErrNoAnswer, err)
		}
		return application.ProxyResponse{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, siteprotocol.MaxReadBytes+1))
	// A body still arriving at ctx's deadline is answered as read so far.
	cut := err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded)
	if err != nil && !cut {
		return application.ProxyResponse{}, fmt.Errorf("read the proxied answer: %w", err)
	}
	if resp.StatusCode >= 500 && !cut && apiServerStatus(resp.Header, body) {
		return application.ProxyResponse{}, fmt.Errorf("%w: the API server answered %d: %s", application.ErrEndpointUnavailable, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	out := application.ProxyResponse{Status: resp.StatusCode, Headers: maps.Clone(map[string][]string(resp.Header)), Body: body, Cut: cut,
		Service: siteprotocol.NativeRef{Kind: domain.KindService, Namespace: live.Namespace, Name: live.Name, UID: string(live.UID)}}
	if len(body) > siteprotocol.MaxReadBytes {
		out.Body, out.Truncated = body[:siteprotocol.MaxReadBytes], true
	}
	return out, nil
}

// recordedService reads the Service the Runtime recorded (svc) and
// checks it against saved, the specification the Runtime saved: its UID,
// the identity labels, type ClusterIP, exactly the saved selector and the
// saved port. Errors: wrapping application.ErrWorkloadGone (gone),
// application.ErrNativeIdentityMismatch (not exact), or a failed read.
func (w *Workloads) recordedService(ctx context.Context, svc siteprotocol.NativeRef, saved []byte, id application.ObjectIdentity) (*corev1.Service, error) {
	var want corev1.Service
	if err := json.Unmarshal(saved, &want); err != nil {
		return nil, fmt.Errorf("decode the saved Service: %w", err)
	}
	if len(want.Spec.Ports) == 0 {
		return nil, fmt.Errorf("the saved Service %s has no port", svc.Name)
	}
	live, err := w.client.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%w: Service %s/%s (uid %s) no longer exists", application.ErrWorkloadGone, svc.Namespace, svc.Name, svc.UID)
	case err != nil:
		return nil, fmt.Errorf("read Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	if m := serviceMismatch(live, svc, &want, id); m != "" {
		return nil, fmt.Errorf("%w: Service %s/%s %s", application.ErrNativeIdentityMismatch, svc.Namespace, svc.Name, m)
	}
	return live, nil
}

// serviceMismatch names the first way live differs from the Service the
// Runtime recorded (svc) and saved (want); empty when it is exact.
func serviceMismatch(live *corev1.Service, svc siteprotocol.NativeRef, want *corev1.Service, id application.ObjectIdentity) string {
	switch {
	case string(live.UID) != svc.UID:
		return fmt.Sprintf("has uid %s; the Runtime recorded uid %s (another Service under the recorded name)", live.UID, svc.UID)
	case IdentityMismatch(live.Labels, id) != "":
		return IdentityMismatch(live.Labels, id)
	case live.Spec.Type != corev1.ServiceTypeClusterIP:
		return fmt.Sprintf("is of type %s, not ClusterIP", live.Spec.Type)
	case !maps.Equal(live.Spec.Selector, want.Spec.Selector):
		return fmt.Sprintf("selects %v, not the saved %v", live.Spec.Selector, want.Spec.Selector)
	case len(live.Spec.Ports) != len(want.Spec.Ports) || live.Spec.Ports[0].Port != want.Spec.Ports[0].Port ||
		live.Spec.Ports[0].TargetPort.String() != want.Spec.Ports[0].TargetPort.String():
		return fmt.Sprintf("has ports %v, not the saved %v", live.Spec.Ports, want.Spec.Ports)
	}
	return ""
}

// apiServerStatus reports whether an answer is the API server's own
// metav1.Status (JSON, kind Status), not the service's.
func apiServerStatus(h http.Header, body []byte) bool {
	if !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
		return false
	}
	var st metav1.Status
	return json.Unmarshal(body, &st) == nil && st.Kind == "Status" && st.APIVersion == "v1"
}

var _ application.ServiceProxy = (*Workloads)(nil)

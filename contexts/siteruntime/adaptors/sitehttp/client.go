// Package sitehttp is the Site Runtime's SiteControl adaptor: an HTTPS
// client of the Site protocol's routes (docs/site-protocol.md#routes,
// docs/site-protocol.md#authentication-and-authorisation,
// docs/site-protocol.md#installation-fencing).
//
//   - The bearer token is re-read from its file for every request, so a
//     projected service-account token rotated by the kubelet (or a rotated
//     static key) is picked up at the next connection attempt.
//   - The server certificate is verified against the configured CA bundle
//     (the system roots when none is configured).
//   - Plain HTTP is accepted only to a loopback address; New refuses any
//     other http:// authority.
//   - Every request carries the installation ID in Metallo-Installation;
//     every pull also carries the Runtime's version in
//     Metallo-Runtime-Version (docs/site-protocol.md#the-runtimes-version).
//   - A 4xx answer is returned as an *application.Problem carrying the
//     problem's "reason"; a 5xx, 408, 429, a timeout or a connection failure
//     (a body cut short included) wraps application.ErrTransient.
//   - Answers are read up to a bound: a pull answer up to
//     siteprotocol.MaxPullAnswerBytes (the server's byte budget
//     siteprotocol.MaxPullBytes plus one command alone past it plus the
//     envelope), any other answer up to siteprotocol.MaxCommandBytes. A
//     longer answer is never parsed: it wraps application.ErrOversizedAnswer.
package sitehttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/cabundle"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Config configures a Client.
type Config struct {
	// Authority is the Site API's base URL, e.g. https://metallo.example.org
	// (or http://127.0.0.1:8080 on loopback).
	Authority string
	// Environment is the stream's environment ID.
	Environment string
	// InstallationID is sent in Metallo-Installation on every request.
	InstallationID string
	// RuntimeVersion is sent in Metallo-Runtime-Version on every pull, as
	// siteprotocol.RuntimeVersionValue makes it (so the server never
	// refuses it); empty sends "unknown".
	RuntimeVersion string
	// TokenFile holds the bearer credential (a projected service-account
	// token or a static key), re-read for every request.
	TokenFile string
	// CAFile is a PEM bundle to verify the server with; empty uses the
	// system roots.
	CAFile string
	// RequestTimeout bounds a request other than a long poll (default 30 s);
	// a pull may take its wait on top.
	RequestTimeout time.Duration
}

// Client is the SiteControl adaptor.
type Client struct {
	base    *url.URL
	cfg     Config
	http    *http.Client
	timeout time.Duration
}

// ErrPlainHTTP is returned by New for an http:// authority that is not a
// loopback address.
var ErrPlainHTTP = errors.New("plain http is accepted only to a loopback address")

// New validates cfg and returns a client. It fails for a malformed
// authority, plain HTTP to a non-loopback host (ErrPlainHTTP), an unreadable
// token file or CA bundle, and a bundle without certificates.
func New(cfg Config) (*Client, error) {
	u, err := ParseAuthority(cfg.Authority)
	if err != nil {
		return nil, fmt.Errorf("authority %q: %w", cfg.Authority, err)
	}
	if cfg.Environment == "" || cfg.InstallationID == "" {
		return nil, errors.New("site client needs the environment and the installation ID")
	}
	if _, err := readToken(cfg.TokenFile); err != nil {
		return nil, err
	}
	tlsCfg, err := cabundle.TLSConfig(cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("CA bundle %s: %w", cfg.CAFile, err)
	}
	transport := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tlsCfg,
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 0, // long polls; bounded per request by context
	}
	timeout := cfg.RequestTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	cfg.RuntimeVersion = siteprotocol.RuntimeVersionValue(cfg.RuntimeVersion)
	return &Client{base: u, cfg: cfg, http: &http.Client{Transport: transport}, timeout: timeout}, nil
}

// ParseAuthority parses a Site API base URL: an absolute https URL with a
// host and without user information, query or fragment, or plain http to
// a loopback address (ErrPlainHTTP otherwise;
// docs/site-protocol.md#authentication-and-authorisation). A trailing slash is dropped.
func ParseAuthority(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil || u.Hostname() == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("want an absolute https URL with a host and without credentials, query or fragment")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !Loopback(u.Hostname()) {
			return nil, ErrPlainHTTP
		}
	default:
		return nil, errors.New("want https (plain http only to a loopback address)")
	}
	return u, nil
}

// Loopback reports whether host is a loopback address (or "localhost").
func Loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func readToken(path string) (string, error) {
	if path == "" {
		return "", errors.New("no token file configured")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return tok, nil
}

func (c *Client) streamURL(suffix string, q url.Values) string {
	u := *c.base
	u.Path = c.base.Path + "/site/v1/streams/" + url.PathEscape(c.cfg.Environment) + suffix
	u.RawQuery = q.Encode()
	return u.String()
}

// StreamState reads the stream's state.
func (c *Client) StreamState(ctx context.Context) (siteprotocol.StreamState, error) {
	var st siteprotocol.StreamState
	err := c.do(ctx, http.MethodGet, c.streamURL("", nil), nil, nil, c.timeout, maxAnswerBytes, &st)
	return st, err
}

// maxAnswerBytes bounds every answer other than a pull's: a stream state,
// an acknowledgement or a problem.
const maxAnswerBytes = siteprotocol.MaxCommandBytes

// Pull returns the commands after sequence after (at most limit), waiting
// up to wait (rounded down to whole seconds) when none is ready. The first
// pull of an installation binds an unbound stream to it
// (docs/site-protocol.md#installation-fencing).
func (c *Client) Pull(ctx context.Context, after int64, limit int, wait time.Duration) (siteprotocol.Pull, error) {
	return c.pull(ctx, after, limit, wait, true)
}

// Peek is a read-only pull: the commands after sequence after (at most
// limit) with wait=0 and bind=false, so the server never binds an unbound
// stream to this installation; it still answers 409 installation-mismatch
// when the stream is bound to another installation. `runtime check` uses
// it.
func (c *Client) Peek(ctx context.Context, after int64, limit int) (siteprotocol.Pull, error) {
	return c.pull(ctx, after, limit, 0, false)
}

func (c *Client) pull(ctx context.Context, after int64, limit int, wait time.Duration, bind bool) (siteprotocol.Pull, error) {
	q := url.Values{}
	q.Set("after", strconv.FormatInt(after, 10))
	q.Set("limit", strconv.Itoa(limit))
	q.Set("wait", strconv.Itoa(int(wait/time.Second)))
	if !bind {
		q.Set("bind", "false")
	}
	var p siteprotocol.Pull
	header := http.Header{siteprotocol.RuntimeVersionHeader: {c.cfg.RuntimeVersion}}
	err := c.do(ctx, http.MethodGet, c.streamURL("/commands", q), header, nil, c.timeout+wait, siteprotocol.MaxPullAnswerBytes, &p)
	return p, err
}

// SendResult PUTs the exact result bytes of command sequence.
func (c *Client) SendResult(ctx context.Context, sequence int64, result []byte) (siteprotocol.Acknowledgement, error) {
	var a siteprotocol.Acknowledgement
	err := c.do(ctx, http.MethodPut, c.streamURL("/commands/"+strconv.FormatInt(sequence, 10)+"/result", nil), nil, result, c.timeout, maxAnswerBytes, &a)
	return a, err
}

// ReportStop POSTs the stop report r with the client's Runtime version
// (docs/site-protocol.md#the-stop-report), once: the caller decides
// whether to try again.
func (c *Client) ReportStop(ctx context.Context, r siteprotocol.StopReport) error {
	r.RuntimeVersion = c.cfg.RuntimeVersion
	body, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode the stop report: %w", err)
	}
	var recorded json.RawMessage
	return c.do(ctx, http.MethodPost, c.streamURL("/stop", nil), nil, body, c.timeout, maxAnswerBytes, &recorded)
}

// readAnswer reads resp's body up to limit bytes. A 200 answer announced
// or found longer wraps application.ErrOversizedAnswer and is never parsed;
// any other answer is only explained (a problem, a snippet), so its first
// limit bytes are kept. A body cut short (the connection dropped
// mid-answer) wraps application.ErrTransient.
func readAnswer(resp *http.Response, limit int64, what string) ([]byte, error) {
	ok := resp.StatusCode == http.StatusOK
	if ok && resp.ContentLength > limit {
		return nil, fmt.Errorf("%w: %s answered %d with %d bytes; the protocol bounds this answer at %d bytes",
			application.ErrOversizedAnswer, what, resp.StatusCode, resp.ContentLength, limit)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read answer to %s: %v", application.ErrTransient, what, err)
	}
	if int64(len(raw)) > limit {
		if ok {
			return nil, fmt.Errorf("%w: %s answered %d with more than %d bytes, the protocol's bound of this answer",
				application.ErrOversizedAnswer, what, resp.StatusCode, limit)
		}
		raw = raw[:limit]
	}
	return raw, nil
}

// do sends one request with the credential, the installation header and
// header's values, and decodes a 200 answer into out.
func (c *Client) do(ctx context.Context, method, target string, header http.Header, body []byte, timeout time.Duration, limit int64, out any) error {
	token, err := readToken(c.cfg.TokenFile)
	if err != nil {
		// The file may be mid-rotation: retry; a file that stays unusable
		// is a refused credential to liveness.
		return fmt.Errorf("%w: %w: %v", application.ErrTransient, application.ErrCredentialUnreadable, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for name, values := range header {
		for _, v := range values {
			req.Header.Add(name, v)
		}
	}
	req.Header.Set(siteprotocol.InstallationHeader, c.cfg.InstallationID)
	req.Header.Set("Accept", "application/json, application/problem+json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// One shape per failure: "<method> <path>: <cause>", without the
		// *url.Error's repetition of the method and the whole URL (whose
		// query changes with every pull).
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%w: %s %s: %v", application.ErrTransient, method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	raw, err := readAnswer(resp, limit, method+" "+req.URL.Path)
	if err != nil {
		return err
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		if err := json.Unmarshal(raw, out); err != nil {
			return &application.Problem{Status: resp.StatusCode, Reason: "malformed-answer", Detail: err.Error(), Request: method + " " + req.URL.Path}
		}
		return nil
	case resp.StatusCode >= 500, resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests:
		return fmt.Errorf("%w: %s %s: site api answered %d: %s", application.ErrTransient, method, req.URL.Path, resp.StatusCode, snippet(raw))
	}
	var prob struct {
		Reason string `json:"reason"`
		Detail string `json:"detail"`
		Title  string `json:"title"`
	}
	if err := json.Unmarshal(raw, &prob); err != nil || prob.Reason == "" {
		return &application.Problem{Status: resp.StatusCode, Reason: "malformed-answer", Detail: "an answer without a problem reason: " + snippet(raw), Request: method + " " + req.URL.Path}
	}
	if prob.Detail == "" {
		prob.Detail = prob.Title
	}
	return &application.Problem{Status: resp.StatusCode, Reason: prob.Reason, Detail: prob.Detail, Request: method + " " + req.URL.Path}
}

func snippet(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// Interface checks.
var (
	_ application.SiteControl = (*Client)(nil)
	_ application.SiteReader  = (*Client)(nil)
)

package main

import (
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// The client sends the token read from its file and verifies an https URL's certificate with the
// CA bundle it is given; it fails on a certificate it cannot verify and on a status other than
// 2xx.
func TestGetSendsTheTokenAndVerifiesTheCertificate(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret-token" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"gitVersion":"v1.33.4"}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	ca, token, empty := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "token"), filepath.Join(dir, "empty")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(token, []byte("secret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := get([]string{"-ca", ca, "-token", token, srv.URL + "/version"}); err != nil {
		t.Fatalf("get with the CA and the token: %v", err)
	}
	if err := get([]string{"-ca", ca, "-token", empty, srv.URL + "/version"}); err == nil {
		t.Fatal("a 401 was taken for success")
	}
	if err := get([]string{"-token", token, srv.URL + "/version"}); err == nil {
		t.Fatal("a certificate of an unknown CA was accepted")
	}
}

// /trickle answers its status and headers before any of its body, then its bytes one at a time:
// a client sees the headers and the first byte while the rest is still to come; a bad n or
// every is 400.
func TestTrickleAnswersTheHeadersAtOnceThenOneByteAtATime(t *testing.T) {
	srv := httptest.NewServer(handler("host", nil))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/trickle?n=3&every=1ms")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "ttt" {
		t.Fatalf("body %q (%v)", body, err)
	}
	// A long trickle: the headers and the first byte come long before its end.
	long, err := http.Get(srv.URL + "/trickle?n=86400&every=1ms")
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 1)
	if _, err := io.ReadFull(long.Body, first); err != nil || first[0] != 't' {
		t.Fatalf("the first byte of a long trickle: %q (%v)", first, err)
	}
	_ = long.Body.Close()
	for _, q := range []string{"n=x", "n=-1", "n=86401", "every=0s", "every=2m", "every=x"} {
		r, err := http.Get(srv.URL + "/trickle?" + q)
		if err != nil {
			t.Fatal(err)
		}
		_ = r.Body.Close()
		if r.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", q, r.StatusCode)
		}
	}
}

package main

import (
	"encoding/pem"
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

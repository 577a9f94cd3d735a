// Package executiontest helps tests run the execution role: it writes a
// keys.yaml and an environments.yaml with fresh keys (a service:execution
// key for Execution's routes, one static key per environment for its
// Runtime) and calls the API with problem-aware assertions.
package executiontest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/pharos-metallo/metallo/platform/auth"
)

// Environment is one entry to write into environments.yaml: with a static
// key unless TokenReview is set; Backend is left out when empty
// (kubernetes).
type Environment struct {
	ID, Site, Authority string
	Backend             string
	TokenReview         *TokenReview
}

// TokenReview authenticates an environment's Runtime by a TokenReview
// against the cluster of Kubeconfig.
type TokenReview struct {
	Kubeconfig, Username, Audience string
}

// Files are the written configuration files and the keys they admit.
type Files struct {
	KeysFile         string
	EnvironmentsFile string
	// ServiceKey is the key of service:execution (Execution's routes).
	ServiceKey string
	// EnvironmentKeys maps an environment ID to its Runtime's static key.
	EnvironmentKeys map[string]string
	// ExtraKeys maps each extra principal of WriteFiles to its key.
	ExtraKeys map[string]string
}

// NewKey returns a fresh key for principal and its keys-file entry.
func NewKey(tb testing.TB, principal string) (string, auth.KeyEntry) {
	tb.Helper()
	p, err := auth.ParsePrincipal(principal)
	if err != nil {
		tb.Fatal(err)
	}
	key, entry, err := auth.NewKey(p)
	if err != nil {
		tb.Fatal(err)
	}
	return key, entry
}

// WriteYAML writes v as YAML to path.
func WriteYAML(tb testing.TB, path string, v any) {
	tb.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// WriteFiles writes keys.yaml (service:execution plus extraPrincipals) and
// environments.yaml (each environment with a static key, or its
// TokenReview) into dir.
func WriteFiles(tb testing.TB, dir string, envs []Environment, extraPrincipals ...string) Files {
	tb.Helper()
	f := Files{
		KeysFile: filepath.Join(dir, "keys.yaml"), EnvironmentsFile: filepath.Join(dir, "environments.yaml"),
		EnvironmentKeys: map[string]string{}, ExtraKeys: map[string]string{},
	}
	var keys auth.KeysFile
	var entry auth.KeyEntry
	f.ServiceKey, entry = NewKey(tb, "service:execution")
	keys.Keys = append(keys.Keys, entry)
	for _, p := range extraPrincipals {
		key, e := NewKey(tb, p)
		f.ExtraKeys[p] = key
		keys.Keys = append(keys.Keys, e)
	}
	WriteYAML(tb, f.KeysFile, keys)
	var list []map[string]any
	for _, e := range envs {
		entry := map[string]any{"id": e.ID, "site": e.Site, "authority": e.Authority}
		if e.Backend != "" {
			entry["backend"] = e.Backend
		}
		if tr := e.TokenReview; tr != nil {
			entry["auth"] = map[string]any{"tokenreview": map[string]any{"kubeconfig": tr.Kubeconfig, "username": tr.Username, "audience": tr.Audience}}
		} else {
			key, k := NewKey(tb, "environment:"+e.ID)
			f.EnvironmentKeys[e.ID] = key
			entry["auth"] = map[string]any{"key_sha256": k.SHA256}
		}
		list = append(list, entry)
	}
	WriteYAML(tb, f.EnvironmentsFile, map[string]any{"environments": list})
	return f
}

// Reply is an HTTP answer.
type Reply struct {
	Status int
	Body   []byte
}

func (r Reply) String() string { return fmt.Sprintf("%d %s", r.Status, r.Body) }

// Reason returns the problem's reason member ("" when absent).
func (r Reply) Reason() string {
	var p struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(r.Body, &p)
	return p.Reason
}

// Client calls one server.
type Client struct {
	Base string
	HTTP *http.Client
}

// Call sends method path with the bearer key and, when not empty, the
// Metallo-Installation header; a non-nil body is sent as JSON. Transport
// errors fail the test.
func (c Client) Call(tb testing.TB, method, path, key, installation string, body []byte) Reply {
	tb.Helper()
	r, err := c.Try(method, path, key, installation, body)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// Try is Call returning transport errors (for use off the test goroutine).
func (c Client) Try(method, path, key, installation string, body []byte) (Reply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, bytes.NewReader(body))
	if err != nil {
		return Reply{}, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if installation != "" {
		req.Header.Set("Metallo-Installation", installation)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	client := c.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Reply{}, err
	}
	return Reply{Status: resp.StatusCode, Body: b}, nil
}

// Want fails the test unless r has status and (when not empty) reason.
func Want(tb testing.TB, r Reply, status int, reason string) {
	tb.Helper()
	if r.Status != status || (reason != "" && r.Reason() != reason) {
		tb.Fatalf("got %s, want status %d reason %q", r, status, reason)
	}
}

// Decode decodes r's body into T, failing the test otherwise.
func Decode[T any](tb testing.TB, r Reply) T {
	tb.Helper()
	var v T
	if err := json.Unmarshal(r.Body, &v); err != nil {
		tb.Fatalf("decode %s: %v", r, err)
	}
	return v
}

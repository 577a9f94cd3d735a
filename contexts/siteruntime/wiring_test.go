package siteruntime_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/standins/certauthority"
)

// An http: provider is verified against its CA flag's bundle: with
// --permissions-ca-file (--repository-grants-ca-file) the provider's
// requests reach it, without it none does and the provider is unavailable;
// a bundle that cannot be read or holds no certificate refuses start-up
// naming the CA flag. The server stands in for the provider (outside this
// project) and answers 503 to whatever reaches it: the adaptors' own tests
// hold the contract.
func TestAnHTTPProviderIsVerifiedAgainstItsCAFlag(t *testing.T) {
	var reached atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	defer srv.Close()
	ca := certauthority.ServerCAFile(t, srv)
	noPEM := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(noPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const bound = 300 * time.Millisecond
	providers := map[string]func(caFile string) (func() error, error){
		"permissions-ca-file": func(caFile string) (func() error, error) {
			p, err := siteruntime.NewPermissions(siteruntime.Config{Permissions: "http:" + srv.URL, PermissionsCAFile: caFile, PermissionsBound: bound}, clock.System{})
			if err != nil {
				return nil, err
			}
			return func() error {
				_, err := p.Check(context.Background(), domain.PermissionQuery{MemberID: "m", ProjectID: "p", Action: domain.ActionStart, RunID: "r", AttemptID: "a"})
				if !errors.Is(err, application.ErrPermissionUnavailable) {
					return err
				}
				return nil
			}, nil
		},
		"repository-grants-ca-file": func(caFile string) (func() error, error) {
			g, err := siteruntime.NewRepositoryGrants(siteruntime.Config{RepositoryGrants: "http:" + srv.URL, RepositoryGrantsCAFile: caFile, RepositoryGrantsBound: bound}, clock.System{})
			if err != nil {
				return nil, err
			}
			return func() error {
				err := g.Revoke(context.Background(), "g-1")
				if !errors.Is(err, application.ErrGrantUnavailable) {
					return err
				}
				return nil
			}, nil
		},
	}
	for flag, build := range providers {
		for _, bad := range []string{filepath.Join(t.TempDir(), "absent.pem"), noPEM} {
			if _, err := build(bad); err == nil || !strings.Contains(err.Error(), "--"+flag) {
				t.Errorf("--%s %s: want an error naming the flag, got %v", flag, bad, err)
			}
		}
		trusting, err := build(ca)
		if err != nil {
			t.Fatal(err)
		}
		before := reached.Load()
		if err := trusting(); err != nil {
			t.Fatalf("--%s: want unavailable (the provider answers 503), got %v", flag, err)
		}
		if reached.Load() == before {
			t.Fatalf("--%s: no request reached the provider through its CA bundle", flag)
		}
		system, err := build("")
		if err != nil {
			t.Fatal(err)
		}
		before = reached.Load()
		if err := system(); err != nil {
			t.Fatalf("--%s empty: want unavailable, got %v", flag, err)
		}
		if reached.Load() != before {
			t.Fatalf("--%s empty: a request reached a provider outside the system roots", flag)
		}
	}
}

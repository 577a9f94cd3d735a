package httpowners_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/httpowners"
	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
	"github.com/pharos-metallo/metallo/platform/httpserver"
)

// The happy path runs against the real provisioning role in
// app/execution_planning_test.go. The servers here stand in for a broken or
// misbehaving owner, which the real role cannot be made to be.

func serve(t *testing.T, status int, body string, check func(r *http.Request)) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if check != nil {
			check(r)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestTheOwnerIsAskedForTheProjectAtTheSiteWithTheServiceKey(t *testing.T) {
	url := serve(t, http.StatusOK, `{"allocations":[{"id":"a1","site":"alpha","project_id":"p","lifecycle":"changing","reasons":[],
	  "configured_limits":{"cpu":64000},"applied_limits":{"cpu":32000},"last_seen_at":"2026-08-20T10:30:00Z","fresh":true,"revision":3,"future_member":1}]}`,
		func(r *http.Request) {
			if r.URL.Path != "/base/resource-provisioning/projects/p/allocations" || r.URL.Query().Get("site") != "alpha" || r.Header.Get("Authorization") != "Bearer k" ||
				r.Header.Get(httpserver.RequestIDHeader) != "plan-7" {
				t.Errorf("request %s %s auth %q request ID %q", r.Method, r.URL, r.Header.Get("Authorization"), r.Header.Get(httpserver.RequestIDHeader))
			}
		})
	o, err := httpowners.New(url+"/base", "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The request ID of the plan that asks is passed on, so the owner's
	// log lines of it carry the same ID.
	got, err := o.ProjectAllocations(httpserver.WithRequestID(context.Background(), "plan-7"), "p", "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Lifecycle != domain.LifecycleChanging || got[0].AppliedLimits["cpu"] != 32000 || !got[0].Fresh || got[0].LastSeenAt.IsZero() {
		t.Fatalf("got %+v", got)
	}
}

func TestAnOwnerThatCannotAnswerIsUnavailableNeverEmpty(t *testing.T) {
	for name, url := range map[string]string{
		"unreachable":              "http://127.0.0.1:1",
		"a server error":           serve(t, http.StatusInternalServerError, `{"title":"boom"}`, nil),
		"a refused key":            serve(t, http.StatusUnauthorized, `{"reason":"unauthenticated"}`, nil),
		"not JSON":                 serve(t, http.StatusOK, `<html>`, nil),
		"no allocations member":    serve(t, http.StatusOK, `{}`, nil),
		"an allocation sans fresh": serve(t, http.StatusOK, `{"allocations":[{"id":"a","lifecycle":"ready"}]}`, nil),
	} {
		t.Run(name, func(t *testing.T) {
			o, err := httpowners.New(url, "k", nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := o.ProjectAllocations(context.Background(), "p", "alpha")
			if !errors.Is(err, application.ErrResourceLookupUnavailable) || got != nil {
				t.Fatalf("got %v, %v", got, err)
			}
		})
	}
}

func TestConfigurationIsChecked(t *testing.T) {
	if _, err := httpowners.New("provisioning:8080", "k", nil); err == nil {
		t.Fatal("a URL without scheme was accepted")
	}
	if _, err := httpowners.New("http://p:8080", "", nil); err == nil {
		t.Fatal("an empty key was accepted")
	}
}

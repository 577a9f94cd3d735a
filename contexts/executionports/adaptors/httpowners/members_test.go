package httpowners_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/httpowners"
	"github.com/pharos-metallo/metallo/contexts/executionports/application"
)

// The servers here stand in for a broken or misbehaving owner; the happy
// path against the real provisioning role is app/execution_members_test.go.

const readyAnswer = `{"accounts":[
 {"party_id":"m","project_id":"p","site":"alpha","environment":"alpha-k8s","binding_id":"b1","account":"member-m","generation":2,"revision":5,
  "state":"ready","reasons":[],"uid":"u1","allocation_id":"a1","namespace":"ns","observed_at":"2026-08-20T10:00:00Z","last_seen_at":"2026-08-20T10:00:01Z","fresh":true},
 {"party_id":"m","project_id":"p","site":"alpha","environment":"alpha-hpc","binding_id":"b2","account":"member-m","generation":1,"revision":1,
  "state":"pending","reasons":["account_missing"],"uid":"","fresh":false}]}`

func TestTheReadyAccountIsAskedOfTheMemberAtTheSite(t *testing.T) {
	url := serve(t, http.StatusOK, readyAnswer, func(r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/resource-provisioning/projects/p/accounts" || q.Get("site") != "alpha" || q.Get("party") != "m" || r.Header.Get("Authorization") != "Bearer k" {
			t.Errorf("request %s %s", r.Method, r.URL)
		}
	})
	o, err := httpowners.New(url, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := o.ReadyAccount(context.Background(), "m", "p", "alpha")
	if err != nil || a.UID != "u1" || a.BindingID != "b1" || a.Generation != 2 || a.Environment != "alpha-k8s" || a.Namespace != "ns" || !a.Fresh || a.LastSeenAt.IsZero() {
		t.Fatalf("%+v %v", a, err)
	}
	none := serve(t, http.StatusOK, `{"accounts":[]}`, nil)
	o, _ = httpowners.New(none, "k", nil)
	var nre *application.NoReadyAccountError
	if _, err := o.ReadyAccount(context.Background(), "m", "p", "alpha"); !errors.As(err, &nre) || nre.Reasons[0] != application.ReasonNoBinding {
		t.Fatalf("no binding: %v", err)
	}
}

func TestAMemberOwnerThatCannotAnswerIsUnavailableNeverEmpty(t *testing.T) {
	broken := map[string]string{
		"unreachable":     "http://127.0.0.1:1",
		"a server error":  serve(t, http.StatusInternalServerError, `{"title":"boom"}`, nil),
		"unavailable":     serve(t, http.StatusServiceUnavailable, `{"reason":"unavailable"}`, nil),
		"not JSON":        serve(t, http.StatusOK, `<html>`, nil),
		"an empty object": serve(t, http.StatusOK, `{}`, nil),
	}
	accounts := map[string]string{
		"an account sans fresh": serve(t, http.StatusOK, `{"accounts":[{"party_id":"m","project_id":"p","binding_id":"b","state":"pending"}]}`, nil),
		"another member's":      serve(t, http.StatusOK, strings.ReplaceAll(readyAnswer, `"party_id":"m"`, `"party_id":"x"`), nil),
		"ready without a UID":   serve(t, http.StatusOK, strings.Replace(readyAnswer, `"uid":"u1"`, `"uid":""`, 1), nil),
	}
	bindings := map[string]string{
		"an unknown environment":   serve(t, http.StatusNotFound, `{"reason":"unknown-environment"}`, nil),
		"another environment's":    serve(t, http.StatusOK, `{"environment":"beta-k8s","site":"beta","entries":[],"changes_cursor":"c"}`, nil),
		"a first page sans cursor": serve(t, http.StatusOK, `{"environment":"alpha-k8s","site":"alpha","entries":[]}`, nil),
		"a binding sans revision": serve(t, http.StatusOK, `{"environment":"alpha-k8s","site":"alpha","changes_cursor":"c","entries":[
		  {"project_id":"p","party_id":"m","binding":{"binding_id":"b","environment":"alpha-k8s","state":"ready","generation":1}}]}`, nil),
	}
	maps.Copy(accounts, broken)
	maps.Copy(bindings, broken)
	for name, url := range accounts {
		t.Run("account: "+name, func(t *testing.T) {
			o, err := httpowners.New(url, "k", nil)
			if err != nil {
				t.Fatal(err)
			}
			a, err := o.ReadyAccount(context.Background(), "m", "p", "alpha")
			if !errors.Is(err, application.ErrResourceLookupUnavailable) || errors.Is(err, application.ErrNoReadyAccount) || a != (application.MemberAccount{}) {
				t.Fatalf("account %+v, %v", a, err)
			}
		})
	}
	for name, url := range bindings {
		t.Run("bindings: "+name, func(t *testing.T) {
			o, err := httpowners.New(url, "k", nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := o.DesiredBindings(context.Background(), "alpha-k8s")
			if !errors.Is(err, application.ErrResourceLookupUnavailable) || got.Bindings != nil || got.Unbound != nil {
				t.Fatalf("bindings %+v, %v", got, err)
			}
		})
	}
}

func TestDesiredBindingsAreReadPageByPage(t *testing.T) {
	pages := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pages++
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/resource-provisioning/environments/alpha-k8s/bindings" || r.URL.Query().Get("limit") != "1000" {
			t.Errorf("request %s", r.URL)
		}
		switch r.URL.Query().Get("cursor") {
		case "":
			_, _ = w.Write([]byte(`{"environment":"alpha-k8s","site":"alpha","changes_cursor":"YzE6Nw","next_cursor":"n1","entries":[
			 {"project_id":"p","party_id":"m","reasons":[],"binding":{"binding_id":"b1","party_id":"m","project_id":"p","environment":"alpha-k8s",
			  "account":"member-m","generation":1,"revision":3,"state":"retired","reasons":["member_removed"],"account_uid":"","namespace":""}}]}`))
		case "n1":
			_, _ = w.Write([]byte(`{"environment":"alpha-k8s","site":"alpha","entries":[
			 {"project_id":"p","party_id":"n","reasons":["no_site_binding"]},
			 {"project_id":"q","party_id":"m","reasons":[],"binding":{"binding_id":"b2","party_id":"m","project_id":"q","environment":"alpha-k8s",
			  "account":"member-m","generation":2,"revision":4,"state":"ready","reasons":[],"account_uid":"u","namespace":"ns"}}]}`))
		default:
			t.Errorf("cursor %q", r.URL.Query().Get("cursor"))
		}
	}))
	t.Cleanup(srv.Close)
	o, err := httpowners.New(srv.URL, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := o.DesiredBindings(context.Background(), "alpha-k8s")
	if err != nil {
		t.Fatal(err)
	}
	if pages != 2 || d.Site != "alpha" || d.ChangesCursor != "YzE6Nw" || len(d.Bindings) != 2 || len(d.Unbound) != 1 {
		t.Fatalf("%d pages: %+v", pages, d)
	}
	if b := d.Bindings[0]; !b.Retired || b.Generation != 1 || b.Revision != 3 {
		t.Fatalf("retired binding %+v", b)
	}
	if b := d.Bindings[1]; b.Retired || b.AccountUID != "u" || b.Namespace != "ns" || b.Account != "member-m" {
		t.Fatalf("ready binding %+v", b)
	}
	if u := d.Unbound[0]; u.PartyID != "n" || u.Reasons[0] != "no_site_binding" {
		t.Fatalf("unbound %+v", u)
	}
}

package httpapi_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// TestInconsistenciesListAChangingAllocationWithBothLimitSetsAndNoReadyOne:
// GET /resource-provisioning/inconsistencies answers a changing allocation
// with its configured and applied limits, never a ready one; readers only,
// an issued cursor pages and another route's is 400
// (docs/resource-provisioning.md#the-inconsistencies-read).
func TestInconsistenciesListAChangingAllocationWithBothLimitSetsAndNoReadyOne(t *testing.T) {
	h := newHarness(t)
	bound := strings.Replace(event, `"provider_bindings":[]`, `"provider_bindings":[{"provider":"waldur","instance":"https://waldur.example.org","external_id":"pp"}]`, 1)
	if code, _, raw := h.send(t, "/events/beto", "beto", bound); code != 200 {
		t.Fatalf("event: %d %s", code, raw)
	}
	ready := report("ready") + `,"applied_limits":{"cpu":1000}`
	changing := strings.Replace(report("changing"), `{"cpu":1000}`, `{"cpu":2000,"memory":1024}`, 1) + `,"applied_limits":{"cpu":1000,"memory":512}`
	missing := report("missing")
	body := `{"reports":[{` + ready + `},{` + changing + `},{` + missing + `}]}`
	if code, _, raw := h.send(t, "/alpha/reports", "alpha", body); code != 200 {
		t.Fatalf("reports: %d %s", code, raw)
	}
	type entry struct {
		Kinds      []string
		Allocation struct {
			ProviderResourceID string           `json:"provider_resource_id"`
			Lifecycle          string           `json:"lifecycle"`
			ConfiguredLimits   map[string]int64 `json:"configured_limits"`
			AppliedLimits      map[string]int64 `json:"applied_limits"`
		}
	}
	type page struct {
		Allocations        []entry
		AmbiguousResources *[]json.RawMessage `json:"ambiguous_resources"`
		BindingConflicts   *[]json.RawMessage `json:"binding_conflicts"`
		NextCursor         string             `json:"next_cursor"`
	}
	read := func(query string) page {
		t.Helper()
		code, _, raw := h.send(t, "/inconsistencies"+query, "exec", "")
		if code != 200 {
			t.Fatalf("inconsistencies%s: %d %s", query, code, raw)
		}
		var p page
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	all := read("")
	if all.AmbiguousResources == nil || all.BindingConflicts == nil || all.NextCursor != "" {
		t.Fatalf("the first (and last) page: %+v", all)
	}
	byResource := map[string]entry{}
	for _, e := range all.Allocations {
		byResource[e.Allocation.ProviderResourceID] = e
	}
	if _, ok := byResource["ready"]; ok || len(byResource) != 2 {
		t.Fatalf("want changing and missing only, got %+v", all.Allocations)
	}
	c := byResource["changing"]
	if c.Allocation.Lifecycle != "changing" || strings.Join(c.Kinds, ",") != "limits_differ" ||
		c.Allocation.ConfiguredLimits["cpu"] != 2000 || c.Allocation.ConfiguredLimits["memory"] != 1024 ||
		c.Allocation.AppliedLimits["cpu"] != 1000 || c.Allocation.AppliedLimits["memory"] != 512 {
		t.Fatalf("the changing allocation: %+v", c)
	}
	if m := byResource["missing"]; strings.Join(m.Kinds, ",") != "limits_not_applied" || m.Allocation.AppliedLimits != nil {
		t.Fatalf("the allocation without applied limits: %+v", m)
	}

	first := read("?limit=1")
	if len(first.Allocations) != 1 || first.NextCursor == "" {
		t.Fatalf("page 1 of 1: %+v", first)
	}
	second := read("?limit=1&cursor=" + first.NextCursor)
	if len(second.Allocations) != 1 || second.NextCursor != "" || second.AmbiguousResources != nil || second.BindingConflicts != nil ||
		second.Allocations[0].Allocation.ProviderResourceID == first.Allocations[0].Allocation.ProviderResourceID {
		t.Fatalf("page 2 of 1: %+v after %+v", second, first)
	}
	snapshotCursor := base64.RawURLEncoding.EncodeToString([]byte("a1:6c3d1f0e-8f7b-5a55-9d43-0c2f3e1b9a77"))
	h.check(t, []bodyCase{
		{"the snapshot's cursor", "/inconsistencies?cursor=" + snapshotCursor, "exec", "", 400, "invalid-cursor", "query.cursor"},
		{"a garbled cursor", "/inconsistencies?cursor=%21%21", "exec", "", 400, "invalid-cursor", "query.cursor"},
		{"a limit beyond 1000", "/inconsistencies?limit=1001", "exec", "", 422, "validation-failed", ""},
		{"a Site key", "/inconsistencies", "alpha", "", 403, "forbidden", ""},
		{"an environment key", "/inconsistencies", "env", "", 403, "forbidden", ""},
		{"no key", "/inconsistencies", "nope", "", 401, "unauthenticated", ""},
	})
	h.brk()
	h.check(t, []bodyCase{{"a closed database", "/inconsistencies", "exec", "", 503, "unavailable", ""}})
}

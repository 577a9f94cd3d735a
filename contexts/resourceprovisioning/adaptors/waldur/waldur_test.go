package waldur_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/waldur"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

const gib = int64(1) << 30

// readAt is the observation time of the mapping tests.
var readAt = time.Date(2026, 8, 20, 10, 20, 0, 0, time.UTC)

// testdata/waldur-resources.json holds realistic Waldur resource records
// (values invented), one per lifecycle (docs/resource-provisioning.md#the-waldur-mapping).
func cases(t *testing.T) []waldur.Resource {
	t.Helper()
	raw, err := os.ReadFile("testdata/waldur-resources.json")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := waldur.ParseResources(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 5 {
		t.Fatalf("%d records", len(rs))
	}
	return rs
}

func TestEveryCaseRecordMapsToCanonicalUnitsAndTheDocumentedLifecycle(t *testing.T) {
	at := time.Date(2026, 8, 20, 10, 20, 0, 0, time.UTC)
	want := map[string]struct {
		configured, applied domain.Limits
		scope, lifecycle    string
		reasons             []string
	}{
		"alpha-gpu-ns": {
			configured: domain.Limits{"cpu": 32000, "memory": 128 * gib, "storage": 500 * gib, "gpu.nvidia": 2},
			applied:    domain.Limits{"cpu": 32000, "memory": 128 * gib, "storage": 500 * gib, "gpu.nvidia": 2},
			scope:      "waldur-alpha-gpu-ns", lifecycle: domain.LifecycleReady,
		},
		"beta-cpu-ns": {
			configured: domain.Limits{"cpu": 8000, "memory": 16 * gib, "storage": 100 * gib},
			lifecycle:  domain.LifecyclePending, reasons: []string{"provisioning", "limits_not_applied"},
		},
		"gamma-ns": {
			configured: domain.Limits{"cpu": 64000, "memory": 256 * gib, "storage": 1000 * gib, "gpu.nvidia": 4},
			applied:    domain.Limits{"cpu": 32000, "memory": 128 * gib, "storage": 1000 * gib, "gpu.nvidia": 4},
			scope:      "waldur-gamma-ns", lifecycle: domain.LifecycleChanging,
		},
		"delta-ns": {
			configured: domain.Limits{"cpu": 16000, "memory": 64 * gib, "storage": 200 * gib},
			applied:    domain.Limits{"cpu": 0, "memory": 0, "storage": 200 * gib},
			scope:      "waldur-delta-ns", lifecycle: domain.LifecycleSuspended,
		},
		"epsilon-ns": {
			configured: domain.Limits{"cpu": 4000, "memory": 8 * gib, "storage": 50 * gib},
			lifecycle:  domain.LifecycleRetired,
		},
	}
	for _, rec := range cases(t) {
		w, ok := want[rec.Name]
		if !ok {
			t.Fatalf("unexpected record %s", rec.Name)
		}
		r, err := waldur.Report(rec, waldur.Options{ObservedAt: at})
		if err != nil {
			t.Fatalf("%s: %v", rec.Name, err)
		}
		if r.ProviderResourceID != rec.UUID || r.OfferingID != rec.OfferingUUID || r.ProviderProjectID != rec.ProjectUUID || r.State != rec.State || !r.ObservedAt.Equal(at) {
			t.Errorf("%s: bindings %+v", rec.Name, r)
		}
		if !r.Limits.Equal(w.configured) || !r.AppliedLimits.Equal(w.applied) || r.NativeScope != w.scope {
			t.Errorf("%s: configured %v applied %v scope %q", rec.Name, r.Limits, r.AppliedLimits, r.NativeScope)
		}
		if p := r.Validate("r"); len(p) != 0 {
			t.Errorf("%s: mapped report invalid: %+v", rec.Name, p)
		}
		f := domain.Derive(r.Normalize(), "project")
		if f.Lifecycle != w.lifecycle || !slices.Equal(f.Reasons, append([]string{}, w.reasons...)) {
			t.Errorf("%s: lifecycle %s %v, want %s %v", rec.Name, f.Lifecycle, f.Reasons, w.lifecycle, w.reasons)
		}
	}
}

func TestOneRecordOrAnArrayParse(t *testing.T) {
	rs := cases(t)
	one, err := json.Marshal(map[string]any{"uuid": rs[0].UUID, "limits": map[string]any{"cpu": 1}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := waldur.ParseResources(one)
	if err != nil || len(got) != 1 || got[0].UUID != rs[0].UUID {
		t.Fatalf("%+v %v", got, err)
	}
}

func TestGPUVendorComesFromConfiguration(t *testing.T) {
	r, err := waldur.Report(cases(t)[0], waldur.Options{GPUVendor: "amd", ObservedAt: readAt})
	if err != nil || r.Limits["gpu.amd"] != 2 || r.AppliedLimits["gpu.amd"] != 2 {
		t.Fatalf("%+v %v", r, err)
	}
	if _, err := waldur.Report(cases(t)[0], waldur.Options{GPUVendor: "Not A Vendor", ObservedAt: readAt}); err == nil {
		t.Fatal("a vendor that makes no valid key was accepted")
	}
}

func TestFractionalCoresAndQuotaQuantitiesBecomeMillicoresAndBytes(t *testing.T) {
	raw := `{"uuid":"u","name":"n","offering_uuid":"o","project_uuid":"p","state":"OK","limits":{"cpu":0.5,"ram":1.5},
	  "backend_metadata":{"name":"ns","quota":{"cpu":"500m","memory":"1536Mi"}}}`
	rs, err := waldur.ParseResources([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	r, err := waldur.Report(rs[0], waldur.Options{ObservedAt: readAt})
	if err != nil {
		t.Fatal(err)
	}
	want := domain.Limits{"cpu": 500, "memory": 1536 << 20}
	if !r.Limits.Equal(want) || !r.AppliedLimits.Equal(want) {
		t.Fatalf("configured %v applied %v", r.Limits, r.AppliedLimits)
	}
}

func TestUnknownKeysAndInexactAmountsAreRefusedByName(t *testing.T) {
	for raw, want := range map[string]string{
		`{"uuid":"u","limits":{"cores":1}}`:                                    "unknown limit \"cores\"",
		`{"uuid":"u","limits":{"cpu":0.0001}}`:                                 "not a whole number",
		`{"uuid":"u","limits":{"storage":-1}}`:                                 "negative",
		`{"uuid":"u","limits":{},"backend_metadata":{"quota":{"pods":"10"}}}`:  "unknown quota \"pods\"",
		`{"uuid":"u","limits":{},"backend_metadata":{"quota":{"cpu":"lots"}}}`: "not a Kubernetes quantity",
	} {
		rs, err := waldur.ParseResources([]byte(strings.Replace(raw, `"uuid":"u"`, `"uuid":"u","offering_uuid":"o","project_uuid":"p","state":"OK"`, 1)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := waldur.Report(rs[0], waldur.Options{ObservedAt: readAt}); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "resource u") {
			t.Errorf("%s: %v, want an error naming the record and %q", raw, err, want)
		}
	}
}

// TestARecordWithoutIdentifiersOrStateFailsNamingTheMissingFields: `{}` or
// a record without uuid/state must never become an (empty) report.
func TestARecordWithoutIdentifiersOrStateFailsNamingTheMissingFields(t *testing.T) {
	for raw, want := range map[string]string{
		`{}`: "missing uuid, offering_uuid, project_uuid, state",
		`[{"uuid":"u","offering_uuid":"o","project_uuid":"p","state":"OK"},{"name":"n","offering_uuid":"o","project_uuid":"p"}]`: "record 2 of 2: resource  (n): missing uuid, state",
	} {
		rs, err := waldur.ParseResources([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		if reps, err := waldur.Reports(rs, waldur.Options{ObservedAt: readAt}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v %+v, want an error containing %q", raw, err, reps, want)
		}
	}
}

// TestAReportTheServerWouldRefuseFailsBeforePosting: the mapping applies
// the server's report rules, naming the record and the field.
func TestAReportTheServerWouldRefuseFailsBeforePosting(t *testing.T) {
	rec := `{"uuid":"u","name":"n","offering_uuid":"o","project_uuid":"p","state":"OK"}`
	for _, c := range []struct {
		raw  string
		at   time.Time
		want string
	}{
		{strings.Replace(rec, `"OK"`, `"Running"`, 1), readAt, `resource u (n): would be refused: report.state: unknown Waldur state "Running"`},
		{strings.Replace(rec, `"o"`, `"o\u0000"`, 1), readAt, "report.offering_id"},
		{rec, readAt.Add(time.Nanosecond), "report.observed_at: at most microsecond precision"},
		{rec, time.Time{}, "report.observed_at: required"},
	} {
		rs, err := waldur.ParseResources([]byte(c.raw))
		if err != nil {
			t.Fatal(err)
		}
		if rep, err := waldur.Reports(rs, waldur.Options{ObservedAt: c.at}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s at %s: %v %+v, want an error containing %q", c.raw, c.at, err, rep, c.want)
		}
	}
	rs, err := waldur.ParseResources([]byte(rec))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := waldur.Reports(rs, waldur.Options{ObservedAt: readAt.Add(time.Microsecond)}); err != nil {
		t.Fatalf("a microsecond observation time: %v", err)
	}
}

// TestQuotaQuantitiesThatDoNotFitExactlyAreRefusedByName: a quota quantity
// beyond int64 millicores, bytes or devices, or finer than one of them, is
// refused naming the record and the quota field (it was wrapped, clamped
// or zeroed silently); the largest exact values still map.
func TestQuotaQuantitiesThatDoNotFitExactlyAreRefusedByName(t *testing.T) {
	rec := `{"uuid":"u","name":"n","offering_uuid":"o","project_uuid":"p","state":"OK","limits":{},"backend_metadata":{"quota":QUOTA}}`
	for quota, field := range map[string]string{
		`{"cpu":"1e18"}`:                    `"cpu"`,
		`{"cpu":"9223372036854775807"}`:     `"cpu"`,
		`{"cpu":"0.5m"}`:                    `"cpu"`,
		`{"memory":"1e400"}`:                `"memory"`,
		`{"memory":"100Ei"}`:                `"memory"`,
		`{"memory":"0.5"}`:                  `"memory"`,
		`{"storage":"9223372036854775808"}`: `"storage"`,
		`{"gpu":"1e19"}`:                    `"gpu"`,
	} {
		rs, err := waldur.ParseResources([]byte(strings.Replace(rec, "QUOTA", quota, 1)))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := waldur.Report(rs[0], waldur.Options{ObservedAt: readAt})
		if err == nil || !strings.Contains(err.Error(), "resource u (n): backend_metadata.quota: "+field) || !strings.Contains(err.Error(), "fits 64 bits") {
			t.Errorf("%s: %v (applied %v), want a refusal naming the record and %s", quota, err, rep.AppliedLimits, field)
		}
	}
	rs, err := waldur.ParseResources([]byte(strings.Replace(rec, "QUOTA", `{"cpu":"9223372036854775807m","memory":"9223372036854775806","gpu":"8"}`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := waldur.Report(rs[0], waldur.Options{ObservedAt: readAt})
	if want := (domain.Limits{"cpu": 9223372036854775807, "memory": 9223372036854775806, "gpu.nvidia": 8}); err != nil || !rep.AppliedLimits.Equal(want) {
		t.Fatalf("the largest exact quantities: %v %v, want %v", err, rep.AppliedLimits, want)
	}
}

// TestALimitThatIsNotANumberNamesTheRecordAndField: "ram":"lots" used to
// fail decoding the whole file with the decoder's text.
func TestALimitThatIsNotANumberNamesTheRecordAndField(t *testing.T) {
	rs, err := waldur.ParseResources([]byte(`{"uuid":"u","name":"n","offering_uuid":"o","project_uuid":"p","state":"OK","limits":{"ram":"lots","cpu":"2"}}`))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if _, err := waldur.Report(rs[0], waldur.Options{ObservedAt: readAt}); err == nil || !strings.Contains(err.Error(), `resource u (n): limit "ram"`) || strings.Contains(err.Error(), "json:") {
		t.Fatalf("%v, want an error naming the record and limit ram", err)
	}
	rs[0].Limits = map[string]json.RawMessage{"cpu": json.RawMessage(`"2"`)}
	if rep, err := waldur.Report(rs[0], waldur.Options{ObservedAt: readAt}); err != nil || rep.Limits["cpu"] != 2000 {
		t.Fatalf("a number in a string: %v %v", err, rep.Limits)
	}
}

// TestEveryFailingRecordIsNamed: with several records that cannot be
// reported, the error counts them and names the first five.
func TestEveryFailingRecordIsNamed(t *testing.T) {
	var recs []string
	for i := range 8 {
		recs = append(recs, fmt.Sprintf(`{"name":"r%d","offering_uuid":"o","project_uuid":"p","state":"OK"}`, i))
	}
	recs = append(recs, `{"uuid":"u","name":"ok","offering_uuid":"o","project_uuid":"p","state":"OK"}`)
	rs, err := waldur.ParseResources([]byte("[" + strings.Join(recs, ",") + "]"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = waldur.Reports(rs, waldur.Options{ObservedAt: readAt})
	if err == nil || !strings.Contains(err.Error(), "8 of 9 records") {
		t.Fatalf("%v, want the count of failing records", err)
	}
	for i := range 5 {
		if !strings.Contains(err.Error(), fmt.Sprintf("record %d of 9: resource  (r%d): missing uuid", i+1, i)) {
			t.Errorf("record %d not named: %v", i+1, err)
		}
	}
	rs = rs[:2]
	if _, err := waldur.Reports(rs, waldur.Options{ObservedAt: readAt}); err == nil || !strings.Contains(err.Error(), "(r0)") || !strings.Contains(err.Error(), "(r1)") {
		t.Fatalf("%v, want both records named", err)
	}
}

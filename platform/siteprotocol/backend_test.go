package siteprotocol

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// docs/site-runtime.md#backends-and-families: Kubernetes runs every
// family, Slurm batch only, an unknown backend none.
func TestEachBackendRunsItsFamilies(t *testing.T) {
	for b, want := range map[Backend][]Family{
		BackendKubernetes: {FamilyBatch, FamilyApplication, FamilyInference},
		BackendSlurm:      {FamilyBatch},
		"nomad":           nil,
	} {
		if got := b.Families(); !slices.Equal(got, want) {
			t.Errorf("%s runs %v, want %v", b, got, want)
		}
		for _, f := range []Family{FamilyBatch, FamilyApplication, FamilyInference} {
			if b.Runs(f) != slices.Contains(want, f) {
				t.Errorf("%s.Runs(%s) = %v", b, f, b.Runs(f))
			}
		}
	}
}

// Appending a workload command of a family the environment's backend does
// not run is refused naming family; the same command is accepted where
// the backend runs it, and a batch command everywhere
// (docs/site-protocol.md#families-by-backend).
func TestAppendRefusesAFamilyTheEnvironmentsBackendDoesNotRun(t *testing.T) {
	app := []byte(appPrepare(goodApp))
	if _, _, err := ParseAppendFor(app, BackendKubernetes); err != nil {
		t.Fatalf("an application prepare at a kubernetes environment: %v", err)
	}
	_, _, err := ParseAppendFor(app, BackendSlurm)
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Field != "family" {
		t.Fatalf("an application prepare at a slurm environment: %v, want one error naming family", err)
	}
	if msg := ve.Fields[0].Message; !strings.Contains(msg, "slurm") || !strings.Contains(msg, "application") || !strings.Contains(msg, "runs batch") {
		t.Fatalf("message %q does not say what the backend runs", msg)
	}
	for _, op := range []string{"observe", "cancel", "cleanup"} {
		raw := strings.Replace(strings.Replace(string(app), `"operation": "prepare"`, `"operation": "`+op+`"`, 1),
			`"payload": {"workspace_size_bytes": 1073741824, "service_kind": "application", `+goodApp+`}`, `"payload": {}`, 1)
		if _, _, err := ParseAppendFor([]byte(raw), BackendSlurm); !errors.As(err, &ve) || ve.Fields[0].Field != "family" {
			t.Fatalf("an application %s at a slurm environment: %v, want an error naming family", op, err)
		}
	}
	for _, b := range []Backend{BackendKubernetes, BackendSlurm} {
		if _, _, err := ParseAppendFor([]byte(startCmd), b); err != nil {
			t.Fatalf("a batch start at a %s environment: %v", b, err)
		}
	}
}

// The stop report's reason is documented as an enum in the OpenAPI
// document from StopReport's tag: the tag lists exactly StopReasons.
func TestTheStopReportsReasonEnumIsTheStopVocabulary(t *testing.T) {
	f, ok := reflect.TypeFor[StopReport]().FieldByName("Reason")
	if !ok {
		t.Fatal("StopReport has no Reason")
	}
	var want []string
	for _, r := range StopReasons() {
		want = append(want, string(r))
	}
	if got := strings.Split(f.Tag.Get("enum"), ","); !slices.Equal(got, want) {
		t.Fatalf("enum tag %v, want StopReasons %v", got, want)
	}
	if !StopBackendMismatch.Known() {
		t.Fatal("backend-mismatch is not a stop reason")
	}
}

package executionports_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Each environment's backend, on the wire (docs/site-protocol.md#families-by-backend):
// the stream state carries it, and an append of a workload command whose
// family the backend does not run — an application Attempt at a slurm
// environment, which runs batch only — is 422 invalid-command naming
// family, storing nothing; the same command is accepted at a kubernetes
// environment, and a batch command at both.
func TestTheStreamStateCarriesTheBackendAndAppendRefusesAFamilyItDoesNotRun(t *testing.T) {
	s := startServer(t, options{environments: []executiontest.Environment{
		{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org"},
		{ID: "alpha-hpc", Site: "alpha", Authority: "https://metallo.example.org", Backend: "slurm"},
	}})
	const installation = "inst-1"
	for env, want := range map[string]siteprotocol.Backend{"alpha-k8s": siteprotocol.BackendKubernetes, "alpha-hpc": siteprotocol.BackendSlurm} {
		r := s.Call(t, http.MethodGet, "/site/v1/streams/"+env, s.files.EnvironmentKeys[env], installation, nil)
		executiontest.Want(t, r, http.StatusOK, "")
		if st := executiontest.Decode[siteprotocol.StreamState](t, r); st.Backend != want || st.Environment != env {
			t.Fatalf("%s's state %s, want backend %s", env, r, want)
		}
	}

	app := command("3e8d2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e", "application", "prepare", `{"workspace_size_bytes": 1073741824, "service_kind": "application", "image": "registry.example.org/lab/app@sha256:`+
		strings.Repeat("0", 64)+`", "port": 8080, "readiness": {"path": "/healthz", "initial_delay_seconds": 0, "period_seconds": 5}, "demand": {"cpu": 500, "memory": 536870912}}`)
	r := s.Call(t, http.MethodPost, "/execution/v1/streams/alpha-hpc/commands", s.serviceKey, "", app)
	executiontest.Want(t, r, http.StatusUnprocessableEntity, siteprotocol.ProblemInvalidCommand)
	var p struct {
		Errors []struct {
			Location string `json:"location"`
			Message  string `json:"message"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(r.Body, &p); err != nil || len(p.Errors) != 1 || p.Errors[0].Location != "body.family" || !strings.Contains(p.Errors[0].Message, "runs batch") {
		t.Fatalf("the refusal does not name family alone: %s", r)
	}
	st := executiontest.Decode[siteprotocol.StreamState](t, s.Call(t, http.MethodGet, "/site/v1/streams/alpha-hpc", s.files.EnvironmentKeys["alpha-hpc"], installation, nil))
	if st.HeadSequence != 0 {
		t.Fatalf("the refused append stored a command: head %d", st.HeadSequence)
	}
	executiontest.Want(t, s.Call(t, http.MethodPost, "/execution/v1/streams/alpha-k8s/commands", s.serviceKey, "", app), http.StatusCreated, "")

	for env, id := range map[string]string{"alpha-hpc": "4f9e3c21-6a7b-4d8c-8e9f-2a3b4c5d6e7f", "alpha-k8s": "5a0f4d32-7b8c-4e9d-9f0a-3b4c5d6e7f80"} {
		batch := command(id, "batch", "start", `{"demand": {"cpu": 1000, "memory": 1073741824}, "time_limit_seconds": 600, "argv": ["python", "train.py"]}`)
		executiontest.Want(t, s.Call(t, http.MethodPost, "/execution/v1/streams/"+env+"/commands", s.serviceKey, "", batch), http.StatusCreated, "")
	}
}

// command is the workload command id of family with operation and payload.
func command(id, family, operation, payload string) []byte {
	return []byte(`{"id": "` + id + `", "operation": "` + operation + `", "issued_at": "2026-11-29T10:00:00.123Z",
  "run_id": "5b0e2f9c-3a51-4f0e-9d7a-2f7c8e1b6a10", "attempt_id": "7d1f0c2a-6c4e-4b8f-a2d1-0e9f3b5c7a24",
  "member_id": "9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80", "project_id": "0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9",
  "account_ref": {"binding_id": "e41f0000-0000-4000-8000-000000000001", "generation": 1}, "family": "` + family + `",
  "payload": ` + payload + `}`)
}

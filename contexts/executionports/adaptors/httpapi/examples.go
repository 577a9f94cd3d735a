package httpapi

import (
	"encoding/json"
	"fmt"

	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// The documented examples of every operation here: one story on the
// stream of environment alpha-k8s (Site alpha) — the member binding of
// Party 9c2e4a61-… in Project 0a1b2c3d-… delivered, an inference Attempt
// (the Hugging Face fixture of the Runtime's cases) and a batch Attempt
// prepared and started, the Runtime pulling and answering — and a plan
// against the allocation alpha-gpu-ns (32 cores, 128 GiB, 2 GPUs). The
// digests are computed here with the codec, so every example is exactly
// what a client sends and the server answers; app's consistency test posts
// them in order to a fresh server on both engines
// (docs/testing.md#the-documents-examples).

// Example identities, shared with resource_provisioning's examples.
const (
	exampleEnvironment  = "alpha-k8s"
	exampleSite         = "alpha"
	exampleAuthority    = "https://metallo.example.org"
	exampleInstallation = "alpha-k8s-runtime-1"
	exampleReinstalled  = "alpha-k8s-runtime-2"
	// exampleRuntimeVersion is the Runtime's Metallo-Runtime-Version.
	exampleRuntimeVersion = "v1.4.0"
	exampleParty          = "9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80"
	exampleProject        = "0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9"
	// exampleBinding is the member binding's ID as resource_provisioning
	// derives it from (Party, Project, environment).
	exampleBinding    = "e6cc5fcd-e6be-5742-82db-4fa71c05bc99"
	exampleAccountUID = "3b0c6a52-6f1d-4c1e-9f0a-2d7e5b8c9a41"
	exampleNamespace  = "project-0a1b2c3d"
	exampleRun        = "5b0e2f9c-3a51-4f0e-9d7a-2f7c8e1b6a10"
	exampleAttempt    = "7d1f0c2a-6c4e-4b8f-a2d1-0e9f3b5c7a24"
	exampleBatchRun   = "2c4e6a80-1b3d-4f5a-8c7e-9d0f1a2b3c4d"
	exampleBatchTry   = "4d6f8a0c-2e4a-4b6c-9d8e-0f1a2b3c4d5e"
	exampleAppRun     = "8e0a2c4e-6f8a-4c1d-9e2f-3a4b5c6d7e8f"
	exampleAppTry     = "9f1b3d5f-7a9b-4d2e-8f3a-4b5c6d7e8f90"
	// exampleAllocation is alpha-gpu-ns's allocation ID at Site alpha.
	exampleAllocation = "71f90584-ba9d-5826-b19e-afc714956c92"
)

// exampleCommand is one appended command of the story.
type exampleCommand struct {
	name, summary string
	command       map[string]any
}

func exampleCommands() []exampleCommand {
	ref := map[string]any{"binding_id": exampleBinding, "generation": 1}
	return []exampleCommand{
		{"bind-member", "Deliver the member binding (revision 2, its account's UID)", map[string]any{
			"id": "c8d3a1f2-5e7b-5c9d-8a4f-1b2c3d4e5f60", "operation": "bind-member", "issued_at": "2026-08-20T10:30:00Z",
			"member_id": exampleParty, "project_id": exampleProject,
			"payload": map[string]any{
				"party_id": exampleParty, "namespace": exampleNamespace, "account": siteprotocol.MemberAccount(exampleParty),
				"binding_id": exampleBinding, "revision": 2, "generation": 1, "account_uid": exampleAccountUID,
			},
		}},
		{"prepare", "Prepare an inference Attempt: the Hugging Face model, 10 GiB workspace", map[string]any{
			"id": "1f4b6c8d-2a3e-4f50-8b61-7c9d0e1f2a3b", "operation": "prepare", "issued_at": "2026-08-20T10:31:00Z",
			"run_id": exampleRun, "attempt_id": exampleAttempt, "member_id": exampleParty, "project_id": exampleProject,
			"account_ref": ref, "family": "inference",
			"payload": map[string]any{
				"workspace_size_bytes": int64(10) << 30, "service_kind": "inference",
				"model": map[string]any{"format": "huggingface", "runtime": "kserve-huggingfaceserver", "args": []string{
					"--model_id=hf-internal-testing/tiny-random-BertForSequenceClassification",
					"--model_revision=4d5a3af95422fc0ebf732796c685c586b6d7420b",
					"--task=sequence_classification",
				}},
				"port": 8080, "readiness": map[string]any{"path": "/v2/health/ready", "initial_delay_seconds": 5, "period_seconds": 10},
				"demand": map[string]any{"cpu": 1000, "memory": int64(2) << 30},
			},
		}},
		{"start", "Start the prepared inference Attempt (a service starts what prepare saved: empty payload)", map[string]any{
			"id": "3e8d2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e", "operation": "start", "issued_at": "2026-08-20T10:32:00Z",
			"run_id": exampleRun, "attempt_id": exampleAttempt, "member_id": exampleParty, "project_id": exampleProject,
			"account_ref": ref, "family": "inference", "payload": map[string]any{},
		}},
		{"prepare-batch", "Prepare a batch Attempt: a repository at an exact commit with LFS, 1 GiB workspace", map[string]any{
			"id": "5a7c9e1b-3d5f-4a6b-8c9d-0e1f2a3b4c5d", "operation": "prepare", "issued_at": "2026-08-20T10:33:00Z",
			"run_id": exampleBatchRun, "attempt_id": exampleBatchTry, "member_id": exampleParty, "project_id": exampleProject,
			"account_ref": ref, "family": "batch",
			"payload": map[string]any{
				"repository":           map[string]any{"url": "https://git.example.org/lab/model.git", "commit": "0123456789abcdef0123456789abcdef01234567", "lfs": true},
				"workspace_size_bytes": int64(1) << 30,
			},
		}},
		{"start-batch", "Start the batch Attempt: 2 cores, 4 GiB, 1 GPU, at most one hour", map[string]any{
			"id": "6b8d0f2c-4e6a-4b7c-9d0e-1f2a3b4c5d6e", "operation": "start", "issued_at": "2026-08-20T10:34:00Z",
			"run_id": exampleBatchRun, "attempt_id": exampleBatchTry, "member_id": exampleParty, "project_id": exampleProject,
			"account_ref": ref, "family": "batch",
			"payload": map[string]any{
				"demand":             map[string]any{"cpu": 2000, "memory": int64(4) << 30, "gpu.nvidia": 1},
				"time_limit_seconds": 3600, "argv": []string{"python", "train.py", "--epochs", "3"},
				"env": map[string]string{"HF_HUB_OFFLINE": "1"},
			},
		}},
		{"prepare-application", "Prepare an application service: an image pinned by digest on port 8080, its readiness probe, half a core and 512 MiB", map[string]any{
			"id": "7c9e1a3b-5d7f-4e8a-9b0c-1d2e3f4a5b6c", "operation": "prepare", "issued_at": "2026-08-20T10:35:00Z",
			"run_id": exampleAppRun, "attempt_id": exampleAppTry, "member_id": exampleParty, "project_id": exampleProject,
			"account_ref": ref, "family": "application",
			"payload": map[string]any{
				"workspace_size_bytes": int64(1) << 30, "service_kind": "application",
				"image":     "registry.example.org/lab/notebook@sha256:9b2c3d4e5f60718293a4b5c6d7e8f90112233445566778899aabbccddeeff001",
				"port":      8080,
				"readiness": map[string]any{"path": "/healthz", "initial_delay_seconds": 2, "period_seconds": 5},
				"demand":    map[string]any{"cpu": 500, "memory": int64(512) << 20},
			},
		}},
	}
}

// storedCommand is an example command as the server stores and serves it:
// its JCS form with its sequence and digest, decoded for the document.
type storedCommand struct {
	command siteprotocol.Command
	served  map[string]any
}

// exampleStored returns the story's commands as stored at sequences 1, 2, …
// It panics on an example the codec refuses: the examples are constants
// of this file, and the test of the document fails first.
func exampleStored() []storedCommand {
	var out []storedCommand
	for i, c := range exampleCommands() {
		raw, err := json.Marshal(c.command)
		if err != nil {
			panic(fmt.Sprintf("example %s: %v", c.name, err))
		}
		cmd, canonical, err := siteprotocol.ParseAppend(raw)
		if err != nil {
			panic(fmt.Sprintf("example %s: %v", c.name, err))
		}
		served, err := siteprotocol.EncodeStored(canonical, int64(i+1), cmd.Digest)
		if err != nil {
			panic(fmt.Sprintf("example %s: %v", c.name, err))
		}
		cmd.Sequence = int64(i + 1)
		out = append(out, storedCommand{command: cmd, served: decodeExample(served)})
	}
	return out
}

func decodeExample(b []byte) map[string]any {
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		panic(fmt.Sprintf("example: %v", err))
	}
	return v
}

// exampleResult is a result of the story with its digest.
type exampleResult struct {
	name, summary string
	result        siteprotocol.Result
	body          map[string]any
}

func exampleResults() []exampleResult {
	stored := exampleStored()
	mk := func(name, summary string, c siteprotocol.Command, reason siteprotocol.Reason, message string, detail any, refs []siteprotocol.NativeRef) exampleResult {
		outcome, _ := reason.Outcome()
		r, b, err := siteprotocol.NewResult(c, outcome, reason, message, detail, refs)
		if err != nil {
			panic(fmt.Sprintf("example %s: %v", name, err))
		}
		return exampleResult{name: name, summary: summary, result: r, body: decodeExample(b)}
	}
	return []exampleResult{
		mk("bind-member-applied", "bind-member applied: the binding's revision 2 is in the journal", stored[0].command, siteprotocol.ReasonApplied,
			"member binding applied", siteprotocol.BindingDetail{AppliedRevision: 2}, nil),
		mk("prepare-prepared", "prepare done: the workspace claim and the saved specification's digest", stored[1].command, siteprotocol.ReasonPrepared,
			"workspace ready", siteprotocol.PrepareDetail{
				Workspace:  siteprotocol.WorkspaceRef{ClaimName: "workspace-" + exampleAttempt, UID: "8f0e2d4c-6b8a-4c0e-9f1a-3b5d7f9a1c3e"},
				SpecDigest: "9d1c6a4e2b8f0d3a5c7e9b1d3f5a7c9e1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f1a",
			}, []siteprotocol.NativeRef{{Kind: "PersistentVolumeClaim", Namespace: exampleNamespace, Name: "workspace-" + exampleAttempt, UID: "8f0e2d4c-6b8a-4c0e-9f1a-3b5d7f9a1c3e"}}),
	}
}

// siteHeaders are the example's parameters of a Site route.
func siteParams(extra map[string]any) map[string]any {
	p := map[string]any{"environment": exampleEnvironment, siteprotocol.InstallationHeader: exampleInstallation}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

func appendExamples() []httpserver.Example {
	var out []httpserver.Example
	for i, s := range exampleStored() {
		c := exampleCommands()[i]
		out = append(out, httpserver.Example{
			Name: c.name, Summary: c.summary, Params: map[string]any{"environment": exampleEnvironment},
			Request: c.command, Status: 201,
			Response: siteprotocol.AppendReceipt{ID: s.command.ID, Sequence: s.command.Sequence, Digest: s.command.Digest, Created: true},
		})
	}
	return out
}

func pullExamples() []httpserver.Example {
	var cmds []any
	for _, s := range exampleStored() {
		cmds = append(cmds, s.served)
	}
	return []httpserver.Example{{
		Name: "first-pull", Summary: "The Runtime's first pull binds the stream and answers every command",
		Params:   siteParams(map[string]any{"after": 0, "limit": 100, "wait": 0, siteprotocol.RuntimeVersionHeader: exampleRuntimeVersion}),
		Status:   200,
		Response: map[string]any{"commands": cmds, "head_sequence": len(cmds), "acknowledged_sequence": 0},
	}}
}

func resultExamples() []httpserver.Example {
	var out []httpserver.Example
	for _, r := range exampleResults() {
		out = append(out, httpserver.Example{
			Name: r.name, Summary: r.summary, Params: siteParams(map[string]any{"sequence": r.result.Sequence}),
			Request: r.body, Status: 200,
			Response: siteprotocol.Acknowledgement{AcknowledgedSequence: r.result.Sequence, ResultDigest: r.result.Digest},
		})
	}
	return out
}

func streamStateExamples() []httpserver.Example {
	return []httpserver.Example{{
		Name: "bound", Summary: "The stream bound to the installation, two results acknowledged",
		Params: siteParams(nil), Status: 200,
		Response: siteprotocol.StreamState{Environment: exampleEnvironment, Site: exampleSite, Authority: exampleAuthority, Backend: siteprotocol.BackendKubernetes,
			AcknowledgedSequence: 2, HeadSequence: int64(len(exampleCommands())), InstallationID: exampleInstallation},
	}}
}

func commandExamples() []httpserver.Example {
	s, r := exampleStored()[1], exampleResults()[1]
	return []httpserver.Example{{
		Name: "prepare-acknowledged", Summary: "The prepare command as stored and its recorded result",
		Params: map[string]any{"environment": exampleEnvironment, "id": s.command.ID}, Status: 200,
		Response: map[string]any{"command": s.served, "result": r.body, "acknowledged_at": "2026-08-20T10:31:04.518Z"},
	}}
}

func rebindExamples() []httpserver.Example {
	return []httpserver.Example{{
		Name: "reinstalled", Summary: "An operator binds the stream to the reinstalled Runtime",
		Params:  map[string]any{"environment": exampleEnvironment},
		Request: map[string]any{"installation_id": exampleReinstalled, "reason": "runtime reinstalled after the node's disk was replaced (ticket OPS-4711)"},
		Status:  200,
		Response: map[string]any{
			"stream": siteprotocol.StreamState{Environment: exampleEnvironment, Site: exampleSite, Authority: exampleAuthority, Backend: siteprotocol.BackendKubernetes,
				AcknowledgedSequence: 2, HeadSequence: int64(len(exampleCommands())), InstallationID: exampleReinstalled},
			"binding": BindingBody{Action: "rebound", InstallationID: exampleReinstalled, PreviousInstallationID: exampleInstallation,
				Principal: "service:" + DefaultService, Reason: "runtime reinstalled after the node's disk was replaced (ticket OPS-4711)", RecordedAt: "2026-08-20T11:02:17.331Z"},
		},
	}}
}

func planExamples() []httpserver.Example {
	limits := map[string]int64{"cpu": 32000, "memory": 128 << 30, "storage": 500 << 30, "gpu.nvidia": 2}
	return []httpserver.Example{{
		Name: "admissible", Summary: "32 cores, 128 GiB and 2 GPUs fit alpha-gpu-ns",
		Request: PlanRequest{Project: exampleProject, Environment: exampleEnvironment, Demand: map[string]int64{"cpu": 32000, "memory": 128 << 30, "gpu.nvidia": 2}},
		Status:  200,
		Response: PlanBody{Answer: "admissible", Project: exampleProject, Environment: exampleEnvironment, Site: exampleSite,
			AllocationID: exampleAllocation, Limits: limits},
	}, {
		Name: "too-large", Summary: "33 cores do not fit 32 (cpu is compared in whole cores)",
		Request: PlanRequest{Project: exampleProject, Environment: exampleEnvironment, Demand: map[string]int64{"cpu": 32001, "memory": 64 << 30}},
		Status:  200,
		Response: PlanBody{Answer: "refused", Reason: "too_large", Project: exampleProject, Environment: exampleEnvironment, Site: exampleSite,
			AllocationID: exampleAllocation, Limits: limits, TooLarge: []Excess{{
				Resource: "cpu", Unit: "cores", Demand: 33, Limit: 32, CanonicalUnit: "millicores", CanonicalDemand: 32001, CanonicalLimit: 32000,
			}}},
	}}
}

func deliveriesExamples() []httpserver.Example {
	return []httpserver.Example{{
		Name: "ready-binding", Summary: "The member binding, ready at its owner; its first delivery not planned yet",
		Params: map[string]any{"environment": exampleEnvironment}, Status: 200,
		Response: DeliveriesBody{Environment: exampleEnvironment, Bindings: []DeliveryBody{{
			BindingID: exampleBinding, PartyID: exampleParty, ProjectID: exampleProject, DesiredRevision: 2, DesiredState: "ready",
		}}},
	}}
}

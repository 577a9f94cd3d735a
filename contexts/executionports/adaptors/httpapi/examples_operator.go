package httpapi

import (
	"encoding/json"
	"fmt"

	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// The stop report's and the operator's reads' examples, on the same story
// (examples.go): the Runtime stops on a damaged journal after two results,
// and an operator reads the environment, the batch Attempt's commands and
// the binding history after the rebind.

// exampleStop is the stop report of the story.
func exampleStop() siteprotocol.StopReport {
	return siteprotocol.StopReport{
		Reason: siteprotocol.StopJournalIntegrity, Sequence: 3, RuntimeVersion: exampleRuntimeVersion,
		Message: "runtime worker stopped (journal-integrity): delivery.sqlite: pending (sequence 3): the saved command fails its checksum",
	}
}

func stopExamples() []httpserver.Example {
	s := exampleStop()
	return []httpserver.Example{{
		Name: "journal-integrity", Summary: "The Runtime stopped on a damaged journal at command 3",
		Params: siteParams(nil), Request: s, Status: 200,
		Response: RuntimeStopBody{Reason: string(s.Reason), Sequence: s.Sequence, RuntimeVersion: s.RuntimeVersion,
			InstallationID: exampleInstallation, Message: s.Message, StoppedAt: "2026-08-20T10:40:12.071Z"},
	}}
}

func environmentsExamples() []httpserver.Example {
	s := exampleStop()
	version := exampleRuntimeVersion
	return []httpserver.Example{{
		Name: "stopped", Summary: "alpha-k8s: rebound after its Runtime stopped, the new installation not pulling yet",
		Status: 200,
		Response: map[string]any{"environments": []EnvironmentBody{{
			Environment: exampleEnvironment, Site: exampleSite, Backend: "kubernetes",
			HeadSequence: int64(len(exampleCommands())), AcknowledgedSequence: 2, Lag: int64(len(exampleCommands())) - 2,
			InstallationID: exampleReinstalled, BoundAt: "2026-08-20T11:02:17.331Z", RuntimeVersion: &version, LastPullAt: "2026-08-20T10:39:58.204Z",
			Stop: &RuntimeStopBody{Reason: string(s.Reason), Sequence: s.Sequence, RuntimeVersion: s.RuntimeVersion,
				InstallationID: exampleInstallation, Message: s.Message, StoppedAt: "2026-08-20T10:40:12.071Z"},
		}}},
	}}
}

func commandsExamples() []httpserver.Example {
	var cmds []CommandSummaryBody
	for _, s := range exampleStored()[3:5] {
		raw, err := json.Marshal(s.served)
		if err != nil {
			panic(fmt.Sprintf("example: %v", err))
		}
		view, err := siteprotocol.OperatorView(raw)
		if err != nil {
			panic(fmt.Sprintf("example: %v", err))
		}
		c := s.command
		cmds = append(cmds, CommandSummaryBody{
			Sequence: c.Sequence, ID: c.ID, Operation: string(c.Operation), Family: string(c.Family), RunID: c.RunID, AttemptID: c.AttemptID,
			MemberID: c.MemberID, ProjectID: c.ProjectID, Digest: c.Digest, AppendedAt: "2026-08-20T10:33:00.114Z", Command: view,
		})
	}
	return []httpserver.Example{{
		Name: "batch-attempt", Summary: "The batch Attempt's commands, not acknowledged yet (env values as sizes and digests)",
		Params:   map[string]any{"environment": exampleEnvironment, "attempt": exampleBatchTry},
		Status:   200,
		Response: map[string]any{"environment": exampleEnvironment, "commands": cmds, "newer": int64(len(exampleCommands()))},
	}}
}

func bindingHistoryExamples() []httpserver.Example {
	return []httpserver.Example{{
		Name: "rebound", Summary: "The first pull's binding and the operator's rebind",
		Params: map[string]any{"environment": exampleEnvironment}, Status: 200,
		Response: map[string]any{"environment": exampleEnvironment, "bindings": []BindingBody{
			{Action: "bound", InstallationID: exampleInstallation, Principal: "environment:" + exampleEnvironment,
				Reason: "first use by an unbound stream's Runtime", RecordedAt: "2026-08-20T10:30:02.118Z"},
			{Action: "rebound", InstallationID: exampleReinstalled, PreviousInstallationID: exampleInstallation, Principal: "service:" + DefaultService,
				Reason: "runtime reinstalled after the node's disk was replaced (ticket OPS-4711)", RecordedAt: "2026-08-20T11:02:17.331Z"},
		}},
	}}
}

package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// EffectsEnv names the effects file of the stand-in native system.
const EffectsEnv = "METALLO_TEST_EFFECTS_FILE"

// Effect is one line of the effects file: one native effect.
type Effect struct {
	CommandID  string `json:"command_id"`
	AttemptID  string `json:"attempt_id"`
	UID        string `json:"uid"`
	SpecDigest string `json:"spec_digest"`
}

// EffectExecutor stands in for a native system in the system tests and the
// benchmark (see testbin's doc comment): Execute appends an effect to the
// effects file unconditionally; Recover looks in jobs.sqlite and the file
// before acting. An empty file path makes it a no-op executor that records
// nothing (the benchmark's).
type EffectExecutor struct {
	path    string
	records application.BatchRecords
	fp      application.Failpoints
}

// NewEffectExecutor returns the stand-in writing to path.
func NewEffectExecutor(path string, records application.BatchRecords, fp application.Failpoints) *EffectExecutor {
	return &EffectExecutor{path: path, records: records, fp: fp}
}

// Registrations routes start commands of the batch family here, replacing
// a native executor.
func (e *EffectExecutor) Registrations() []application.Registration {
	return []application.Registration{{Operation: siteprotocol.OpStart, Family: siteprotocol.FamilyBatch, Executor: e, Override: true}}
}

// SpecDigest is the specification digest of a start command: SHA-256 of
// its payload.
func SpecDigest(cmd siteprotocol.Command) string { return siteprotocol.Digest(cmd.Payload) }

// Answer is the result the stand-in gives a start command whose Job has
// uid; tests rebuild it to compare bytes.
func Answer(cmd siteprotocol.Command, uid string) domain.Answer {
	ref := siteprotocol.NativeRef{Kind: "Job", Namespace: "project-" + cmd.ProjectID, Name: "attempt-" + cmd.AttemptID, UID: uid}
	return domain.Succeeded(siteprotocol.ReasonCreated, "Job created as "+siteprotocol.MemberAccount(cmd.MemberID),
		siteprotocol.StateDetail{State: siteprotocol.StateQueued}, ref)
}

// Execute performs the effect unconditionally.
func (e *EffectExecutor) Execute(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error) {
	if e.path == "" {
		return Answer(cmd, cmd.ID), nil
	}
	eff := Effect{CommandID: cmd.ID, AttemptID: cmd.AttemptID, UID: uuid.NewString(), SpecDigest: SpecDigest(cmd)}
	if err := appendEffect(e.path, eff); err != nil {
		return domain.Answer{}, err
	}
	e.fp.Hit(application.FailAfterNativeCall)
	if err := e.record(ctx, cmd, eff.UID); err != nil {
		return domain.Answer{}, err
	}
	if err := gate(ctx, cmd); err != nil {
		return domain.Answer{}, err
	}
	return Answer(cmd, eff.UID), nil
}

// Recover looks for the command's effect before acting.
func (e *EffectExecutor) Recover(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error) {
	if e.path == "" {
		return Answer(cmd, cmd.ID), nil
	}
	recs, err := e.records.Records(ctx, cmd.AttemptID)
	if err != nil {
		return domain.Answer{}, err
	}
	for _, r := range recs {
		if r.Kind == "Job" && r.CommandID == cmd.ID {
			return Answer(cmd, r.UID), nil
		}
	}
	effects, err := ReadEffects(e.path)
	if err != nil {
		return domain.Answer{}, err
	}
	for _, eff := range effects {
		if eff.CommandID != cmd.ID {
			continue
		}
		if eff.SpecDigest != SpecDigest(cmd) || eff.AttemptID != cmd.AttemptID {
			return domain.Answer{}, fmt.Errorf("job attempt-%s exists with specification digest %s, not the command's %s: %w",
				cmd.AttemptID, eff.SpecDigest, SpecDigest(cmd), application.ErrUnexplained)
		}
		if err := e.record(ctx, cmd, eff.UID); err != nil {
			return domain.Answer{}, err
		}
		return Answer(cmd, eff.UID), nil
	}
	return e.Execute(ctx, cmd)
}

func (e *EffectExecutor) record(ctx context.Context, cmd siteprotocol.Command, uid string) error {
	err := e.records.SaveRecord(ctx, domain.NativeRecord{
		AttemptID: cmd.AttemptID, Kind: "Job", Namespace: "project-" + cmd.ProjectID, Name: "attempt-" + cmd.AttemptID,
		UID: uid, Phase: "submitted", CommandID: cmd.ID, Sequence: cmd.Sequence, Spec: cmd.Payload,
	})
	if err != nil {
		return err
	}
	e.fp.Hit(application.FailAfterNativeRecord)
	return nil
}

// gate waits for the file named by the payload's GATE entry.
func gate(ctx context.Context, cmd siteprotocol.Command) error {
	p, err := siteprotocol.DecodePayload[siteprotocol.StartPayload](cmd)
	if err != nil || p.Env["GATE"] == "" {
		return nil
	}
	path := p.Env["GATE"]
	if err := os.WriteFile(path+".waiting", nil, 0o600); err != nil {
		return err
	}
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func appendEffect(path string, eff Effect) error {
	b, err := json.Marshal(eff)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("native system: %w", err)
	}
	_, werr := f.Write(append(b, '\n'))
	serr := f.Sync()
	return errors.Join(werr, serr, f.Close())
}

// ReadEffects reads the effects file (missing: none).
func ReadEffects(path string) ([]Effect, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Effect
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var eff Effect
		if err := json.Unmarshal(sc.Bytes(), &eff); err != nil {
			return nil, fmt.Errorf("effects file %s: %w", path, err)
		}
		out = append(out, eff)
	}
	return out, sc.Err()
}

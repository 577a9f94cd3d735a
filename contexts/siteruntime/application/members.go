package application

import (
	"context"
	"fmt"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// MemberExecutor applies bind-member and retire-member commands to the
// journal's member bindings (docs/site-protocol.md#operations: no native
// effect). Applying is idempotent, so Recover applies again: a command
// whose change is already stored gets the same answer (rules:
// domain.DecideBind, domain.DecideRetire).
type MemberExecutor struct {
	bindings MemberBindings
	fp       Failpoints
}

// NewMemberExecutor returns the executor for both member operations; fp is
// hit (FailAfterBindingRecord) right after a binding change is durable.
func NewMemberExecutor(b MemberBindings, fp Failpoints) *MemberExecutor {
	if fp == nil {
		fp = NoFailpoints{}
	}
	return &MemberExecutor{bindings: b, fp: fp}
}

// Registrations routes bind-member and retire-member to e.
func (e *MemberExecutor) Registrations() []Registration {
	return []Registration{
		{Operation: siteprotocol.OpBindMember, Executor: e},
		{Operation: siteprotocol.OpRetireMember, Executor: e},
	}
}

// Execute applies the command. Storage errors are returned as they are
// (the effect is uncertain; the worker recovers).
func (e *MemberExecutor) Execute(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error) {
	var bindingID string
	var generation int64
	var change domain.BindingChange
	switch cmd.Operation {
	case siteprotocol.OpBindMember:
		p, err := siteprotocol.DecodePayload[siteprotocol.BindMemberPayload](cmd)
		if err != nil {
			return domain.Refused(siteprotocol.ReasonInvalidPayload, "bind-member payload: %v", err), nil
		}
		known, err := e.bindings.Generations(ctx, p.BindingID)
		if err != nil {
			return domain.Answer{}, err
		}
		holders, err := e.bindings.LiveOfAccount(ctx, p.Account)
		if err != nil {
			return domain.Answer{}, err
		}
		bindingID, generation = p.BindingID, p.Generation
		want := domain.MemberBinding{
			BindingID: p.BindingID, Generation: p.Generation, Revision: p.Revision,
			PartyID: p.PartyID, ProjectID: cmd.ProjectID, Namespace: p.Namespace, Account: p.Account,
			AccountUID: p.AccountUID, AppliedBy: cmd.ID,
		}
		if refusal := domain.AccountHeldElsewhere(holders, want); refusal != nil {
			return *refusal, nil
		}
		change = domain.DecideBind(known, want)
	case siteprotocol.OpRetireMember:
		p, err := siteprotocol.DecodePayload[siteprotocol.RetireMemberPayload](cmd)
		if err != nil {
			return domain.Refused(siteprotocol.ReasonInvalidPayload, "retire-member payload: %v", err), nil
		}
		known, err := e.bindings.Generations(ctx, p.BindingID)
		if err != nil {
			return domain.Answer{}, err
		}
		bindingID, generation = p.BindingID, p.Generation
		change = domain.DecideRetire(known, p.BindingID, p.Generation, cmd.MemberID, cmd.ProjectID, cmd.ID)
	default:
		return domain.Refused(siteprotocol.ReasonUnsupportedOperation, "the member executor does not perform %s", cmd.Operation), nil
	}
	if change.Refusal != nil {
		return *change.Refusal, nil
	}
	if len(change.Write) > 0 {
		if err := e.bindings.Save(ctx, change.Write); err != nil {
			return domain.Answer{}, fmt.Errorf("save member binding %s: %w", bindingID, err)
		}
		e.fp.Hit(FailAfterBindingRecord)
	}
	return domain.Succeeded(siteprotocol.ReasonApplied,
		domain.BindingMessage(cmd.Operation, bindingID, generation, change.AppliedRevision),
		siteprotocol.BindingDetail{AppliedRevision: change.AppliedRevision}), nil
}

// Recover applies the command again; see MemberExecutor.
func (e *MemberExecutor) Recover(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error) {
	return e.Execute(ctx, cmd)
}

package application

import (
	"context"
	"errors"
	"fmt"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// The steps both service families (application and inference) share
// (docs/site-runtime.md#application-services-on-kubernetes,
// docs/site-runtime.md#inference-services-on-kserve).

// ServicePrepare is what a service family supplies to PrepareService.
type ServicePrepare struct {
	// Invalid is why the payload asks for a service the Runtime cannot
	// render (refused invalid-payload before anything is read); nil when
	// it can.
	Invalid error
	// Kind is the family's service kind.
	Kind siteprotocol.ServiceKind
	// SpecKinds are the kinds of the specification prepare saves, in
	// order; the first one's digest is the answer's spec_digest.
	SpecKinds []string
	// Render renders the object of kind into binding b's namespace, as
	// its account, mounting the claim named claim; verify is what the
	// serving Pod verifies of a checkout (nil without a repository).
	Render func(kind string, b domain.MemberBinding, claim string, verify *WorkspaceVerification) (NativeObject, error)
	// Saved ends the answer's message: what was rendered and saved (objs,
	// in SpecKinds' order).
	Saved func(objs []NativeObject) string
}

// PrepareService is a service family's prepare
// (docs/site-runtime.md#application-services-on-kubernetes,
// docs/site-runtime.md#inference-services-on-kserve): s.Invalid refused
// invalid-payload; BeginPrepare, with ServicePreparedElsewhere's rule;
// each object of s.SpecKinds rendered (and so validated) before the claim
// is created — a prepare refused for what it asks creates nothing, and a
// saved specification is never rendered again (SavedOrRendered); the
// workspace step (PrepareServiceWorkspace); the specifications saved in
// phase prepared (SavePrepared). Errors leave the effect uncertain.
func PrepareService(ctx context.Context, env FamilyEnv, specs WorkspaceSpecs, cmd siteprotocol.Command, p siteprotocol.PreparePayload, recovering bool,
	s ServicePrepare) (domain.Answer, error) {
	if s.Invalid != nil {
		return domain.Refused(siteprotocol.ReasonInvalidPayload, "prepare payload: %v", s.Invalid), nil
	}
	w, refusal, err := env.BeginPrepare(ctx, specs, cmd, p, func(records []domain.NativeRecord) (*domain.Answer, error) {
		return ServicePreparedElsewhere(specs, s.Kind, cmd, records, s.SpecKinds...)
	})
	if refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	var verify *WorkspaceVerification
	if p.Repository != nil {
		// The serving Pod verifies the prepared checkout, read-only,
		// before its container starts (docs/site-runtime.md#services-and-the-prepared-workspace).
		verify = env.Checkout.Verification(*p.Repository, p.WorkspaceSizeBytes)
	}
	recs := make([]*domain.NativeRecord, len(s.SpecKinds))
	objs := make([]NativeObject, len(s.SpecKinds))
	for i, kind := range s.SpecKinds {
		recs[i] = domain.FindRecord(w.Records, kind)
		if objs[i], err = SavedOrRendered(recs[i], func() (NativeObject, error) { return s.Render(kind, w.Binding, w.Workspace.Name, verify) }); err != nil {
			return RenderRefusal(err)
		}
	}
	ws, wsUID, checkedOut, answer, err := PrepareServiceWorkspace(ctx, env, cmd, w.Binding, w.Records, w.Workspace, p, recs[0] != nil, recovering)
	if answer != nil || err != nil {
		return OrAnswer(answer), err
	}
	for i := range objs {
		if err := SavePrepared(ctx, env, cmd, recs[i], objs[i]); err != nil {
			return domain.Answer{}, err
		}
	}
	return domain.Succeeded(siteprotocol.ReasonPrepared,
		fmt.Sprintf("workspace claim %s created in namespace %s as %s%s; %s", ws.Name, ws.Namespace, w.Binding.Account, checkedOut, s.Saved(objs)),
		siteprotocol.PrepareDetail{Workspace: siteprotocol.WorkspaceRef{ClaimName: ws.Name, UID: wsUID}, SpecDigest: siteprotocol.Digest(objs[0].Spec)},
		ws.Ref(wsUID)), nil
}

// RenderRefusal is a prepare's invalid-payload refusal for a demand the
// Site cannot render (ErrUnsupportedDemand); any other render error is
// returned.
func RenderRefusal(err error) (domain.Answer, error) {
	if errors.Is(err, ErrUnsupportedDemand) {
		return domain.Refused(siteprotocol.ReasonInvalidPayload, "prepare payload: %v", err), nil
	}
	return domain.Answer{}, err
}

// IdentityReader reads the identity labels of a saved specification
// (every family's specs do).
type IdentityReader interface {
	Identity(spec []byte) (ObjectIdentity, error)
}

// ServicePreparedElsewhere refuses a prepare of an Attempt whose service
// specification (of kinds) another command saved — its command label
// names the prepare that rendered it — or that holds a record of a
// service kind other than kind: a later command never changes either
// (docs/site-runtime.md#application-services-on-kubernetes).
func ServicePreparedElsewhere(specs IdentityReader, kind siteprotocol.ServiceKind, cmd siteprotocol.Command, records []domain.NativeRecord, kinds ...string) (*domain.Answer, error) {
	for _, r := range records {
		if r.ServiceKind != "" && r.ServiceKind != string(kind) {
			a := domain.Refused(siteprotocol.ReasonAttemptConflict, "attempt %s was prepared as a %s service (%s %s); a later prepare cannot change its service kind",
				cmd.AttemptID, r.ServiceKind, r.Kind, r.Name)
			return &a, nil
		}
		spec := false
		for _, k := range kinds {
			spec = spec || r.Kind == k
		}
		if !spec {
			continue
		}
		id, err := specs.Identity(r.Spec)
		if err != nil {
			return nil, fmt.Errorf("read the identity of attempt %s's %s record: %w", cmd.AttemptID, r.Kind, err)
		}
		if id.CommandID != cmd.ID {
			a := domain.Refused(siteprotocol.ReasonAttemptConflict,
				"attempt %s was already prepared by an earlier command; a later prepare cannot change its service kind or specification", cmd.AttemptID)
			return &a, nil
		}
	}
	return nil, nil
}

// PreparedFor refuses a start of a service whose saved specification spec
// was prepared for another Run, member or Project (attempt-conflict), or
// in another namespace than binding b's (not-prepared).
func PreparedFor(specs IdentityReader, cmd siteprotocol.Command, b domain.MemberBinding, ws, spec domain.NativeRecord) (*domain.Answer, error) {
	id, err := specs.Identity(spec.Spec)
	if err != nil {
		return nil, fmt.Errorf("read the identity of attempt %s's %s record: %w", cmd.AttemptID, spec.Kind, err)
	}
	if id.RunID != cmd.RunID || id.MemberID != cmd.MemberID || id.ProjectID != cmd.ProjectID {
		a := domain.Refused(siteprotocol.ReasonAttemptConflict,
			"attempt %s was not prepared for run %s, member %s, project %s (this start's); nothing was created", cmd.AttemptID, cmd.RunID, cmd.MemberID, cmd.ProjectID)
		return &a, nil
	}
	if ws.Namespace != b.Namespace || spec.Namespace != b.Namespace {
		a := domain.Refused(siteprotocol.ReasonNotPrepared, "attempt %s was prepared in namespace %s; binding %s now names namespace %s",
			cmd.AttemptID, spec.Namespace, b.BindingID, b.Namespace)
		return &a, nil
	}
	return nil, nil
}

// PrepareServiceWorkspace is a service prepare's native part, the same for
// every service family: the Attempt's workspace claim ws created as the
// member, then, when p names a repository and the specification is not
// saved yet (specSaved false), its checkout by the workspace helper, both
// under one access check. It returns the claim, its UID and a note on the
// checkout for the answer's message, or a refusal or failure of either
// step as the answer; errors are EnsureCreated's and Checkout.Run's
// (docs/site-runtime.md#services-and-the-prepared-workspace).
func PrepareServiceWorkspace(ctx context.Context, env FamilyEnv, cmd siteprotocol.Command, b domain.MemberBinding,
	records []domain.NativeRecord, ws NativeObject, p siteprotocol.PreparePayload, specSaved, recovering bool) (NativeObject, string, string, *domain.Answer, error) {
	access := env.Life.Access().Start(cmd, b)
	ws, wsUID, refusal, err := env.Life.EnsureCreated(ctx, cmd, access, domain.FindRecord(records, domain.KindWorkspace), ws, recovering)
	if refusal != nil || err != nil {
		return ws, "", "", refusal, err
	}
	if p.Repository == nil {
		return ws, wsUID, "", nil, nil
	}
	commit := p.Repository.Commit
	if !specSaved {
		// The specification is saved only once the checkout is ready.
		o, answer, err := env.Checkout.Run(ctx, cmd, access, ws.Name, *p.Repository, p.WorkspaceSizeBytes, recovering)
		if answer != nil || err != nil {
			return ws, "", "", answer, err
		}
		commit = o.Commit
	}
	return ws, wsUID, fmt.Sprintf("; %s checked out at %s by the workspace helper, its credential revoked and the helper gone", p.Repository.URL, commit), nil, nil
}

// SavedOrRendered is the specification rec (this command's, from before a
// crash) saved, or else what render gives: a saved specification is never
// rendered again.
func SavedOrRendered(rec *domain.NativeRecord, render func() (NativeObject, error)) (NativeObject, error) {
	if rec != nil {
		return SavedObject(*rec), nil
	}
	return render()
}

// SavePrepared saves obj's specification in phase prepared, unless rec
// holds it already.
func SavePrepared(ctx context.Context, env FamilyEnv, cmd siteprotocol.Command, rec *domain.NativeRecord, obj NativeObject) error {
	if rec != nil {
		return nil
	}
	if err := env.Life.Save(ctx, cmd, obj, "", domain.PhasePrepared); err != nil {
		return err
	}
	env.Failpoints.Hit(FailAfterNativeRecord)
	return nil
}

// StartRecord is the record EnsureCreated continues a service start from:
// none while the object is only prepared (start creates it, recording its
// own phases).
func StartRecord(cmd siteprotocol.Command, rec *domain.NativeRecord) *domain.NativeRecord {
	if rec.Phase == domain.PhasePrepared && rec.CommandID != cmd.ID {
		return nil
	}
	return rec
}

// Verification is what a service's serving Pod verifies, read-only, before
// its container starts when its prepare checked repo out into a workspace
// of sizeBytes: the workspace helper's image and size limit
// (docs/site-runtime.md#services-and-the-prepared-workspace).
func (c *Checkout) Verification(repo siteprotocol.Repository, sizeBytes int64) *WorkspaceVerification {
	return &WorkspaceVerification{Image: c.cfg.Image, Repository: repo, SizeLimitBytes: c.SizeLimit(sizeBytes)}
}

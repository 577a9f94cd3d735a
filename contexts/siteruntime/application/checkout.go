package application

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Defaults of the workspace helper (docs/site-runtime.md#the-workspace-helper).
const (
	// DefaultCheckoutTimeout is workspace-init's --timeout in the helper.
	DefaultCheckoutTimeout = 10 * time.Minute
	// DefaultHelperDeletionWait is the foreground-deletion allowance that
	// follows the helper's 5 s grace period (HelperGracePeriodSeconds).
	DefaultHelperDeletionWait = 30 * time.Second
	// HelperGracePeriodSeconds is the helper Pod's
	// terminationGracePeriodSeconds; LegacyHelperGracePeriodSeconds is the
	// earlier default that recovery still accepts on a live helper.
	HelperGracePeriodSeconds       = 5
	LegacyHelperGracePeriodSeconds = 30
	// DefaultCheckoutWaitExtra is what the wait for the helper's outcome
	// adds to the checkout's timeout, for scheduling and the image pull.
	DefaultCheckoutWaitExtra = 5 * time.Minute
	// helperPoll is how often prepare reads the helper Pod while it runs.
	helperPoll = 500 * time.Millisecond
)

// CheckoutConfig configures the workspace helper of a prepare with a
// repository (docs/site-runtime.md#the-workspace-helper).
type CheckoutConfig struct {
	// Image is the fixed platform image the helper runs (the Site's batch
	// image, pinned by digest: it holds metallo, git and git-lfs).
	Image string
	// Timeout is workspace-init's --timeout (default
	// DefaultCheckoutTimeout).
	Timeout time.Duration
	// Wait bounds how long prepare waits for the helper's outcome, from
	// the command's start (CommandStart: a recovery counts the time
	// already spent; docs/site-runtime.md#command-bounds; default Timeout +
	// DefaultCheckoutWaitExtra, for scheduling and the image pull).
	Wait time.Duration
	// HelperDeletionWait is the foreground-deletion allowance of the
	// credential Secret and the helper (default DefaultHelperDeletionWait).
	HelperDeletionWait time.Duration
	// MaxBytes is the Site's largest checkout in bytes (0: no Site
	// maximum); the helper's --size-limit is the smaller of it and the
	// workspace's size.
	MaxBytes int64
	// CAConfigMap names a ConfigMap of the Project namespace whose key
	// ca.pem is the repository host's CA bundle (workspace-init --ca-file);
	// empty: the platform image's system roots.
	CAConfigMap string
}

func (c CheckoutConfig) withDefaults() CheckoutConfig {
	if c.Timeout <= 0 {
		c.Timeout = DefaultCheckoutTimeout
	}
	if c.Wait <= 0 {
		c.Wait = c.Timeout + DefaultCheckoutWaitExtra
	}
	if c.HelperDeletionWait <= 0 {
		c.HelperDeletionWait = DefaultHelperDeletionWait
	}
	return c
}

// CredentialSpec is what an Attempt's credential Secret
// attempt-<attempt>-cred is rendered from. The grant's token goes into
// NativeObject.Data only.
type CredentialSpec struct {
	Identity  ObjectIdentity
	Namespace string
	Grant     domain.RepositoryGrant
}

// HelperSpec is what an Attempt's workspace helper Pod
// attempt-<attempt>-git is rendered from.
type HelperSpec struct {
	Identity       ObjectIdentity
	Namespace      string
	ServiceAccount string
	// Image is CheckoutConfig.Image.
	Image          string
	WorkspaceClaim string
	// Credential is the credential Secret's name.
	Credential     string
	Repository     siteprotocol.Repository
	SizeLimitBytes int64
	Timeout        time.Duration
	// CAConfigMap is CheckoutConfig.CAConfigMap.
	CAConfigMap string
}

// CheckoutSpecs renders a repository checkout's native objects
// deterministically.
type CheckoutSpecs interface {
	// RenderCredential renders the Secret: its Spec without the token, the
	// username and token in Data.
	RenderCredential(s CredentialSpec) (NativeObject, error)
	// RenderHelper renders the helper Pod running `metallo
	// workspace-init` with exactly the flags of s.
	RenderHelper(s HelperSpec) (NativeObject, error)
}

// HelperState is a helper Pod as the Runtime reads it.
type HelperState struct {
	// Done is true once its container terminated.
	Done bool
	// Message is the container's termination message (workspace-init's
	// outcome line); ExitCode its exit code.
	Message  string
	ExitCode int32
}

// HelperPods reads the workspace helper.
type HelperPods interface {
	// HelperState reads the Pod ref names; found is false when no Pod with
	// its name and UID exists.
	HelperState(ctx context.Context, ref siteprotocol.NativeRef) (s HelperState, found bool, err error)
}

// Checkout fills an Attempt's workspace claim from a repository through
// the workspace helper (docs/site-runtime.md#the-workspace-helper): the
// grant issued with the Attempt's idempotency key (GrantKey), the
// credential Secret and the helper Pod created as the member, the helper's
// outcome read within CheckoutConfig.Wait, the grant revoked, then the
// helper and the Secret deleted by UID. Every step is recorded in the
// family's record file before and after (failpoints after-native-call and
// after-native-record between them), so that a recovery resumes at the
// first step not recorded done; the token is never recorded.
type Checkout struct {
	life   *Lifecycle
	grants RepositoryGrants
	specs  CheckoutSpecs
	pods   HelperPods
	cfg    CheckoutConfig
}

// NewCheckout returns the checkout over a family's lifecycle.
func NewCheckout(life *Lifecycle, grants RepositoryGrants, specs CheckoutSpecs, pods HelperPods, cfg CheckoutConfig) *Checkout {
	return &Checkout{life: life, grants: grants, specs: specs, pods: pods, cfg: cfg.withDefaults()}
}

// SizeLimit is the checkout's --size-limit for a workspace of sizeBytes:
// the smaller of it and CheckoutConfig.MaxBytes (when set).
func (c *Checkout) SizeLimit(sizeBytes int64) int64 {
	if c.cfg.MaxBytes > 0 && c.cfg.MaxBytes < sizeBytes {
		return c.cfg.MaxBytes
	}
	return sizeBytes
}

// grantRecordSpec is a grant record's saved specification: never the
// token.
type grantRecordSpec struct {
	IdempotencyKey string `json:"idempotency_key"`
	RepositoryURL  string `json:"repository_url"`
	Commit         string `json:"commit"`
	GrantID        string `json:"grant_id,omitempty"`
	Username       string `json:"username,omitempty"`
	ExpiresAt      string `json:"expires_at,omitempty"`
	// Refusal is the provider's refusal (phase refused).
	Refusal *domain.CheckoutOutcome `json:"refusal,omitempty"`
}

func encodeSpec(v any) []byte {
	b, _ := json.Marshal(v) // plain strings only
	return b
}

// Run checks repo out into the claim of cmd's Attempt under the command's
// access check (its binding; the check itself performed at most once, by
// the first create; sizeBytes the workspace's size). It returns the verified outcome, or
// the prepare's answer when the checkout did not make the workspace ready:
// the provider's refusal (nothing else created), the helper's failed or
// refused outcome, revocation-unconfirmed, or deletion-pending; in each
// case after the grant was revoked and the Secret and the helper removed
// (except deletion-pending). Errors leave the effect uncertain, or wrap
// ErrUnexplained.
func (c *Checkout) Run(ctx context.Context, cmd siteprotocol.Command, access *StartAccess, claim string, repo siteprotocol.Repository, sizeBytes int64, recovering bool) (domain.CheckoutOutcome, *domain.Answer, error) {
	b := access.Binding()
	records, err := c.life.Records(ctx, cmd.AttemptID)
	if err != nil {
		return domain.CheckoutOutcome{}, nil, err
	}
	key := GrantKey(cmd.AttemptID)
	grantRec := domain.FindRecord(records, domain.KindGrant)
	var grant *domain.RepositoryGrant
	if grantRec == nil || grantRec.Phase == domain.PhaseIssuing {
		rec, g, refusal, err := c.issue(ctx, cmd, b, key, repo, grantRec != nil)
		if err != nil || refusal != nil {
			return domain.CheckoutOutcome{}, refusal, err
		}
		grantRec, grant = &rec, &g
	}
	if grantRec.Phase == domain.PhaseRefused {
		var s grantRecordSpec
		if err := json.Unmarshal(grantRec.Spec, &s); err != nil || s.Refusal == nil {
			return domain.CheckoutOutcome{}, nil, fmt.Errorf("%w: attempt %s's refused grant record holds no refusal", ErrJournalIntegrity, cmd.AttemptID)
		}
		a := domain.Refused(s.Refusal.Reason, "%s", s.Refusal.Message)
		return domain.CheckoutOutcome{}, &a, nil
	}

	outcome, err := c.outcome(ctx, cmd, access, records, *grantRec, grant, claim, repo, sizeBytes, recovering)
	if err != nil {
		return domain.CheckoutOutcome{}, nil, err
	}
	grantRec, err = c.revoke(ctx, cmd, *grantRec)
	if err != nil {
		return domain.CheckoutOutcome{}, nil, err
	}
	if pending, err := c.remove(ctx, cmd); pending != nil || err != nil {
		return domain.CheckoutOutcome{}, pending, err
	}
	where := fmt.Sprintf("the checkout of %s at %s", repo.URL, repo.Commit)
	if grantRec.Phase == domain.PhaseUnconfirmed {
		a := domain.Answer{Outcome: siteprotocol.OutcomeFailed, Reason: siteprotocol.ReasonRevocationUnconfirmed,
			Message: fmt.Sprintf("%s ended %s, but the grant provider did not confirm the revocation of grant %s within its bound; the credential Secret and the helper are gone, the workspace is not ready",
				where, describeOutcome(outcome), grantRec.UID)}
		return domain.CheckoutOutcome{}, &a, nil
	}
	if outcome.Outcome != siteprotocol.OutcomeSucceeded {
		a := domain.Answer{Outcome: outcome.Outcome, Reason: outcome.Reason, Message: fmt.Sprintf("%s %s: %s", where, outcome.Outcome, outcome.Message)}
		return domain.CheckoutOutcome{}, &a, nil
	}
	return outcome, nil, nil
}

func describeOutcome(o domain.CheckoutOutcome) string {
	if o.Reason == "" {
		return string(o.Outcome)
	}
	return fmt.Sprintf("%s / %s", o.Outcome, o.Reason)
}

// issue records the grant issuing (unless recorded is true: a recovery
// of that record), asks the provider, and records what it answered:
// issued with the grant ID, or refused with the refusal.
func (c *Checkout) issue(ctx context.Context, cmd siteprotocol.Command, b domain.MemberBinding, key string, repo siteprotocol.Repository, recorded bool) (domain.NativeRecord, domain.RepositoryGrant, *domain.Answer, error) {
	rec := domain.NativeRecord{AttemptID: cmd.AttemptID, Kind: domain.KindGrant, Namespace: b.Namespace, Name: key,
		ServiceKind: c.life.cfg.ServiceKind, Spec: encodeSpec(grantRecordSpec{IdempotencyKey: key, RepositoryURL: repo.URL, Commit: repo.Commit})}
	if !recorded {
		if err := c.life.SaveRecord(ctx, cmd, rec, domain.PhaseIssuing); err != nil {
			return rec, domain.RepositoryGrant{}, nil, err
		}
		c.life.fp.Hit(FailAfterNativeRecord)
	}
	g, refusal, err := IssueCheckoutGrant(ctx, c.grants, cmd, repo.URL)
	if err != nil {
		return rec, domain.RepositoryGrant{}, nil, err
	}
	c.life.fp.Hit(FailAfterNativeCall)
	if refusal != nil {
		spec := grantRecordSpec{IdempotencyKey: key, RepositoryURL: repo.URL, Commit: repo.Commit,
			Refusal: &domain.CheckoutOutcome{Outcome: refusal.Outcome, Reason: refusal.Reason, Message: refusal.Message}}
		rec.Spec = encodeSpec(spec)
		if err := c.life.SaveRecord(ctx, cmd, rec, domain.PhaseRefused); err != nil {
			return rec, domain.RepositoryGrant{}, nil, err
		}
		c.life.fp.Hit(FailAfterNativeRecord)
		return rec, domain.RepositoryGrant{}, refusal, nil
	}
	rec.UID = g.GrantID
	rec.Spec = encodeSpec(grantRecordSpec{IdempotencyKey: key, RepositoryURL: repo.URL, Commit: repo.Commit,
		GrantID: g.GrantID, Username: g.Username, ExpiresAt: g.ExpiresAt.UTC().Format(time.RFC3339)})
	if err := c.life.SaveRecord(ctx, cmd, rec, domain.PhaseIssued); err != nil {
		return rec, domain.RepositoryGrant{}, nil, err
	}
	c.life.fp.Hit(FailAfterNativeRecord)
	rec.Phase, rec.CommandID, rec.Sequence = domain.PhaseIssued, cmd.ID, cmd.Sequence
	return rec, g, nil, nil
}

// outcome returns the helper's recorded outcome, creating the Secret and
// the helper and waiting for it first when none is recorded.
func (c *Checkout) outcome(ctx context.Context, cmd siteprotocol.Command, access *StartAccess, records []domain.NativeRecord,
	grantRec domain.NativeRecord, grant *domain.RepositoryGrant, claim string, repo siteprotocol.Repository, sizeBytes int64, recovering bool) (domain.CheckoutOutcome, error) {
	if rec := domain.FindRecord(records, domain.KindCheckout); rec != nil {
		o, err := domain.ParseCheckoutOutcome(rec.Spec)
		if err != nil {
			return domain.CheckoutOutcome{}, fmt.Errorf("%w: attempt %s's recorded checkout outcome: %v", ErrJournalIntegrity, cmd.AttemptID, err)
		}
		return o, nil
	}
	if grantRec.Phase != domain.PhaseIssued {
		// Revoked (or being revoked) before an outcome was recorded: only
		// a Runtime of another version could leave that.
		return domain.CheckoutOutcome{}, fmt.Errorf("%w: attempt %s's grant is %s but no checkout outcome is recorded", ErrUnexplained, cmd.AttemptID, grantRec.Phase)
	}
	b := access.Binding()
	id := IdentityOf(cmd)
	helperName := domain.AttemptObjectName(cmd.AttemptID, domain.SuffixHelper)
	secretName := domain.AttemptObjectName(cmd.AttemptID, domain.SuffixCredential)
	var ended *domain.CheckoutOutcome

	// The credential Secret: the token comes from the provider again (the
	// same idempotency key answers the same grant) when this run did not
	// issue it and the Secret may still have to be created.
	secRec := domain.FindRecord(records, domain.KindSecret)
	if secRec == nil || secRec.UID == "" {
		if grant == nil {
			g, refusal, err := IssueCheckoutGrant(ctx, c.grants, cmd, repo.URL)
			switch {
			case err != nil:
				return domain.CheckoutOutcome{}, err
			case refusal != nil:
				o := domain.CheckoutOutcome{Outcome: refusal.Outcome, Reason: refusal.Reason, Message: "the grant could not be read again to create the credential Secret: " + refusal.Message}
				ended = &o
			case g.GrantID != grantRec.UID:
				return domain.CheckoutOutcome{}, fmt.Errorf("%w: the provider answered grant %s for idempotency key %s, recorded as grant %s", ErrUnexplained, g.GrantID, grantRec.Name, grantRec.UID)
			default:
				grant = &g
			}
		}
		if ended == nil {
			obj, err := c.specs.RenderCredential(CredentialSpec{Identity: id, Namespace: b.Namespace, Grant: *grant})
			if err != nil {
				return domain.CheckoutOutcome{}, fmt.Errorf("render the credential Secret: %w", err)
			}
			if _, _, refusal, err := c.life.EnsureCreated(ctx, cmd, access, secRec, obj, recovering); err != nil {
				return domain.CheckoutOutcome{}, err
			} else if refusal != nil {
				o := domain.CheckoutOutcome{Outcome: refusal.Outcome, Reason: refusal.Reason, Message: refusal.Message}
				ended = &o
			}
		}
	}

	// The helper.
	var helper siteprotocol.NativeRef
	if ended == nil {
		limit := c.SizeLimit(sizeBytes)
		obj, err := c.specs.RenderHelper(HelperSpec{Identity: id, Namespace: b.Namespace, ServiceAccount: b.Account, Image: c.cfg.Image,
			WorkspaceClaim: claim, Credential: secretName, Repository: repo, SizeLimitBytes: limit, Timeout: c.cfg.Timeout, CAConfigMap: c.cfg.CAConfigMap})
		if err != nil {
			return domain.CheckoutOutcome{}, fmt.Errorf("render the workspace helper: %w", err)
		}
		obj, uid, refusal, err := c.life.EnsureCreated(ctx, cmd, access, domain.FindNamedRecord(records, domain.KindPod, helperName), obj, recovering)
		switch {
		case err != nil:
			return domain.CheckoutOutcome{}, err
		case refusal != nil:
			o := domain.CheckoutOutcome{Outcome: refusal.Outcome, Reason: refusal.Reason, Message: refusal.Message}
			ended = &o
		default:
			helper = obj.Ref(uid)
		}
	}
	if ended == nil {
		o, err := c.wait(ctx, helper, repo)
		if err != nil {
			return domain.CheckoutOutcome{}, err
		}
		ended = &o
	}
	rec := domain.NativeRecord{AttemptID: cmd.AttemptID, Kind: domain.KindCheckout, Namespace: b.Namespace, Name: helperName,
		ServiceKind: c.life.cfg.ServiceKind, Spec: ended.Encode()}
	if err := c.life.SaveRecord(ctx, cmd, rec, domain.PhaseRead); err != nil {
		return domain.CheckoutOutcome{}, err
	}
	c.life.fp.Hit(FailAfterNativeRecord)
	// What is recorded is what is answered, also after a recovery.
	return domain.ParseCheckoutOutcome(rec.Spec)
}

// wait reads the helper until it terminated, at most until
// CheckoutConfig.Wait has passed since the command's start (a recovery
// adopts the helper and waits only what is left), and returns its
// outcome: the termination message as workspace-init wrote it;
// deadline-exceeded when it did not end by then; native-error when the
// helper is gone without one, wrote no outcome of the vocabulary, or
// claims another commit.
func (c *Checkout) wait(ctx context.Context, ref siteprotocol.NativeRef, repo siteprotocol.Repository) (o domain.CheckoutOutcome, err error) {
	until := commandDeadline(ctx, c.cfg.Wait)
	deadline := time.NewTimer(time.Until(until))
	defer deadline.Stop()
	tick := time.NewTicker(helperPoll)
	defer tick.Stop()
	end := beginWait(ctx, fmt.Sprintf("the workspace helper Pod %s/%s (uid %s) to end", ref.Namespace, ref.Name, ref.UID), until)
	defer func() {
		if o.Reason == siteprotocol.ReasonDeadlineExceeded {
			end(waitAtBound)
		} else {
			end(waitDone)
		}
	}()
	for {
		s, found, err := c.pods.HelperState(ctx, ref)
		switch {
		case err != nil && ctx.Err() != nil:
			return domain.CheckoutOutcome{}, ctx.Err()
		case err != nil:
			// A failed read is retried until the deadline.
		case !found:
			return domain.CheckoutFailed(siteprotocol.ReasonNativeError, "the workspace helper Pod %s/%s (uid %s) is gone without an outcome", ref.Namespace, ref.Name, ref.UID), nil
		case s.Done:
			o, perr := domain.ParseCheckoutOutcome([]byte(s.Message))
			switch {
			case perr != nil:
				return domain.CheckoutFailed(siteprotocol.ReasonNativeError, "the workspace helper Pod %s (uid %s) exited with code %d without an outcome: %v", ref.Name, ref.UID, s.ExitCode, perr), nil
			case o.Outcome == siteprotocol.OutcomeSucceeded && (o.Commit != repo.Commit || s.ExitCode != 0):
				return domain.CheckoutFailed(siteprotocol.ReasonNativeError, "the workspace helper Pod %s (uid %s) reported commit %q with exit code %d; %s was asked for", ref.Name, ref.UID, o.Commit, s.ExitCode, repo.Commit), nil
			}
			return o, nil
		}
		select {
		case <-ctx.Done():
			return domain.CheckoutOutcome{}, ctx.Err()
		case <-deadline.C:
			why := "has not terminated"
			if err != nil {
				why = fmt.Sprintf("could not be read (%v)", err)
			}
			return domain.CheckoutFailed(siteprotocol.ReasonDeadlineExceeded, "the workspace helper Pod %s (uid %s) %s within %s of the prepare's start, the checkout's bound",
				ref.Name, ref.UID, why, c.cfg.Wait), nil
		case <-tick.C:
		}
	}
}

// revoke revokes the grant unless its record says revoked or
// unconfirmed: recorded revoking before the call, revoked after it, or
// unconfirmed when the provider did not confirm it within its bound.
func (c *Checkout) revoke(ctx context.Context, cmd siteprotocol.Command, rec domain.NativeRecord) (*domain.NativeRecord, error) {
	if rec.Phase == domain.PhaseRevoked || rec.Phase == domain.PhaseUnconfirmed {
		return &rec, nil
	}
	if rec.Phase != domain.PhaseRevoking {
		if err := c.life.SaveRecord(ctx, cmd, rec, domain.PhaseRevoking); err != nil {
			return nil, err
		}
		c.life.fp.Hit(FailAfterNativeRecord)
	}
	phase := domain.PhaseRevoked
	err := c.grants.Revoke(ctx, rec.UID)
	switch {
	case errors.Is(err, ErrGrantUnavailable):
		phase = domain.PhaseUnconfirmed
	case err != nil:
		return nil, fmt.Errorf("revoke grant %s: %w", rec.UID, err)
	}
	c.life.fp.Hit(FailAfterNativeCall)
	if err := c.life.SaveRecord(ctx, cmd, rec, phase); err != nil {
		return nil, err
	}
	c.life.fp.Hit(FailAfterNativeRecord)
	rec.Phase = phase
	return &rec, nil
}

// RetryRevocation revokes again, before a cleanup of cmd's Attempt, a
// grant whose revocation the provider did not confirm (recorded
// unconfirmed, or revoking by a crash): recorded revoked once it does,
// unconfirmed again otherwise; the cleanup goes on either way and answers
// the same (docs/site-runtime.md#the-workspace-helper). Nothing happens for
// other operations, on a nil Checkout, or without such a grant. Errors are
// the record store's, or ctx's.
func (c *Checkout) RetryRevocation(ctx context.Context, cmd siteprotocol.Command) error {
	if c == nil || cmd.Operation != siteprotocol.OpCleanup {
		return nil
	}
	records, err := c.life.Records(ctx, cmd.AttemptID)
	if err != nil {
		return err
	}
	rec := domain.FindRecord(records, domain.KindGrant)
	if rec == nil || (rec.Phase != domain.PhaseUnconfirmed && rec.Phase != domain.PhaseRevoking) {
		return nil
	}
	if rec.Phase == domain.PhaseUnconfirmed {
		rec.Phase = domain.PhaseRevoking
		if err := c.life.SaveRecord(ctx, cmd, *rec, domain.PhaseRevoking); err != nil {
			return err
		}
		c.life.fp.Hit(FailAfterNativeRecord)
	}
	_, err = c.revoke(ctx, cmd, *rec)
	return err
}

// remove deletes the helper and then the credential Secret by UID, each
// within the helper deletion allowance; pending is the failed /
// deletion-pending answer when one is still there after it.
func (c *Checkout) remove(ctx context.Context, cmd siteprotocol.Command) (*domain.Answer, error) {
	records, err := c.life.Records(ctx, cmd.AttemptID)
	if err != nil {
		return nil, err
	}
	for _, kind := range []string{domain.KindPod, domain.KindSecret} {
		rec := findCheckoutRecord(records, cmd.AttemptID, kind)
		if rec == nil || rec.UID == "" || rec.Phase == domain.PhaseRemoved {
			continue
		}
		_, pending, err := c.life.DeleteWithin(ctx, cmd, *rec, c.cfg.HelperDeletionWait)
		if pending != nil || err != nil {
			if pending != nil {
				pending.Detail = nil
				pending.Message = "the workspace is not ready: " + pending.Message
			}
			return pending, err
		}
	}
	return nil, nil
}

// PriorPrepare refuses a prepare of an Attempt whose workspace an earlier
// prepare of the same Run, member and Project created, and whose checkout
// did not make it ready — the helper's outcome failed or refused, the
// grant refused, its revocation unconfirmed, or the checkout left without
// an outcome: attempt-conflict, saying the checkout failed (its reason and
// message) and that a new Attempt is needed, since an Attempt's workspace
// is prepared once and a failed checkout leaves it empty
// (docs/site-runtime.md#the-workspace-helper). Nothing is changed. It
// answers nil otherwise (no earlier prepare, one of another Run or member,
// whose conflict EnsureCreated answers naming nothing of it, or one whose
// workspace is ready). Errors are specs'.
func PriorPrepare(specs IdentityReader, cmd siteprotocol.Command, records []domain.NativeRecord) (*domain.Answer, error) {
	ws, g := domain.FindRecord(records, domain.KindWorkspace), domain.FindRecord(records, domain.KindGrant)
	if ws == nil || g == nil || ws.CommandID == cmd.ID || (ws.Phase != domain.PhaseCreated && ws.Phase != domain.PhaseCreating) {
		return nil, nil
	}
	id, err := specs.Identity(ws.Spec)
	if err != nil {
		return nil, fmt.Errorf("read the identity of attempt %s's workspace record: %w", cmd.AttemptID, err)
	}
	if id.RunID != cmd.RunID || id.MemberID != cmd.MemberID || id.ProjectID != cmd.ProjectID {
		return nil, nil
	}
	var why string
	out := domain.FindRecord(records, domain.KindCheckout)
	switch {
	case g.Phase == domain.PhaseRefused:
		var s grantRecordSpec
		if err := json.Unmarshal(g.Spec, &s); err == nil && s.Refusal != nil {
			why = fmt.Sprintf("%s / %s: %s", s.Refusal.Outcome, s.Refusal.Reason, s.Refusal.Message)
		} else {
			why = "its repository grant was refused"
		}
	case out != nil:
		o, err := domain.ParseCheckoutOutcome(out.Spec)
		switch {
		case err != nil:
			why = "its outcome cannot be read"
		case o.Outcome != siteprotocol.OutcomeSucceeded:
			why = fmt.Sprintf("%s / %s: %s", o.Outcome, o.Reason, o.Message)
		case g.Phase == domain.PhaseUnconfirmed:
			why = "failed / revocation-unconfirmed: the grant provider did not confirm the revocation of its credential"
		default:
			return nil, nil
		}
	default:
		why = "it ended without an outcome"
	}
	a := domain.Refused(siteprotocol.ReasonAttemptConflict,
		"attempt %s's checkout failed at an earlier prepare (%s); an Attempt's workspace is prepared once, so a new Attempt is needed to check the repository out again",
		cmd.AttemptID, why)
	return &a, nil
}

// CheckoutReadiness refuses a start of an Attempt whose prepare checked
// out a repository unless the checkout is verified, its grant revoked and
// its Secret and helper removed (records of the family's file): not-prepared
// otherwise (docs/site-runtime.md#the-workspace-helper). An Attempt without
// a grant record has no checkout: nil.
func CheckoutReadiness(cmd siteprotocol.Command, records []domain.NativeRecord) *domain.Answer {
	g := domain.FindRecord(records, domain.KindGrant)
	if g == nil {
		return nil
	}
	notReady := func(why string) *domain.Answer {
		a := domain.Refused(siteprotocol.ReasonNotPrepared, "attempt %s's workspace is not ready: %s", cmd.AttemptID, why)
		return &a
	}
	out := domain.FindRecord(records, domain.KindCheckout)
	if out == nil {
		return notReady("its checkout has no outcome")
	}
	if o, err := domain.ParseCheckoutOutcome(out.Spec); err != nil || o.Outcome != siteprotocol.OutcomeSucceeded {
		return notReady("its checkout did not succeed")
	}
	if g.Phase != domain.PhaseRevoked {
		return notReady("its repository grant is " + g.Phase + ", not revoked")
	}
	for _, kind := range []string{domain.KindPod, domain.KindSecret} {
		if r := findCheckoutRecord(records, cmd.AttemptID, kind); r == nil || r.Phase != domain.PhaseRemoved {
			return notReady("its " + kind + " is not removed")
		}
	}
	return nil
}

// findCheckoutRecord is the record of the checkout's helper Pod
// (attempt-<attempt>-git: an Attempt's other Pod is its workspace reader)
// or credential Secret.
func findCheckoutRecord(records []domain.NativeRecord, attemptID, kind string) *domain.NativeRecord {
	name := domain.AttemptObjectName(attemptID, domain.SuffixCredential)
	if kind == domain.KindPod {
		name = domain.AttemptObjectName(attemptID, domain.SuffixHelper)
	}
	return domain.FindNamedRecord(records, kind, name)
}

package application

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// WorkerConfig configures the ordered worker.
type WorkerConfig struct {
	// Environment and Authority are the configured binding; the journal's
	// binding and the server's stream must both match them.
	Environment string
	Authority   string
	// Backend is the Runtime's backend (--backend; kubernetes when empty):
	// the server's stream must belong to an environment of the same
	// backend, or the worker stops (backend-mismatch) before it executes
	// anything (docs/site-runtime.md#stop-conditions).
	Backend siteprotocol.Backend
	// PullLimit is the most commands asked per pull (1..100; default 100).
	PullLimit int
	// PullWait is the long-poll wait (0..30 s; default 30 s).
	PullWait time.Duration
	// BackoffInitial and BackoffMax bound the capped exponential backoff
	// of transient failures (defaults 200 ms and 30 s). Each wait is drawn
	// uniformly from [d/2, d] for d = min(max, initial·2^attempt).
	BackoffInitial time.Duration
	BackoffMax     time.Duration
	// FoldAcknowledgement folds clearing an acknowledged command into the
	// next command's commit #1 when that command was pulled in the same
	// batch (2 journal commits per command instead of 3); the last command
	// of a batch is always cleared at once, so an idle Runtime holds no
	// pending state (docs/site-runtime.md#the-fold-of-the-clear).
	FoldAcknowledgement bool
	// Credential names the bearer credential in messages, e.g.
	// "--token-file /var/run/secrets/metallo/token": a refusal recorded in
	// the heartbeat names it (docs/site-runtime.md#a-refused-credential).
	Credential string
	// Bounds are the Site's command bounds: while a command runs the
	// heartbeat records it with Bounds.Ceiling of its operation
	// (docs/site-runtime.md#command-bounds). Zero fields are defaults.
	Bounds Bounds
	// BeatInterval is how often the heartbeat is beaten while a command
	// runs (default 500 ms; the heartbeat file takes at most one write a
	// second).
	BeatInterval time.Duration
	// LongWait is how long a command's bounded wait lasts before it is
	// logged, and then its end (default 10 s).
	LongWait time.Duration
}

func (c WorkerConfig) withDefaults() WorkerConfig {
	if c.PullLimit <= 0 || c.PullLimit > 100 {
		c.PullLimit = 100
	}
	if c.PullWait < 0 || c.PullWait > 30*time.Second {
		c.PullWait = 30 * time.Second
	}
	if c.BackoffInitial <= 0 {
		c.BackoffInitial = 200 * time.Millisecond
	}
	if c.BackoffMax < c.BackoffInitial {
		c.BackoffMax = max(c.BackoffInitial, 30*time.Second)
	}
	if c.Credential == "" {
		c.Credential = "the configured credential"
	}
	if c.Backend == "" {
		c.Backend = siteprotocol.BackendKubernetes
	}
	c.Bounds = c.Bounds.WithDefaults()
	if c.BeatInterval <= 0 {
		c.BeatInterval = 500 * time.Millisecond
	}
	if c.LongWait <= 0 {
		c.LongWait = 10 * time.Second
	}
	return c
}

// Worker is the ordered worker (docs/site-runtime.md#the-ordered-worker): it
// restores the journal once, replays a saved result byte for byte, recovers
// a pending command without a result, then pulls commands after the
// checkpoint and, strictly one at a time, persists each as pending, executes
// it, persists its exact result, sends it and clears it on an exact
// acknowledgement. It stops on any unexplained journal, protocol or native
// state and retries transient failures with capped exponential backoff and
// jitter, never advancing or clearing anything because of one.
type Worker struct {
	cfg     WorkerConfig
	site    SiteControl
	journal RuntimeJournal
	exec    *Registry
	heart   Heartbeat
	fp      Failpoints
	events  Events

	cp     domain.Checkpoint
	folded *domain.Acknowledgement
}

// NewWorker returns a worker; call Run once.
func NewWorker(cfg WorkerConfig, site SiteControl, journal RuntimeJournal, exec *Registry, heart Heartbeat, fp Failpoints, events Events) *Worker {
	if fp == nil {
		fp = NoFailpoints{}
	}
	return &Worker{cfg: cfg.withDefaults(), site: site, journal: journal, exec: exec, heart: heart, fp: fp, events: events}
}

// Run delivers commands until ctx is done (it then reports ShutDown and
// returns nil, leaving any pending state for the next start) or the worker
// stops: it then seals the journal (nothing more is written), records the
// stop in the heartbeat (liveness fails), reports it to Events (log and
// metric) and to the Site API (the stop report, best effort: reportStop) —
// in that order, so whoever sees the stop reported sees a sealed journal —
// and returns the *StopError.
func (w *Worker) Run(ctx context.Context) error {
	err := w.run(ctx)
	var stop *domain.StopError
	if errors.As(err, &stop) {
		if serr := w.journal.Seal(); serr != nil {
			stop.Err = fmt.Errorf("%w (sealing the journal: %v)", stop.Err, serr)
		}
		if herr := w.heart.Stopped(context.WithoutCancel(ctx), stop.Reason, stop.Err.Error()); herr != nil {
			w.events.HeartbeatFailed(herr)
		}
		w.events.Stopped(stop)
		w.reportStop(ctx, stop)
		return stop
	}
	if ctx.Err() != nil {
		w.events.ShutDown(w.cp)
		return nil
	}
	return err
}

func (w *Worker) run(ctx context.Context) error {
	cp, err := w.journal.Restore(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &domain.StopError{Reason: domain.StopJournalIntegrity, Err: fmt.Errorf("restore the journal: %w", err)}
	}
	w.cp = cp
	if b := cp.Binding; b.Environment != w.cfg.Environment || !sameAuthority(b.Authority, w.cfg.Authority) {
		return domain.Stop(domain.StopBindingMismatch, "the journal is bound to environment %q at %s; this Runtime is configured for environment %q at %s",
			b.Environment, b.Authority, w.cfg.Environment, w.cfg.Authority)
	}
	w.events.Started(cp)
	if cp.Pending != nil {
		w.events.Pending(cp.Pending.Sequence)
	}
	if err := w.verifyStream(ctx); err != nil {
		return err
	}
	if cp.Pending != nil {
		if err := w.resume(ctx); err != nil {
			return err
		}
	}
	for {
		pull, err := w.pull(ctx)
		if err != nil {
			return err
		}
		if err := w.checkServerAcknowledged(pull.AcknowledgedSequence); err != nil {
			return err
		}
		w.beat(ctx)
		for i, raw := range pull.Commands {
			if err := w.deliver(ctx, raw, i+1 < len(pull.Commands)); err != nil {
				return err
			}
			w.beat(ctx)
		}
	}
}

// pull asks for the commands after the checkpoint. A server answers at
// most siteprotocol.MaxPullBytes of commands (at least the next command),
// so no legal backlog yields an oversized answer; should a server without
// that budget answer one anyway, the same pull is asked again for one
// command, which always fits. Only a single command's answer that is still
// oversized stops the worker (classify).
func (w *Worker) pull(ctx context.Context) (siteprotocol.Pull, error) {
	p, err := retry(ctx, w, StepPull, func() (siteprotocol.Pull, error) {
		p, err := site(ctx, w, func() (siteprotocol.Pull, error) {
			return w.site.Pull(ctx, w.cp.Acknowledged, w.cfg.PullLimit, w.cfg.PullWait)
		})
		if errors.Is(err, ErrOversizedAnswer) && w.cfg.PullLimit > 1 {
			w.events.Retrying(StepPull, 1, err, 0)
			return site(ctx, w, func() (siteprotocol.Pull, error) {
				return w.site.Pull(ctx, w.cp.Acknowledged, 1, w.cfg.PullWait)
			})
		}
		return p, err
	})
	if err == nil {
		w.events.StreamHead(p.HeadSequence)
	}
	return p, err
}

// site runs one Site API request and reports how it ended: to Events, and
// to the heartbeat, which records an unbroken run of credential refusals
// (docs/site-runtime.md#a-refused-credential). A request ended by ctx (the
// process shutting down) reports nothing.
func site[T any](ctx context.Context, w *Worker, f func() (T, error)) (T, error) {
	v, err := f()
	if err != nil && ctx.Err() != nil {
		return v, err
	}
	outcome, cause := SiteAccepted, ""
	switch {
	case err == nil:
	case refusedCredential(err):
		outcome, cause = SiteRefused, fmt.Sprintf("the Site API refuses the credential %s: %v", w.cfg.Credential, err)
	case errors.Is(err, ErrCredentialUnreadable):
		outcome, cause = SiteRefused, fmt.Sprintf("the credential %s cannot be used: %v", w.cfg.Credential, err)
	default:
		outcome = SiteFailed
	}
	w.events.SiteAnswered(outcome)
	if herr := w.heart.Refused(ctx, cause); herr != nil {
		w.events.HeartbeatFailed(herr)
	}
	return v, err
}

// refusedCredential reports whether err is the Site API's refusal of the
// credential: a problem with reason unauthenticated (401) or forbidden
// (403) (docs/site-protocol.md#problem-reasons).
func refusedCredential(err error) bool {
	var p *Problem
	return errors.As(err, &p) && (p.Reason == siteprotocol.ProblemUnauthenticated || p.Reason == siteprotocol.ProblemForbidden)
}

// verifyStream compares the server's stream with the journal's binding,
// the Runtime's backend and the checkpoint before anything is sent or
// executed (a pending command is resumed only after it).
func (w *Worker) verifyStream(ctx context.Context) error {
	st, err := retry(ctx, w, StepStreamState, func() (siteprotocol.StreamState, error) {
		return site(ctx, w, func() (siteprotocol.StreamState, error) { return w.site.StreamState(ctx) })
	})
	if err != nil {
		return err
	}
	w.events.StreamHead(st.HeadSequence)
	b := w.cp.Binding
	if st.Environment != b.Environment || !sameAuthority(st.Authority, b.Authority) {
		return domain.Stop(domain.StopBindingMismatch, "the server's stream is environment %q at %s; the journal is bound to environment %q at %s",
			st.Environment, st.Authority, b.Environment, b.Authority)
	}
	// A server that predates the stream state's backend sends none: its
	// environments are read as kubernetes.
	if backend := cmp.Or(st.Backend, siteprotocol.BackendKubernetes); backend != w.cfg.Backend {
		return domain.Stop(domain.StopBackendMismatch, "the server's stream %s belongs to a %s environment; this Runtime is configured for --backend %s and executes nothing",
			b.Environment, backend, w.cfg.Backend)
	}
	if st.InstallationID != "" && st.InstallationID != b.InstallationID {
		return domain.Stop(domain.StopInstallationMismatch, "the server has bound stream %s to installation %s; this journal belongs to installation %s",
			b.Environment, st.InstallationID, b.InstallationID)
	}
	w.beat(ctx)
	return w.checkServerAcknowledged(st.AcknowledgedSequence)
}

func (w *Worker) checkServerAcknowledged(acked int64) error {
	switch {
	case acked > w.cp.Limit():
		return domain.Stop(domain.StopServerAhead, "the server acknowledged sequence %d; the journal's checkpoint is %d and its pending command %d",
			acked, w.cp.Acknowledged, pendingSequence(w.cp.Pending))
	case acked < w.cp.Acknowledged:
		return domain.Stop(domain.StopServerBehind, "the server acknowledged sequence %d; the journal's checkpoint is already %d", acked, w.cp.Acknowledged)
	}
	return nil
}

// resume finishes the pending command restored from the journal: the
// server must hold the same command at its sequence; a saved result is sent
// again byte for byte; without one, the effect is uncertain and Recover
// answers it.
func (w *Worker) resume(ctx context.Context) error {
	p := w.cp.Pending
	pull, err := retry(ctx, w, StepVerifyPending, func() (siteprotocol.Pull, error) {
		return site(ctx, w, func() (siteprotocol.Pull, error) { return w.site.Pull(ctx, p.Sequence-1, 1, 0) })
	})
	if err != nil {
		return err
	}
	w.events.StreamHead(pull.HeadSequence)
	if len(pull.Commands) == 0 {
		return domain.Stop(domain.StopCommandMismatch, "the server has no command %d; the journal holds command %s (digest %s) as pending",
			p.Sequence, p.Command.ID, p.Command.Digest)
	}
	cmd, err := siteprotocol.ParsePulled(pull.Commands[0])
	if err != nil {
		return domain.Stop(domain.StopInvalidCommand, "command %d as pulled: %v", p.Sequence, err)
	}
	if cmd.Sequence != p.Sequence || cmd.ID != p.Command.ID || cmd.Digest != p.Command.Digest {
		return domain.Stop(domain.StopCommandMismatch, "the server's command %d is %s (digest %s); the journal holds %s (digest %s) as pending",
			cmd.Sequence, cmd.ID, cmd.Digest, p.Command.ID, p.Command.Digest)
	}
	if p.HasResult() {
		d := Delivery{Path: PathReplayed}
		if r, err := siteprotocol.ParseResult(p.Result); err == nil {
			d.Outcome, d.Reason, d.Message = r.Outcome, r.Reason, r.Message
		}
		return w.send(ctx, p, false, d)
	}
	a, err := w.recover(ctx, p)
	if err != nil {
		return err
	}
	w.fp.Hit(FailAfterRecover)
	if err := w.saveResult(ctx, p, a); err != nil {
		return err
	}
	return w.send(ctx, p, false, Delivery{Outcome: a.Outcome, Reason: a.Reason, Message: a.Message, Path: PathRecovered, Note: a.Note})
}

// deliver takes the next pulled command through commit #1, Execute,
// commit #2, send and clear. more says whether another command of the same
// pull follows (the clear may then fold into its commit #1).
func (w *Worker) deliver(ctx context.Context, raw []byte, more bool) error {
	cmd, err := siteprotocol.ParsePulled(raw)
	if err != nil {
		return domain.Stop(domain.StopInvalidCommand, "command after %d as pulled: %v", w.cp.Acknowledged, err)
	}
	if cmd.Sequence != w.cp.Acknowledged+1 {
		return domain.Stop(domain.StopInvalidCommand, "the server offered command %d; the next in order is %d", cmd.Sequence, w.cp.Acknowledged+1)
	}
	// The command's start is saved with it: its bounded waits count from
	// it, also after a restart (docs/site-runtime.md#command-bounds).
	p := &domain.Pending{Sequence: cmd.Sequence, Raw: raw, Command: cmd, StartedAt: time.Now().UTC()}
	prior := w.folded
	if _, err := retry(ctx, w, StepPersistPending, func() (struct{}, error) {
		return struct{}{}, w.journal.SavePending(ctx, *p, prior)
	}); err != nil {
		return err
	}
	w.folded = nil
	w.cp.Pending = p
	w.events.Pending(p.Sequence)
	w.fp.Hit(FailAfterPersistPending)

	a, err := w.perform(ctx, p, w.exec.Execute)
	path := PathExecuted
	if err != nil {
		if stop := w.uncertain(ctx, StepExecute, err, 0); stop != nil {
			return stop
		}
		if a, err = w.recover(ctx, p); err != nil {
			return err
		}
		// Recover answered the uncertain Execute: that run of failures ended.
		w.events.RetryEnded(StepExecute, 1)
		path = PathRecovered
	}
	if err := w.saveResult(ctx, p, a); err != nil {
		return err
	}
	return w.send(ctx, p, more, Delivery{Outcome: a.Outcome, Reason: a.Reason, Message: a.Message, Path: path, Note: a.Note})
}

// recover calls Recover until it answers.
func (w *Worker) recover(ctx context.Context, p *domain.Pending) (domain.Answer, error) {
	for attempt := 0; ; attempt++ {
		a, err := w.perform(ctx, p, w.exec.Recover)
		if err == nil {
			if attempt > 0 {
				w.events.RetryEnded(StepRecover, attempt)
			}
			return a, nil
		}
		if stop := w.uncertain(ctx, StepRecover, err, attempt); stop != nil {
			return domain.Answer{}, stop
		}
	}
}

// uncertain handles an executor error: stop on unexplained native state,
// return ctx's error when done, otherwise wait out a backoff.
func (w *Worker) uncertain(ctx context.Context, step string, err error, attempt int) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, ErrUnexplained) {
		return &domain.StopError{Reason: domain.StopUnexplainedNativeState, Err: fmt.Errorf("%s command %d: %w", step, w.cp.Pending.Sequence, err)}
	}
	return w.wait(ctx, step, err, attempt)
}

func (w *Worker) saveResult(ctx context.Context, p *domain.Pending, a domain.Answer) error {
	r, b, err := siteprotocol.NewResult(p.Command, a.Outcome, a.Reason, a.Message, a.Detail, a.NativeRefs)
	if err != nil {
		return domain.Stop(domain.StopProtocolViolation, "the executor's answer to command %d cannot be encoded as a result: %v", p.Sequence, err)
	}
	if _, err := retry(ctx, w, StepPersistResult, func() (struct{}, error) {
		return struct{}{}, w.journal.SaveResult(ctx, p.Sequence, b, r.Digest)
	}); err != nil {
		return err
	}
	p.Result, p.ResultDigest = b, r.Digest
	w.fp.Hit(FailAfterPersistResult)
	return nil
}

// send sends the saved exact result until the server acknowledges it, and
// clears the pending command on an exact acknowledgement.
func (w *Worker) send(ctx context.Context, p *domain.Pending, mayFold bool, d Delivery) error {
	ack, err := retry(ctx, w, StepSendResult, func() (siteprotocol.Acknowledgement, error) {
		return site(ctx, w, func() (siteprotocol.Acknowledgement, error) { return w.site.SendResult(ctx, p.Sequence, p.Result) })
	})
	if err != nil {
		return err
	}
	w.fp.Hit(FailAfterSend)
	sent := domain.Acknowledgement{Sequence: p.Sequence, ResultDigest: p.ResultDigest}
	got := domain.Acknowledgement{Sequence: ack.AcknowledgedSequence, ResultDigest: ack.ResultDigest}
	if !got.Exact(sent) {
		return domain.Stop(domain.StopProtocolViolation, "the server acknowledged sequence %d with result digest %s; the Runtime sent sequence %d with digest %s",
			got.Sequence, got.ResultDigest, sent.Sequence, sent.ResultDigest)
	}
	if w.cfg.FoldAcknowledgement && mayFold {
		w.folded = &sent
	} else {
		if _, err := retry(ctx, w, StepAcknowledge, func() (struct{}, error) {
			return struct{}{}, w.journal.Acknowledge(ctx, sent)
		}); err != nil {
			return err
		}
		w.fp.Hit(FailAfterAcknowledge)
	}
	w.cp.Acknowledged, w.cp.Pending = p.Sequence, nil
	d.Sequence, d.CommandID, d.Operation, d.AttemptID = p.Sequence, p.Command.ID, p.Command.Operation, p.Command.AttemptID
	w.events.Delivered(d)
	return nil
}

// beat beats the heartbeat; a failed beat is reported to Events (logged
// and counted) and the worker goes on.
func (w *Worker) beat(ctx context.Context) {
	if err := w.heart.Beat(ctx); err != nil {
		w.events.HeartbeatFailed(err)
	}
}

// retry runs f until it succeeds, the failure stops the worker, or ctx is
// done. Transient failures and journal errors other than integrity wait
// out a capped, jittered exponential backoff (beating the heartbeat: the
// worker is alive and waiting); a success after failures reports
// RetryEnded.
func retry[T any](ctx context.Context, w *Worker, step string, f func() (T, error)) (T, error) {
	for attempt := 0; ; attempt++ {
		v, err := f()
		if err == nil {
			if attempt > 0 {
				w.events.RetryEnded(step, attempt)
			}
			return v, nil
		}
		var zero T
		if ctx.Err() != nil {
			return zero, ctx.Err()
		}
		if stop := classify(step, err); stop != nil {
			return zero, stop
		}
		if err := w.wait(ctx, step, err, attempt); err != nil {
			return zero, err
		}
	}
}

func (w *Worker) wait(ctx context.Context, step string, err error, attempt int) error {
	d := backoff(w.cfg.BackoffInitial, w.cfg.BackoffMax, attempt)
	w.events.Retrying(step, attempt+1, err, d)
	w.beat(ctx)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// backoff returns the wait before retry attempt (0-based): uniform in
// [d/2, d] for d = min(maxWait, initial·2^attempt), for every attempt however
// long a run of failures lasts: the doubling stops at maxWait before it could
// overflow (initial<<attempt is negative from 2^63 on).
func backoff(initial, maxWait time.Duration, attempt int) time.Duration {
	d := maxWait
	if attempt < 63 && initial > 0 && initial <= maxWait>>attempt {
		d = initial << attempt
	}
	if d <= 0 {
		return 0
	}
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(d-half)+1))
}

// classify decides by the problem reason alone whether an error stops the
// worker (a non-nil *StopError) or is retried (nil); a journal integrity
// failure and an oversized answer stop it too. Transient failures,
// journal errors other than integrity, and the problems an operator (or the
// kubelet's token rotation) may fix — unauthenticated, forbidden,
// unknown-environment — are retried: retrying them changes nothing.
func classify(step string, err error) *domain.StopError {
	if errors.Is(err, ErrJournalIntegrity) {
		return &domain.StopError{Reason: domain.StopJournalIntegrity, Err: fmt.Errorf("%s: %w", step, err)}
	}
	if errors.Is(err, ErrOversizedAnswer) {
		return &domain.StopError{Reason: domain.StopProtocolViolation, Err: fmt.Errorf("%s: %w", step, err)}
	}
	var p *Problem
	if !errors.As(err, &p) {
		return nil
	}
	var reason domain.StopReason
	switch p.Reason {
	case siteprotocol.ProblemUnauthenticated, siteprotocol.ProblemForbidden, siteprotocol.ProblemUnknownEnvironment:
		return nil
	case siteprotocol.ProblemResultConflict:
		reason = domain.StopResultConflict
	case siteprotocol.ProblemIdentityMismatch:
		reason = domain.StopCommandMismatch
	case siteprotocol.ProblemOutOfOrder:
		reason = domain.StopOutOfOrder
	case siteprotocol.ProblemInstallationMismatch:
		reason = domain.StopInstallationMismatch
	default:
		reason = domain.StopProtocolViolation
	}
	return &domain.StopError{Reason: reason, Err: fmt.Errorf("%s: %w", step, err)}
}

func sameAuthority(a, b string) bool {
	return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
}

func pendingSequence(p *domain.Pending) int64 {
	if p == nil {
		return 0
	}
	return p.Sequence
}

// perform runs f, the executor's Execute or Recover of p, as the command
// the worker is busy with (docs/site-runtime.md#command-bounds): its
// context carries the command's start as saved with it (a restart counts
// the time already spent) and reports its bounded waits; meanwhile the
// heartbeat is beaten every BeatInterval, recording the command, the
// ceiling of its operation (Bounds.Ceiling: liveness fails once the
// command runs past it) and the wait under way, and a wait that lasts
// LongWait is logged, then its end. The heartbeat records no command
// once f returns.
func (w *Worker) perform(ctx context.Context, p *domain.Pending, f func(context.Context, *domain.Pending) (domain.Answer, error)) (domain.Answer, error) {
	now := time.Now()
	start := p.StartedAt
	if start.IsZero() || start.After(now) {
		// Saved by a Runtime that did not keep the start, or dated
		// ahead of this clock: the wait counts from now.
		start = now
	}
	c := &busy{w: w, work: Work{Sequence: p.Sequence, CommandID: p.Command.ID, Operation: p.Command.Operation, AttemptID: p.Command.AttemptID,
		Since: now, Until: now.Add(w.cfg.Bounds.Ceiling(p.Command.Operation))}}
	cctx := withCommand(ctx, start, c)
	c.beat(ctx)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(w.cfg.BeatInterval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				c.tick(ctx)
			}
		}
	}()
	a, err := f(cctx, p)
	close(stop)
	<-done
	if herr := w.heart.Busy(ctx, nil); herr != nil {
		w.events.HeartbeatFailed(herr)
	}
	return a, err
}

// busy is the command the worker runs (perform): what the heartbeat
// records of it, and its bounded wait under way.
type busy struct {
	w *Worker

	mu   sync.Mutex
	work Work
	// long is true once the wait under way was logged as long.
	long bool
}

// waitBegan records wt as the wait under way and beats at once; the
// function it returns ends the wait (logging its end when it was logged
// as long) and beats again.
func (c *busy) waitBegan(wt Wait) func(result string) {
	c.mu.Lock()
	c.work.Wait, c.long = &wt, false
	c.mu.Unlock()
	c.beat(context.Background())
	var once sync.Once
	return func(result string) {
		once.Do(func() {
			c.mu.Lock()
			work, long := c.work, c.long
			if c.work.Wait == &wt {
				c.work.Wait, c.long = nil, false
			}
			c.mu.Unlock()
			if long {
				c.w.events.LongWaitEnded(work, result, time.Since(wt.Since))
			}
			c.beat(context.Background())
		})
	}
}

// tick logs the wait under way once it has lasted LongWait, and beats.
func (c *busy) tick(ctx context.Context) {
	c.mu.Lock()
	work := c.work
	logNow := work.Wait != nil && !c.long && time.Since(work.Wait.Since) >= c.w.cfg.LongWait
	if logNow {
		c.long = true
	}
	c.mu.Unlock()
	if logNow {
		c.w.events.LongWait(work)
	}
	c.beat(ctx)
}

// beat records the command (and its wait) in the heartbeat.
func (c *busy) beat(ctx context.Context) {
	c.mu.Lock()
	work := c.work
	if work.Wait != nil {
		wt := *work.Wait
		work.Wait = &wt
	}
	c.mu.Unlock()
	if err := c.w.heart.Busy(context.WithoutCancel(ctx), &work); err != nil {
		c.w.events.HeartbeatFailed(err)
	}
}

// StopReportTimeout bounds the stop report's one attempt.
const StopReportTimeout = 10 * time.Second

// reportStop sends the stop report once, within StopReportTimeout, even
// when ctx is done, and reports how it ended to Events: the sequence is the
// pending command's, else the checkpoint's (docs/site-protocol.md#the-stop-report).
// Nothing is retried and nothing waits on it: a Site API that cannot be
// reached leaves the stop in the Runtime's log, metric and liveness only.
func (w *Worker) reportStop(ctx context.Context, stop *domain.StopError) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StopReportTimeout)
	defer cancel()
	seq := w.cp.Acknowledged
	if w.cp.Pending != nil {
		seq = w.cp.Pending.Sequence
	}
	err := w.site.ReportStop(ctx, siteprotocol.StopReport{Reason: stop.Reason, Sequence: seq, Message: siteprotocol.StopMessage(stop.Error())})
	w.events.StopReported(stop.Reason, err)
}

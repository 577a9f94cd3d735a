package application

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// DefaultRecheck is how often a waiting pull re-reads its stream even
// without a wake-up, so appends made by a process whose notification was
// lost (or a SQLite file shared by processes) are still seen.
const DefaultRecheck = 2 * time.Second

// Streams is the Site protocol's server side
// (docs/execution-ports.md#the-site-protocols-server-side): append,
// pull with long-poll, acknowledge, stream state, command reads and the
// operator's rebind. Its methods return errors wrapping
// domain.ErrUnknownEnvironment for an environment not configured, the
// domain errors of the store's rules, the siteprotocol codec errors
// (ErrMalformed, ErrInvalid, ErrDigestMismatch, ErrTooLarge) for bad
// commands and results, ErrInvalidRequest for other bad request values,
// ErrUnavailable when the store cannot be reached, or other infrastructure
// errors.
type Streams struct {
	store   StreamStore
	envs    Environments
	clock   Clock
	wake    *Wakeups
	recheck time.Duration

	// versions holds the Runtime version this process last recorded per
	// environment (recordVersion); bounded by the configured environments.
	versionsMu sync.Mutex
	versions   map[string]RuntimeVersion
}

// RuntimeVersionRefresh is how old an environment's recorded Runtime
// version may grow before a pull carrying the same version from the same
// installation records its time again; a pull with another version or
// installation records at once. It spares the store a write on every pull
// (docs/execution-ports.md#runtime-versions).
const RuntimeVersionRefresh = time.Minute

// NewStreams returns the service. recheck ≤ 0 means DefaultRecheck.
func NewStreams(store StreamStore, envs Environments, clock Clock, wake *Wakeups, recheck time.Duration) *Streams {
	if recheck <= 0 {
		recheck = DefaultRecheck
	}
	return &Streams{store: store, envs: envs, clock: clock, wake: wake, recheck: recheck, versions: map[string]RuntimeVersion{}}
}

// EnvironmentIDs returns the configured environment IDs in use, sorted.
func (s *Streams) EnvironmentIDs() []string { return s.envs.IDs() }

// Environment returns the configured environment id or an error wrapping
// domain.ErrUnknownEnvironment.
func (s *Streams) Environment(id string) (domain.Environment, error) {
	env, ok := s.envs.Environment(id)
	if !ok {
		return domain.Environment{}, fmt.Errorf("%w: %q is not configured", domain.ErrUnknownEnvironment, id)
	}
	return env, nil
}

// Append parses raw with siteprotocol.ParseAppendFor at the environment's
// backend (the server stores the
// received object's canonical JCS form and computes its digest) and
// appends it to environment's stream. Waiting pulls are woken.
func (s *Streams) Append(ctx context.Context, environment string, raw []byte) (Appended, error) {
	env, err := s.Environment(environment)
	if err != nil {
		return Appended{}, err
	}
	// A bind-member is held to the environment's backend's rules
	// (docs/site-protocol.md#member-identity-by-backend).
	cmd, canonical, err := siteprotocol.ParseAppendFor(raw, env.ProtocolBackend())
	if err != nil {
		return Appended{}, fmt.Errorf("append command: %w", err)
	}
	a, err := s.store.Append(ctx, environment, NewCommand{ID: cmd.ID, Operation: string(cmd.Operation), Digest: cmd.Digest, Canonical: canonical}, s.clock.Now())
	if err != nil {
		return Appended{}, err
	}
	if a.Created {
		s.wake.Notify(environment)
	}
	return a, nil
}

// PullQuery asks for the commands of a stream after a sequence.
type PullQuery struct {
	Environment string
	// Installation is the Runtime installation asking (Metallo-Installation).
	Installation string
	// Principal names the caller, recorded if this pull binds the stream.
	Principal string
	// After is the sequence the commands follow (0 for the first).
	After int64
	// Limit bounds the number of commands (1..siteprotocol.MaxPullLimit).
	Limit int
	// Wait is how long to wait for a command when none is ready (long poll).
	Wait time.Duration
	// Bind binds an unbound stream to Installation (a Runtime's pull).
	// Without it the pull is read-only (`runtime check`): an unbound stream
	// stays unbound; a stream bound to another installation is still
	// domain.ErrInstallationMismatch.
	Bind bool
	// RuntimeVersion is the pull's Metallo-Runtime-Version (valid by
	// siteprotocol.ValidRuntimeVersion), "" when it carried none. A
	// binding pull that the fence admits records it; a read-only pull
	// never does (docs/execution-ports.md#runtime-versions).
	RuntimeVersion string
}

// PullPage is the answer to a pull: the stream's state and the commands
// after the asked sequence, oldest first, each encoded as served
// (siteprotocol.EncodeStored).
type PullPage struct {
	State    domain.StreamState
	Commands [][]byte
}

// Pull returns up to q.Limit commands after q.After, encoded as served, for
// q.Installation. The commands' encoded sizes add up to at most
// siteprotocol.MaxPullBytes, except that the next command is always
// answered (siteprotocol.MaxPullBytes: a stream of large commands never
// stalls its Runtime). When none are ready it waits up to q.Wait for an
// append, without holding a database connection, then answers with what is
// there (possibly nothing); it answers at once when the process stops
// (Wakeups.Stop). A stream bound to another installation is
// domain.ErrInstallationMismatch; q.Bind says whether an unbound stream is
// bound to q.Installation. A binding pull records q.RuntimeVersion once
// the fence admits it (recordVersion). It returns an error wrapping
// ErrInvalidRequest for a RuntimeVersion the header's rule refuses.
func (s *Streams) Pull(ctx context.Context, q PullQuery) (PullPage, error) {
	if q.RuntimeVersion != "" && !siteprotocol.ValidRuntimeVersion(q.RuntimeVersion) {
		return PullPage{}, fmt.Errorf("%w: %s must be 1-%d visible ASCII characters", ErrInvalidRequest, siteprotocol.RuntimeVersionHeader, siteprotocol.MaxRuntimeVersionBytes)
	}
	pulledAt := s.clock.Now()
	deadline := time.Now().Add(q.Wait)
	recorded := !q.Bind
	for {
		woken := s.wake.Watch(q.Environment)
		// Checked at every round: an environment removed from the
		// configuration while its Runtime waits ends the wait
		// (docs/site-protocol.md#a-removed-environment).
		if _, err := s.Environment(q.Environment); err != nil {
			return PullPage{}, err
		}
		page, err := s.read(ctx, q)
		if err == nil && !recorded {
			err = s.recordVersion(ctx, RuntimeVersion{Environment: q.Environment, InstallationID: q.Installation, Version: q.RuntimeVersion, PulledAt: pulledAt})
			recorded = true
		}
		if err != nil {
			return PullPage{}, err
		}
		if len(page.Commands) > 0 {
			return page, nil
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return page, nil
		}
		timer := time.NewTimer(min(remaining, s.recheck))
		select {
		case <-woken:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return page, nil
		case <-s.wake.Stopped():
			timer.Stop()
			return page, nil
		}
		timer.Stop()
	}
}

// recordVersion stores v in the store unless this process recorded the
// same version from the same installation less than RuntimeVersionRefresh
// before v.PulledAt.
func (s *Streams) recordVersion(ctx context.Context, v RuntimeVersion) error {
	s.versionsMu.Lock()
	last, ok := s.versions[v.Environment]
	s.versionsMu.Unlock()
	if ok && last.InstallationID == v.InstallationID && last.Version == v.Version &&
		!v.PulledAt.Before(last.PulledAt) && v.PulledAt.Sub(last.PulledAt) < RuntimeVersionRefresh {
		return nil
	}
	if err := s.store.RecordRuntimeVersion(ctx, v); err != nil {
		return fmt.Errorf("record the runtime version of stream %s: %w", v.Environment, err)
	}
	s.versionsMu.Lock()
	if cur, ok := s.versions[v.Environment]; !ok || !v.PulledAt.Before(cur.PulledAt) {
		s.versions[v.Environment] = v
	}
	s.versionsMu.Unlock()
	return nil
}

// RuntimeVersion returns the last Runtime version recorded for environment
// (false when none was).
func (s *Streams) RuntimeVersion(ctx context.Context, environment string) (RuntimeVersion, bool, error) {
	if _, err := s.Environment(environment); err != nil {
		return RuntimeVersion{}, false, err
	}
	return s.store.RuntimeVersion(ctx, environment)
}

func (s *Streams) read(ctx context.Context, q PullQuery) (PullPage, error) {
	var state domain.StreamState
	var err error
	if q.Bind {
		state, err = BindStream(ctx, s.store, q.Environment, q.Installation, q.Principal, s.clock.Now())
	} else {
		state, err = s.fencedState(ctx, q.Environment, q.Installation)
	}
	if err != nil {
		return PullPage{}, err
	}
	cmds, err := s.store.CommandsAfter(ctx, q.Environment, q.After, q.Limit, siteprotocol.MaxPullBytes)
	if err != nil {
		return PullPage{}, err
	}
	page := PullPage{State: state, Commands: make([][]byte, 0, len(cmds))}
	total := 0
	for _, c := range cmds {
		raw, err := siteprotocol.EncodeStored(c.Canonical, c.Sequence, c.Digest)
		if err != nil {
			return PullPage{}, fmt.Errorf("serve stored command %d of stream %s: %w", c.Sequence, q.Environment, err)
		}
		if len(page.Commands) > 0 && total+len(raw) > siteprotocol.MaxPullBytes {
			break
		}
		total += len(raw)
		page.Commands = append(page.Commands, raw)
		if c.Sequence > page.State.HeadSequence {
			page.State.HeadSequence = c.Sequence
		}
	}
	return page, nil
}

// RecordResult records the result raw (exact bytes) a Runtime sent for
// sequence. raw must parse with siteprotocol.ParseResult (strict shape,
// matching digest); ApplyResult applies the fencing and acknowledgement
// rules. A result never binds
// a stream: on an unbound stream it is domain.ErrInstallationMismatch.
func (s *Streams) RecordResult(ctx context.Context, environment, installation string, sequence int64, raw []byte) (Acknowledgement, error) {
	if _, err := s.Environment(environment); err != nil {
		return Acknowledgement{}, err
	}
	r, err := siteprotocol.ParseResult(raw)
	if err != nil {
		return Acknowledgement{}, fmt.Errorf("acknowledge result: %w", err)
	}
	received := ReceivedResult{
		ReceivedResult: domain.ReceivedResult{CommandID: r.CommandID, CommandDigest: r.CommandDigest, Sequence: r.Sequence, Digest: r.Digest},
		Bytes:          raw,
	}
	return ApplyResult(ctx, s.store, environment, installation, sequence, received, s.clock.Now())
}

// State returns the stream's state for installation (fenced like every Site
// route, but a state read never binds).
func (s *Streams) State(ctx context.Context, environment, installation string) (domain.Environment, domain.StreamState, error) {
	env, err := s.Environment(environment)
	if err != nil {
		return domain.Environment{}, domain.StreamState{}, err
	}
	st, err := s.fencedState(ctx, environment, installation)
	if err != nil {
		return env, domain.StreamState{}, err
	}
	return env, st, nil
}

// fencedState reads the stream's state without binding it and applies the
// fencing rule (domain.CheckInstallation) for installation.
func (s *Streams) fencedState(ctx context.Context, environment, installation string) (domain.StreamState, error) {
	st, err := s.store.State(ctx, environment)
	if err != nil {
		return domain.StreamState{}, err
	}
	if err := domain.CheckInstallation(st.InstallationID, installation); err != nil {
		return domain.StreamState{}, err
	}
	return st, nil
}

// Command returns the command id of environment's stream with its result
// once acknowledged (domain.ErrUnknownCommand when absent).
func (s *Streams) Command(ctx context.Context, environment, id string) (CommandRecord, error) {
	if _, err := s.Environment(environment); err != nil {
		return CommandRecord{}, err
	}
	return s.store.Command(ctx, environment, id)
}

// Rebind binds environment's stream to installation on an operator's
// request, or unbinds it when unbind is set (exactly one of the two:
// unbinding is explicit, so an empty installation can never unbind by
// mistake), recording who and why, and wakes its pulls. It returns an
// error wrapping ErrInvalidRequest for both or neither, or a malformed
// installation ID.
func (s *Streams) Rebind(ctx context.Context, environment, installation string, unbind bool, who, reason string) (Binding, domain.StreamState, error) {
	if _, err := s.Environment(environment); err != nil {
		return Binding{}, domain.StreamState{}, err
	}
	switch {
	case unbind && installation != "":
		return Binding{}, domain.StreamState{}, fmt.Errorf("%w: give either installation_id or unbind, not both", ErrInvalidRequest)
	case !unbind && !domain.ValidInstallationID(installation):
		return Binding{}, domain.StreamState{}, fmt.Errorf("%w: installation_id must be 1-128 letters, digits, '.', '_' or '-' (to unbind the stream, send unbind: true instead)", ErrInvalidRequest)
	}
	b, err := RebindStream(ctx, s.store, environment, installation, who, reason, s.clock.Now())
	if err != nil {
		return Binding{}, domain.StreamState{}, err
	}
	st, err := s.store.State(ctx, environment)
	if err != nil {
		return b, domain.StreamState{}, err
	}
	s.wake.Notify(environment)
	return b, st, nil
}

// Bindings returns the stream's binding history.
func (s *Streams) Bindings(ctx context.Context, environment string) ([]Binding, error) {
	if _, err := s.Environment(environment); err != nil {
		return nil, err
	}
	return s.store.Bindings(ctx, environment)
}

// ErrInvalidRequest is wrapped by service errors for request values that
// break a rule the HTTP schema cannot express.
var ErrInvalidRequest = errors.New("invalid request")

// ErrUnavailable is wrapped by every store error that means the database
// cannot be reached or used now (connection refused or lost, pool closed,
// server shutting down or out of connections, SQLite file locked or
// unreadable). The HTTP adaptor answers 503 unavailable: retry later.
var ErrUnavailable = errors.New("execution_ports store unavailable")

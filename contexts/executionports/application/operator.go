package application

import (
	"context"
	"fmt"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// RuntimeStop is the stop a stream's Runtime last reported
// (docs/execution-ports.md#runtime-stops): who, why, where, which build and
// when (the server's time of the report). A binding pull clears it.
type RuntimeStop struct {
	Environment    string
	InstallationID string
	// Reason is one of siteprotocol.StopReasons.
	Reason siteprotocol.StopReason
	// Sequence is where the worker stopped (siteprotocol.StopReport).
	Sequence int64
	// Version is the Runtime's version (siteprotocol.ValidRuntimeVersion).
	Version string
	// Message is the stop's cause (at most siteprotocol.MaxStopMessageBytes).
	Message   string
	StoppedAt time.Time
}

// ReportStop records the stop report r of installation for environment's
// stream, fenced like a result (domain.CheckInstallation: a stream bound to
// another installation is domain.ErrInstallationMismatch; an unbound
// stream takes it), as of the server's clock
// (docs/execution-ports.md#runtime-stops). It returns an error wrapping
// ErrInvalidRequest for a reason outside siteprotocol.StopReasons, a
// negative sequence, a version the header's rule refuses or a message
// longer than siteprotocol.MaxStopMessageBytes.
func (s *Streams) ReportStop(ctx context.Context, environment, installation string, r siteprotocol.StopReport) (RuntimeStop, error) {
	if _, err := s.Environment(environment); err != nil {
		return RuntimeStop{}, err
	}
	switch {
	case !r.Reason.Known():
		return RuntimeStop{}, fmt.Errorf("%w: reason %q is not a stop reason", ErrInvalidRequest, r.Reason)
	case r.Sequence < 0:
		return RuntimeStop{}, fmt.Errorf("%w: sequence must be 0 or more", ErrInvalidRequest)
	case !siteprotocol.ValidRuntimeVersion(r.RuntimeVersion):
		return RuntimeStop{}, fmt.Errorf("%w: runtime_version must be 1-%d visible ASCII characters", ErrInvalidRequest, siteprotocol.MaxRuntimeVersionBytes)
	case len(r.Message) > siteprotocol.MaxStopMessageBytes:
		return RuntimeStop{}, fmt.Errorf("%w: message must be at most %d bytes", ErrInvalidRequest, siteprotocol.MaxStopMessageBytes)
	}
	at := s.clock.Now()
	stop := RuntimeStop{
		Environment: environment, InstallationID: installation, Reason: r.Reason, Sequence: r.Sequence,
		Version: r.RuntimeVersion, Message: r.Message, StoppedAt: at,
	}
	err := s.store.Locked(ctx, environment, at, func(tx LockedStream) error {
		st, err := tx.State(ctx)
		if err != nil {
			return err
		}
		if err := domain.CheckInstallation(st.InstallationID, installation); err != nil {
			return err
		}
		return tx.RecordStop(ctx, stop)
	})
	if err != nil {
		return RuntimeStop{}, fmt.Errorf("record the stop of stream %s: %w", environment, err)
	}
	return stop, nil
}

// clearStop deletes environment's stop report once a binding pull was
// admitted: the Runtime works again.
func (s *Streams) clearStop(ctx context.Context, environment string) error {
	if _, err := s.store.ClearRuntimeStop(ctx, environment); err != nil {
		return fmt.Errorf("clear the stop of stream %s: %w", environment, err)
	}
	return nil
}

// EnvironmentView is what an operator reads of one environment
// (docs/operations.md#operator-reads): its configuration, its stream's
// position and binding, the last Runtime version (and time of that pull)
// and the stop on record.
type EnvironmentView struct {
	Environment domain.Environment
	State       domain.StreamState
	// Version is the last Runtime version recorded; HasVersion false when
	// none was.
	Version    RuntimeVersion
	HasVersion bool
	// Stop is the stop report on record; Stopped false when none is.
	Stop    RuntimeStop
	Stopped bool
}

// Lag is how many commands the stream holds that its Runtime has not
// acknowledged: head minus acknowledged sequence.
func (v EnvironmentView) Lag() int64 { return v.State.HeadSequence - v.State.AcknowledgedSequence }

// EnvironmentViews returns the view of every configured environment, in ID
// order.
func (s *Streams) EnvironmentViews(ctx context.Context) ([]EnvironmentView, error) {
	ids := s.envs.IDs()
	out := make([]EnvironmentView, 0, len(ids))
	for _, id := range ids {
		v, err := s.EnvironmentView(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// EnvironmentView returns the view of environment id.
func (s *Streams) EnvironmentView(ctx context.Context, id string) (EnvironmentView, error) {
	env, err := s.Environment(id)
	if err != nil {
		return EnvironmentView{}, err
	}
	v := EnvironmentView{Environment: env}
	if v.State, err = s.store.State(ctx, id); err != nil {
		return EnvironmentView{}, err
	}
	if v.Version, v.HasVersion, err = s.store.RuntimeVersion(ctx, id); err != nil {
		return EnvironmentView{}, err
	}
	if v.Stop, v.Stopped, err = s.store.RuntimeStop(ctx, id); err != nil {
		return EnvironmentView{}, err
	}
	return v, nil
}

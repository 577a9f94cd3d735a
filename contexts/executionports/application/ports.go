// Package application holds the execution_ports services — the Site
// protocol's server side (Streams) and capacity planning (Planner) — and
// the ports they use: the stream store, the configured environments and the
// owner ports ProjectResources, MemberAccounts and MemberBindings
// (docs/execution-ports.md). Adaptors implement the ports; nothing here imports
// a driver, Huma, zap or another context.
package application

import (
	"context"
	"errors"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
)

// Clock reads the time recorded on appends, acknowledgements and bindings.
type Clock interface {
	Now() time.Time
}

// Environments is the configured set of execution environments
// (environments.yaml). The set in use can be replaced while the process
// runs (docs/operations.md#configuration-reloads): each call reads the
// version in use at that moment.
type Environments interface {
	// Environment returns the environment with id, or false.
	Environment(id string) (domain.Environment, bool)
	// IDs returns the configured environment IDs, sorted.
	IDs() []string
}

// NewCommand is a command ready to append: its ID, its digest and the
// canonical (JCS) object the digest covers, as siteprotocol.ParseAppend
// returns them.
type NewCommand struct {
	ID string
	// Operation is the command's operation as appended (stored beside it,
	// so the results of reads can be found: ExpireResults).
	Operation string
	Digest    string
	Canonical []byte
}

// Appended is the outcome of an append: the command's sequence and digest,
// and whether this call created it (false for an idempotent retry).
type Appended struct {
	ID       string
	Sequence int64
	Digest   string
	Created  bool
}

// StoredCommand is a command as stored: its sequence, digest and canonical
// object without sequence and digest (siteprotocol.EncodeStored serves it).
type StoredCommand struct {
	Sequence  int64
	Digest    string
	Canonical []byte
}

// ReceivedResult is a result as received: its identity and its exact bytes.
type ReceivedResult struct {
	domain.ReceivedResult
	// Bytes are the request body exactly as sent; they are stored unchanged.
	Bytes []byte
}

// Acknowledgement is the answer to a recorded (or exactly replayed) result.
type Acknowledgement struct {
	Sequence     int64
	ResultDigest string
	// Replayed is true when the result was already recorded and nothing
	// changed.
	Replayed bool
}

// CommandRecord is Execution's read of one command.
type CommandRecord struct {
	Command    StoredCommand
	AppendedAt time.Time
	// Result holds the recorded result's exact bytes; nil until
	// acknowledged, and nil again once its content expired.
	Result []byte
	// ResultDigest is the recorded result's digest; "" until acknowledged.
	// It stays when the content expires.
	ResultDigest   string
	AcknowledgedAt time.Time
	// ResultExpiredAt is when the result's content was dropped
	// (ExpireReadResults); zero while it is held.
	ResultExpiredAt time.Time
}

// RuntimeVersion is what a Runtime's pull said about its build: the last
// one per environment is kept (docs/execution-ports.md#runtime-versions).
type RuntimeVersion struct {
	Environment string
	// InstallationID is the installation that pulled.
	InstallationID string
	// Version is the pull's Metallo-Runtime-Version
	// (siteprotocol.RuntimeVersionHeader, at most
	// siteprotocol.MaxRuntimeVersionBytes visible ASCII characters), ""
	// when the pull carried none (a Runtime older than the header).
	Version string
	// PulledAt is the time of the pull that carried it, refreshed at
	// least every RuntimeVersionRefresh while the Runtime pulls.
	PulledAt time.Time
}

// Binding actions recorded in a stream's binding history.
const (
	// BindingBound: the first installation that used an unbound stream.
	BindingBound = "bound"
	// BindingRebound: an operator's explicit rebind to an installation.
	BindingRebound = "rebound"
	// BindingUnbound: an operator's explicit unbind ({"unbind": true}); the
	// next installation that pulls binds the stream.
	BindingUnbound = "unbound"
)

// Binding is one entry of a stream's binding history: who bound the stream
// to which installation, when and why.
type Binding struct {
	Environment            string
	Action                 string
	InstallationID         string
	PreviousInstallationID string
	Principal              string
	Reason                 string
	RecordedAt             time.Time
}

// StreamStore holds the command streams (one per environment) in this
// context's own database. Every write is one transaction: Append on its
// own; binding, acknowledgement and rebind inside Locked (the flows are
// BindStream, ApplyResult and RebindStream, shared by every engine).
// Errors wrap the domain errors named below, or ErrUnavailable when the
// database cannot be reached, or are other infrastructure errors.
type StreamStore interface {
	// Append adds c to environment's stream with the next sequence (gapless
	// and unique under concurrent appenders, across processes). A command
	// ID already stored is decided by domain.DecideRetry: the same content
	// returns its original sequence with Created false; other content or
	// another stream is domain.ErrConflictingRetry.
	Append(ctx context.Context, environment string, c NewCommand, at time.Time) (Appended, error)
	// CommandsAfter returns up to limit commands with sequence > after,
	// oldest first, stopping before the sum of their canonical sizes would
	// exceed maxBytes — but always the first (so memory stays bounded by
	// maxBytes plus one command while every command stays reachable).
	CommandsAfter(ctx context.Context, environment string, after int64, limit int, maxBytes int64) ([]StoredCommand, error)
	// State returns the stream's state (zero positions for a stream never
	// used).
	State(ctx context.Context, environment string) (domain.StreamState, error)
	// Command returns the command with id in environment's stream, or
	// domain.ErrUnknownCommand.
	Command(ctx context.Context, environment, id string) (CommandRecord, error)
	// Locked runs fn in one transaction that holds environment's stream
	// lock (creating the stream's row, as of at, if it was never used). It
	// commits when fn returns nil and rolls back otherwise, returning fn's
	// error: a refused result or binding changes nothing.
	Locked(ctx context.Context, environment string, at time.Time, fn func(LockedStream) error) error
	// Bindings returns the stream's binding history, oldest first.
	Bindings(ctx context.Context, environment string) ([]Binding, error)
	// RecordRuntimeVersion stores v as the last Runtime version of
	// v.Environment's stream, whose row exists (the pull that carried it
	// bound the stream), unless the stored one was pulled later: a slower
	// pull never replaces a newer one
	// (docs/execution-ports.md#runtime-versions).
	RecordRuntimeVersion(ctx context.Context, v RuntimeVersion) error
	// RuntimeVersion returns the last Runtime version recorded for
	// environment's stream, false when none was.
	RuntimeVersion(ctx context.Context, environment string) (RuntimeVersion, bool, error)
	// RuntimeStop returns the stop environment's Runtime last reported,
	// false when none is on record (never reported, or cleared by a
	// binding pull since; docs/execution-ports.md#runtime-stops).
	RuntimeStop(ctx context.Context, environment string) (RuntimeStop, bool, error)
	// ClearRuntimeStop deletes environment's stop report, if any; it
	// reports whether there was one.
	ClearRuntimeStop(ctx context.Context, environment string) (bool, error)
	// CommandPage returns up to q.Limit commands of environment's stream
	// of operation q.Operation ("" for any): with q.Before > 0 those
	// before it, newest first; else those after q.After, oldest first
	// (docs/operations.md#operator-reads).
	CommandPage(ctx context.Context, environment string, q PageQuery) ([]CommandRow, error)
	// ExpireResults drops the content of at most limit results, of every
	// stream, of commands appended with operation and acknowledged at or
	// before acknowledgedBefore, oldest first, recording at as their
	// expiry; their digests and acknowledgement times stay. It returns how
	// many it dropped (fewer than limit: none is left); errors wrap
	// ErrUnavailable when the database cannot be reached
	// (docs/execution-ports.md#read-results-retention).
	ExpireResults(ctx context.Context, operation string, acknowledgedBefore, at time.Time, limit int) (int, error)
}

// ResourcesOwner is the context that owns Project allocations (the owner
// behind ProjectResources), named in planning's "unavailable" answer.
const ResourcesOwner = "resource_provisioning"

// ErrResourceLookupUnavailable is wrapped by owner adaptors when the owner
// cannot be read (unreachable, failing, undecodable answer). Planning
// answers "unavailable", never a guess.
var ErrResourceLookupUnavailable = errors.New("resource lookup unavailable")

// ProjectResources is the owner port for a Project's allocations
// (docs/execution-ports.md#owner-ports). Its owner is resource_provisioning.
type ProjectResources interface {
	// ProjectAllocations returns the allocations of projectID at site, read
	// live (freshness judged at read time). It returns an error wrapping
	// ErrResourceLookupUnavailable when the owner cannot be read.
	ProjectAllocations(ctx context.Context, projectID, site string) ([]domain.Allocation, error)
}

// The member ports (MemberAccounts, MemberBindings and their answers) are
// declared in members.go.

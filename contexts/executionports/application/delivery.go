package application

import (
	"context"
	"crypto/sha1" //nolint:gosec // UUIDv5 (RFC 9562 §5.5) is defined on SHA-1; not a security use
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Delivery of the desired member bindings to the Runtimes
// (docs/execution-ports.md#delivery-of-member-bindings): each environment's
// desired bindings, read from the MemberBindings owner port, are appended
// to its stream as bind-member / retire-member, once per binding revision,
// in revision order per binding, with bytes persisted before the append.

// DeliveryNamespace is the UUID namespace of delivery command IDs: a
// command's ID is the UUIDv5 of "<environment>/<binding>/<revision>", so
// every deliverer derives the same ID for one binding revision.
var DeliveryNamespace = [16]byte{0x6e, 0x0b, 0x3f, 0x52, 0x8c, 0x1d, 0x4a, 0x7e, 0x9b, 0x25, 0xd3, 0x40, 0x5f, 0x61, 0x87, 0xa9}

// DeliveryCommandID is the command ID of binding's revision at environment.
func DeliveryCommandID(environment, bindingID string, revision int64) string {
	h := sha1.New() //nolint:gosec // see import
	h.Write(DeliveryNamespace[:])
	_, _ = fmt.Fprintf(h, "%s/%s/%d", environment, bindingID, revision)
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = (u[6] & 0x0f) | 0x50
	u[8] = (u[8] & 0x3f) | 0x80
	b := hex.EncodeToString(u[:])
	return b[0:8] + "-" + b[8:12] + "-" + b[12:16] + "-" + b[16:20] + "-" + b[20:32]
}

// Delivery is one binding revision's delivery: its command, persisted
// before it is appended, and what became of it.
type Delivery struct {
	Environment string
	BindingID   string
	Revision    int64
	Generation  int64
	// Operation is bind-member or retire-member.
	Operation siteprotocol.Operation
	// CommandID, Digest and Canonical are the command exactly as appended
	// (its JCS form without sequence and digest).
	CommandID string
	Digest    string
	Canonical []byte
	PlannedAt time.Time
	// Sequence is the stream sequence it was appended at (0 until then).
	Sequence   int64
	AppendedAt time.Time
	// Outcome and Reason are the Runtime's result once acknowledged;
	// AppliedRevision is the result's detail.applied_revision when it
	// succeeded (0 otherwise).
	Outcome         string
	Reason          string
	AppliedRevision int64
	AcknowledgedAt  time.Time
}

// DeliveryStore holds the deliveries in this context's database. Errors
// wrap ErrUnavailable when the database cannot be reached.
type DeliveryStore interface {
	// PlanDelivery stores d unless a delivery of the same (environment,
	// binding, revision) or command ID is stored, and returns the stored
	// one: the first planner's bytes win, so every retry and every other
	// deliverer appends the same bytes.
	PlanDelivery(ctx context.Context, d Delivery) (Delivery, error)
	// LatestDeliveries returns the newest-revision delivery of every
	// binding of environment, by binding ID.
	LatestDeliveries(ctx context.Context, environment string) ([]Delivery, error)
	// MarkAppended records the sequence d was appended at (once).
	MarkAppended(ctx context.Context, environment, bindingID string, revision, sequence int64, at time.Time) error
	// MarkAcknowledged records the Runtime's result of d (once).
	MarkAcknowledged(ctx context.Context, environment, bindingID string, revision int64, outcome, reason string, appliedRevision int64, at time.Time) error
	// WithDeliveryLock runs fn while holding environment's delivery lock
	// (one deliverer per environment across processes) and reports whether
	// it did; false means another deliverer holds it and fn did not run.
	WithDeliveryLock(ctx context.Context, environment string, fn func(ctx context.Context) error) (bool, error)
}

// DefaultDeliveryInterval is the default period of the full reconcile of
// every environment's bindings.
const DefaultDeliveryInterval = 5 * time.Second

// Deliverer delivers member bindings to the environments' streams: every
// environment configured at the time of each pass (Streams.EnvironmentIDs),
// so an environment added to the configuration is delivered to from the
// next full reconcile, and a removed one no longer.
type Deliverer struct {
	store   DeliveryStore
	streams *Streams
	owner   MemberBindings
	clock   Clock
}

// NewDeliverer returns the deliverer of the bindings of streams'
// environments.
func NewDeliverer(store DeliveryStore, streams *Streams, owner MemberBindings, clock Clock) *Deliverer {
	return &Deliverer{store: store, streams: streams, owner: owner, clock: clock}
}

// Environments returns the environments d delivers to now, in ID order.
func (d *Deliverer) Environments() []string { return d.streams.EnvironmentIDs() }

// Delivers reports whether d delivers to environment now.
func (d *Deliverer) Delivers(environment string) bool {
	_, err := d.streams.Environment(environment)
	return err == nil
}

// DeliveryPass is what one pass over an environment did.
type DeliveryPass struct {
	Environment string
	// Skipped: another deliverer held the environment's lock.
	Skipped  bool
	Appended int
}

// ReconcileAll runs Reconcile for every environment, returning the joined
// errors of those that failed.
func (d *Deliverer) ReconcileAll(ctx context.Context) ([]DeliveryPass, error) {
	var errs []error
	var passes []DeliveryPass
	for _, env := range d.Environments() {
		p, err := d.Reconcile(ctx, env)
		if err != nil {
			errs = append(errs, fmt.Errorf("deliver bindings of %s: %w", env, err))
		}
		passes = append(passes, p)
	}
	return passes, errors.Join(errs...)
}

// Reconcile brings environment's stream up to its desired bindings under
// its delivery lock: a delivery planned but not appended (a crash between
// the two) is appended first with its stored bytes; then every binding
// whose desired revision is newer than its newest delivery and is
// deliverable is planned and appended — bind-member for a ready binding
// with its account's UID and namespace, retire-member for a retired
// binding once bound; a pending binding is not delivered. Acknowledged
// results are recorded. Errors wrap ErrResourceLookupUnavailable when the
// owner cannot be read, or the store's and the stream's errors.
func (d *Deliverer) Reconcile(ctx context.Context, environment string) (DeliveryPass, error) {
	pass := DeliveryPass{Environment: environment}
	ran, err := d.store.WithDeliveryLock(ctx, environment, func(ctx context.Context) error {
		n, err := d.reconcileLocked(ctx, environment)
		pass.Appended = n
		return err
	})
	pass.Skipped = !ran && err == nil
	return pass, err
}

func (d *Deliverer) reconcileLocked(ctx context.Context, environment string) (int, error) {
	latest, err := d.store.LatestDeliveries(ctx, environment)
	if err != nil {
		return 0, err
	}
	byBinding := make(map[string]Delivery, len(latest))
	appended := 0
	for _, l := range latest {
		if l.Sequence == 0 {
			if err := d.append(ctx, l); err != nil {
				return appended, err
			}
			appended++
			l.Sequence = 1 // appended; the exact sequence is stored
		}
		byBinding[l.BindingID] = l
	}
	desired, err := d.owner.DesiredBindings(ctx, environment)
	if err != nil {
		return appended, err
	}
	// A binding whose command the protocol refuses (its owner's facts do
	// not make a valid command) is reported and passed over, so it never
	// holds back the other bindings of the environment; each pass reports
	// it again until its owner's facts change.
	var undeliverable []error
	for _, b := range desired.Bindings {
		prev, delivered := byBinding[b.BindingID]
		if delivered && prev.Revision >= b.Revision {
			continue
		}
		next, ok, err := d.plan(environment, b, delivered)
		if errors.Is(err, siteprotocol.ErrInvalid) {
			undeliverable = append(undeliverable, fmt.Errorf("binding %s revision %d is not deliverable: %w", b.BindingID, b.Revision, err))
			continue
		}
		if err != nil {
			return appended, err
		}
		if !ok {
			continue
		}
		stored, err := d.store.PlanDelivery(ctx, next)
		if err != nil {
			return appended, err
		}
		if err := d.append(ctx, stored); err != nil {
			return appended, err
		}
		appended++
	}
	return appended, errors.Join(append(undeliverable, d.recordResults(ctx, environment))...)
}

// plan builds the delivery of b's revision, or false when b is not
// deliverable now: a live binding that is not ready with an account UID
// and namespace, or a retired one never bound at the Runtime.
func (d *Deliverer) plan(environment string, b MemberBinding, delivered bool) (Delivery, bool, error) {
	id := DeliveryCommandID(environment, b.BindingID, b.Revision)
	now := d.clock.Now().UTC()
	cmd := siteprotocol.Command{
		ID: id, IssuedAt: now.Format("2006-01-02T15:04:05.000000Z"),
		MemberID: b.PartyID, ProjectID: b.ProjectID,
	}
	var payload any
	switch {
	case b.Retired:
		if !delivered {
			return Delivery{}, false, nil
		}
		cmd.Operation = siteprotocol.OpRetireMember
		payload = siteprotocol.RetireMemberPayload{BindingID: b.BindingID, Generation: b.Generation}
	case b.State == "ready" && b.AccountUID != "" && b.Namespace != "":
		// The binding's own account, by its environment's backend
		// (docs/site-protocol.md#member-identity-by-backend).
		account := b.Account
		if account == "" {
			account = siteprotocol.MemberAccount(b.PartyID)
		}
		cmd.Operation = siteprotocol.OpBindMember
		payload = siteprotocol.BindMemberPayload{
			PartyID: b.PartyID, Namespace: b.Namespace, Account: account,
			BindingID: b.BindingID, Revision: b.Revision, Generation: b.Generation, AccountUID: b.AccountUID,
		}
	default:
		return Delivery{}, false, nil
	}
	p, err := json.Marshal(payload)
	if err != nil {
		return Delivery{}, false, fmt.Errorf("encode %s payload: %w", cmd.Operation, err)
	}
	cmd.Payload = p
	raw, err := json.Marshal(cmd)
	if err != nil {
		return Delivery{}, false, fmt.Errorf("encode %s: %w", cmd.Operation, err)
	}
	env, err := d.streams.Environment(environment)
	if err != nil {
		return Delivery{}, false, err
	}
	parsed, canonical, err := siteprotocol.ParseAppendFor(raw, env.ProtocolBackend())
	if err != nil {
		return Delivery{}, false, fmt.Errorf("%s of binding %s revision %d: %w", cmd.Operation, b.BindingID, b.Revision, err)
	}
	return Delivery{
		Environment: environment, BindingID: b.BindingID, Revision: b.Revision, Generation: b.Generation,
		Operation: cmd.Operation, CommandID: id, Digest: parsed.Digest, Canonical: canonical, PlannedAt: now,
	}, true, nil
}

// append appends the stored delivery's exact bytes and records the
// sequence.
func (d *Deliverer) append(ctx context.Context, dl Delivery) error {
	a, err := d.streams.Append(ctx, dl.Environment, dl.Canonical)
	if err != nil {
		return fmt.Errorf("append %s of binding %s revision %d: %w", dl.Operation, dl.BindingID, dl.Revision, err)
	}
	return d.store.MarkAppended(ctx, dl.Environment, dl.BindingID, dl.Revision, a.Sequence, d.clock.Now())
}

// recordResults records the Runtime's results of the newest deliveries
// that are appended and not yet acknowledged here.
func (d *Deliverer) recordResults(ctx context.Context, environment string) error {
	latest, err := d.store.LatestDeliveries(ctx, environment)
	if err != nil {
		return err
	}
	for _, l := range latest {
		if l.Sequence == 0 || !l.AcknowledgedAt.IsZero() {
			continue
		}
		rec, err := d.streams.Command(ctx, environment, l.CommandID)
		if err != nil {
			return err
		}
		if rec.Result == nil {
			continue
		}
		r, err := siteprotocol.ParseResult(rec.Result)
		if err != nil {
			return fmt.Errorf("result of %s: %w", l.CommandID, err)
		}
		var applied int64
		if r.Outcome == siteprotocol.OutcomeSucceeded {
			if det, err := siteprotocol.DecodeDetail[siteprotocol.BindingDetail](r); err == nil {
				applied = det.AppliedRevision
			}
		}
		if err := d.store.MarkAcknowledged(ctx, environment, l.BindingID, l.Revision, string(r.Outcome), string(r.Reason), applied, rec.AcknowledgedAt); err != nil {
			return err
		}
	}
	return nil
}

// BindingDeliveryState is one binding's desired and delivered state.
type BindingDeliveryState struct {
	BindingID string
	PartyID   string
	ProjectID string
	// DesiredRevision and DesiredState are the owner's, live (0 and "" for
	// a binding the owner no longer lists).
	DesiredRevision int64
	DesiredState    string
	// Delivered is the newest delivery (nil when none).
	Delivered *Delivery
}

// DeliveryStates answers, per binding of environment, the desired revision
// (read live from the owner) and the newest delivery with its applied
// revision, in binding-ID order. Errors wrap ErrResourceLookupUnavailable
// or the store's.
func (d *Deliverer) DeliveryStates(ctx context.Context, environment string) ([]BindingDeliveryState, error) {
	if _, err := d.streams.Environment(environment); err != nil {
		return nil, err
	}
	desired, err := d.owner.DesiredBindings(ctx, environment)
	if err != nil {
		return nil, err
	}
	latest, err := d.store.LatestDeliveries(ctx, environment)
	if err != nil {
		return nil, err
	}
	states := map[string]*BindingDeliveryState{}
	for _, b := range desired.Bindings {
		states[b.BindingID] = &BindingDeliveryState{BindingID: b.BindingID, PartyID: b.PartyID, ProjectID: b.ProjectID, DesiredRevision: b.Revision, DesiredState: b.State}
	}
	for i := range latest {
		s, ok := states[latest[i].BindingID]
		if !ok {
			s = &BindingDeliveryState{BindingID: latest[i].BindingID}
			states[latest[i].BindingID] = s
		}
		s.Delivered = &latest[i]
	}
	out := make([]BindingDeliveryState, 0, len(states))
	for _, s := range states {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].BindingID < out[j].BindingID })
	return out, nil
}

// ErrDeliveryConflict is wrapped when a stored delivery disagrees with the
// planned one on its key (a binding revision under another command ID):
// never appended over.
var ErrDeliveryConflict = errors.New("delivery conflict")

// CheckPlanned returns stored, the delivery a store holds for planned's
// command ID or binding revision, or an error wrapping ErrDeliveryConflict
// when the two name another binding revision or command. Both stores'
// PlanDelivery answer through it.
func CheckPlanned(planned, stored Delivery) (Delivery, error) {
	if stored.Environment != planned.Environment || stored.BindingID != planned.BindingID ||
		stored.Revision != planned.Revision || stored.CommandID != planned.CommandID {
		return Delivery{}, fmt.Errorf("%w: command %s is stored for %s binding %s revision %d as %s",
			ErrDeliveryConflict, planned.CommandID, stored.Environment, stored.BindingID, stored.Revision, stored.CommandID)
	}
	return stored, nil
}

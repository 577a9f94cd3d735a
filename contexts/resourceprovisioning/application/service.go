package application

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// DefaultFreshness is how long an allocation counts as observed after its
// last accepted report (docs/resource-provisioning.md#freshness).
const DefaultFreshness = 15 * time.Minute

// DefaultClockSkew is how far a report's observed_at may lie beyond the
// server clock (the agent's and the server's clocks differ a little).
const DefaultClockSkew = 5 * time.Minute

// Page sizes of the snapshot and the change feed.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
)

// Config configures the service.
type Config struct {
	// WaldurInstance is the Waldur instance URL whose Project bindings
	// resolve allocations; bindings naming another instance are ignored.
	WaldurInstance string
	// Freshness bounds how old last_seen_at may be for an allocation to
	// read as fresh (DefaultFreshness when zero).
	Freshness time.Duration
	// ClockSkew bounds how far a report's observed_at may lie beyond the
	// server clock (DefaultClockSkew when zero). A later observed_at is
	// refused: accepted, it would make every later report stale and lock
	// the allocation until the agent's clock caught up.
	ClockSkew time.Duration
	// Environments gives each execution environment's Site (a Party's
	// site binding names an environment; an agent reports for a Site). Only
	// a Site's own environments are visible to its agent's account report
	// and lookup (docs/resource-provisioning.md#native-member-accounts).
	// Nil: no environment is configured.
	Environments EnvironmentSites
}

// Service is Resource Provisioning's application service: report and event
// intake, and the reads. It is safe for concurrent use.
type Service struct {
	store    Store
	clock    Clock
	observer Observer
	cfg      Config
}

// NewService returns a Service. It fails when cfg.WaldurInstance is empty
// or cfg.Freshness or cfg.ClockSkew is negative.
func NewService(store Store, clock Clock, observer Observer, cfg Config) (*Service, error) {
	if cfg.WaldurInstance == "" {
		return nil, errors.New("the Waldur instance is required")
	}
	if cfg.Freshness < 0 {
		return nil, fmt.Errorf("freshness %s must not be negative", cfg.Freshness)
	}
	if cfg.ClockSkew < 0 {
		return nil, fmt.Errorf("clock skew %s must not be negative", cfg.ClockSkew)
	}
	if cfg.Freshness == 0 {
		cfg.Freshness = DefaultFreshness
	}
	if cfg.ClockSkew == 0 {
		cfg.ClockSkew = DefaultClockSkew
	}
	return &Service{store: store, clock: clock, observer: observer, cfg: cfg}, nil
}

// Freshness returns the configured freshness bound.
func (s *Service) Freshness() time.Duration { return s.cfg.Freshness }

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Microsecond) }

// ReportResult is the outcome of one accepted report.
type ReportResult struct {
	ProviderResourceID string
	AllocationID       string
	// Outcome is created, changed, renewed or duplicate.
	Outcome   string
	Revision  int64
	Lifecycle string
}

// SubmitReports applies a batch of 1–100 reports from site's agent in one
// transaction, all or nothing (docs/resource-provisioning.md#report-intake). Results are in input
// order. Errors:
//   - *domain.ValidationError (nothing stored) for an empty or oversized
//     batch or any invalid report, listing every problem, including an
//     observed_at beyond the server clock plus the configured clock skew;
//   - *domain.ConflictError (nothing stored) when any report is stale,
//     conflicts with an accepted one, or follows a retirement, listing every
//     refused report;
//   - an error wrapping ErrUnavailable when the store cannot be reached.
//
// Reports are applied in allocation-ID order (reports of one allocation keep
// their input order), so concurrent batches lock rows in one order.
func (s *Service) SubmitReports(ctx context.Context, site string, reports []domain.Report) ([]ReportResult, error) {
	now := s.now()
	if err := s.validateBatch(reports, now); err != nil {
		return nil, err
	}
	normal := make([]domain.Report, len(reports))
	order := make([]int, len(reports))
	ids := make([]string, len(reports))
	for i, r := range reports {
		normal[i] = r.Normalize()
		order[i] = i
		ids[i] = domain.AllocationID(site, r.ProviderResourceID)
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(ids[a], ids[b]) })
	var results []ReportResult
	err := s.store.InReportTx(ctx, func(ctx context.Context, tx ReportTx) error {
		results = make([]ReportResult, len(normal))
		refused := make([]*domain.Refusal, len(normal))
		var (
			events []domain.AllocationChanged
			moved  []movedAllocation
		)
		for _, i := range order {
			res, ev, prev, refusal, err := s.applyReport(ctx, tx, site, normal[i], now)
			if err != nil {
				return err
			}
			if refusal != nil {
				refusal.Location = fmt.Sprintf("body.reports[%d]", i)
				refused[i] = refusal
				continue
			}
			results[i] = res
			if ev != nil {
				events = append(events, *ev)
				moved = append(moved, movedAllocation{prev: prev, next: ev})
			}
		}
		var refusals []domain.Refusal
		for _, r := range refused {
			if r != nil {
				refusals = append(refusals, *r)
			}
		}
		if len(refusals) > 0 {
			return &domain.ConflictError{Refusals: refusals}
		}
		if len(events) == 0 {
			return nil
		}
		if err := s.rederiveAccountBindings(ctx, tx, moved, now); err != nil {
			return err
		}
		return tx.AppendChanges(ctx, events, now)
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// validateBatch checks the batch size, each report, and that no
// observed_at lies beyond now plus the clock skew.
func (s *Service) validateBatch(reports []domain.Report, now time.Time) error {
	if len(reports) == 0 || len(reports) > domain.MaxReportsPerBatch {
		return domain.Invalid(domain.Problem{Location: "body.reports", Message: fmt.Sprintf("send 1 to %d reports", domain.MaxReportsPerBatch), Value: len(reports)})
	}
	latest := now.Add(s.cfg.ClockSkew)
	var problems []domain.Problem
	for i, r := range reports {
		loc := fmt.Sprintf("body.reports[%d]", i)
		problems = append(problems, r.Validate(loc)...)
		if r.ObservedAt.After(latest) {
			problems = append(problems, domain.Problem{
				Location: loc + ".observed_at",
				Message:  fmt.Sprintf("lies beyond the server clock (%s) plus the allowed clock skew of %s; check the agent's clock", now.Format(time.RFC3339), s.cfg.ClockSkew),
				Value:    r.ObservedAt.UTC().Format(time.RFC3339Nano),
			})
		}
	}
	return domain.Invalid(problems...)
}

// applyReport decides one report inside the transaction and writes its
// effect; it returns the event of a material change and the allocation's
// facts before it (nil when it was created).
func (s *Service) applyReport(ctx context.Context, tx ReportTx, site string, r domain.Report, now time.Time) (ReportResult, *domain.AllocationChanged, *domain.Facts, *domain.Refusal, error) {
	id := domain.AllocationID(site, r.ProviderResourceID)
	projectID, err := s.resolve(ctx, tx, r.ProviderProjectID)
	if err != nil {
		return ReportResult{}, nil, nil, nil, err
	}
	cur, err := tx.LockAllocation(ctx, id)
	if err != nil {
		return ReportResult{}, nil, nil, nil, err
	}
	d, refusal := domain.Decide(cur, site, r, projectID, now)
	if refusal != nil {
		return ReportResult{}, nil, nil, refusal, nil
	}
	switch d.Outcome {
	case domain.OutcomeCreated:
		inserted, err := tx.InsertAllocation(ctx, d.Next)
		if err != nil {
			return ReportResult{}, nil, nil, nil, err
		}
		if !inserted {
			// A concurrent transaction created it and has committed:
			// decide again against its row, now locked.
			if cur, err = tx.LockAllocation(ctx, id); err != nil {
				return ReportResult{}, nil, nil, nil, err
			}
			if cur == nil {
				return ReportResult{}, nil, nil, nil, fmt.Errorf("allocation %s neither inserted nor found", id)
			}
			if d, refusal = domain.Decide(cur, site, r, projectID, now); refusal != nil {
				return ReportResult{}, nil, nil, refusal, nil
			}
			if err := s.writeExisting(ctx, tx, d); err != nil {
				return ReportResult{}, nil, nil, nil, err
			}
		}
	default:
		if err := s.writeExisting(ctx, tx, d); err != nil {
			return ReportResult{}, nil, nil, nil, err
		}
	}
	res := ReportResult{ProviderResourceID: r.ProviderResourceID, AllocationID: id, Outcome: d.Outcome, Revision: d.Next.Revision, Lifecycle: d.Next.Lifecycle}
	if !d.Material() {
		return res, nil, nil, nil, nil
	}
	if err := tx.InsertReceipt(ctx, domain.NewReceipt(d.Next, r)); err != nil {
		return ReportResult{}, nil, nil, nil, err
	}
	ev := domain.NewAllocationChanged(d.Next)
	var prev *domain.Facts
	if cur != nil {
		prev = &cur.Facts
	}
	return res, &ev, prev, nil, nil
}

// writeExisting stores the decision about an existing, locked allocation.
func (s *Service) writeExisting(ctx context.Context, tx ReportTx, d domain.Decision) error {
	switch d.Outcome {
	case domain.OutcomeChanged:
		return tx.UpdateAllocation(ctx, d.Next)
	case domain.OutcomeRenewed:
		return tx.RenewAllocation(ctx, d.Next.ID, d.Next.ObservedAt, d.Next.LastSeenAt)
	}
	return nil
}

// resolve maps a Waldur Project to the one canonical Project that claims it
// at the configured instance; "" when none or several do
// (docs/resource-provisioning.md#the-project-view: nothing guesses).
func (s *Service) resolve(ctx context.Context, tx ReportTx, providerProjectID string) (string, error) {
	claims, err := tx.ProviderProjectClaims(ctx, s.cfg.WaldurInstance, providerProjectID, 2)
	if err != nil {
		return "", err
	}
	if len(claims) != 1 {
		return "", nil
	}
	return claims[0], nil
}

// EventResult is the outcome of one Beto event.
type EventResult struct {
	EventID string
	// Outcome is applied, ignored (not newer than the view) or duplicate.
	Outcome string
}

// ReceiveBetoEvent records one Beto event and applies it to the Project or
// Party binding view (docs/resource-provisioning.md#the-project-view): a receipt per event_id; the
// same event_id with identical content is a duplicate (no-op); an event
// whose revision is not newer than the view's is recorded and ignored.
// Events never rewrite allocations: a report resolves its Project when it
// arrives. Errors:
//   - *domain.ValidationError for an invalid event or an unknown type;
//   - *domain.ConflictError (reason event_conflict) when the event_id was
//     received with other content; the observer is told;
//   - an error wrapping ErrUnavailable when the store cannot be reached.
func (s *Service) ReceiveBetoEvent(ctx context.Context, ev domain.BetoEvent) (EventResult, error) {
	if err := domain.Invalid(ev.Validate("body")...); err != nil {
		return EventResult{}, err
	}
	ev = ev.Normalize()
	now := s.now()
	digest := ev.ContentDigest()
	var (
		result    EventResult
		conflicts []domain.BindingConflict
	)
	err := s.store.InEventTx(ctx, func(ctx context.Context, tx EventTx) error {
		conflicts = nil
		inserted, err := tx.InsertEventReceipt(ctx, domain.EventReceipt{
			EventID: ev.EventID, Type: ev.Type, ContentDigest: digest, Outcome: domain.EventIgnored,
			OccurredAt: ev.OccurredAt, ReceivedAt: now,
		})
		if err != nil {
			return err
		}
		if !inserted {
			prior, err := tx.EventReceipt(ctx, ev.EventID)
			if err != nil {
				return err
			}
			if prior.ContentDigest != digest {
				return &domain.ConflictError{Refusals: []domain.Refusal{{
					Reason: domain.ReasonEventConflict, Location: "body.event_id",
					Detail: fmt.Sprintf("event %s was received at %s with other content", ev.EventID, prior.ReceivedAt.Format(time.RFC3339)),
				}}}
			}
			result = EventResult{EventID: ev.EventID, Outcome: domain.EventDuplicate}
			return nil
		}
		applied, err := s.applyEvent(ctx, tx, ev, now)
		if err != nil {
			return err
		}
		result = EventResult{EventID: ev.EventID, Outcome: domain.EventIgnored}
		if !applied {
			return nil
		}
		result.Outcome = domain.EventApplied
		if ev.Project != nil {
			if conflicts, err = s.conflictsOf(ctx, tx, ev.Project); err != nil {
				return err
			}
		}
		return tx.SetEventOutcome(ctx, ev.EventID, domain.EventApplied)
	})
	var conflict *domain.ConflictError
	if errors.As(err, &conflict) {
		s.observer.EventConflict(ctx, ev.EventID, ev.Type)
	}
	if err != nil {
		return EventResult{}, err
	}
	for _, c := range conflicts {
		s.observer.BindingConflict(ctx, c)
	}
	return result, nil
}

// applyEvent applies an event to its view and derives the member bindings
// it may move (docs/resource-provisioning.md#runtime-member-bindings).
func (s *Service) applyEvent(ctx context.Context, tx EventTx, ev domain.BetoEvent, now time.Time) (bool, error) {
	var keys []domain.BindingKey
	if p := ev.Project; p != nil {
		applied, err := tx.UpsertProject(ctx, domain.ProjectView{ProjectID: p.ID, Revision: p.Revision, State: p.State, UpdatedAt: now})
		if err != nil || !applied {
			return false, err
		}
		if err := tx.ReplaceProjectBindings(ctx, p.ID, p.WaldurBindings()); err != nil {
			return false, err
		}
		if keys, err = s.applyMemberships(ctx, tx, p); err != nil {
			return false, err
		}
	} else {
		applied, k, err := s.applyPartyBinding(ctx, tx, *ev.Binding, ev.OccurredAt, now)
		if err != nil || !applied {
			return false, err
		}
		keys = k
	}
	_, err := s.deriveBindings(ctx, tx, keys, nil, now)
	return true, err
}

// conflictsOf returns the provider Projects of p now claimed by several
// canonical Projects.
func (s *Service) conflictsOf(ctx context.Context, tx EventTx, p *domain.ProjectChanged) ([]domain.BindingConflict, error) {
	var out []domain.BindingConflict
	for _, b := range p.WaldurBindings() {
		claims, err := tx.ProviderProjectClaims(ctx, b.Instance, b.ExternalID, 0)
		if err != nil {
			return nil, err
		}
		if len(claims) > 1 {
			out = append(out, domain.BindingConflict{Instance: b.Instance, ProviderProjectID: b.ExternalID, ProjectIDs: claims})
		}
	}
	return out, nil
}

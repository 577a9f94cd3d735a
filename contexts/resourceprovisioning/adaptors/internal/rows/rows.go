// Package rows converts Resource Provisioning's domain values to and from
// the column encodings both store adaptors share: limits and reasons as JSON
// objects and arrays, applied limits as NULL when absent, times in UTC with
// microsecond precision (SQLite keeps them as INTEGER microseconds since the
// Unix epoch).
package rows

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// Allocation is an allocations row with engine-neutral column types: JSON
// columns as bytes (Applied nil for SQL NULL) and times as time.Time.
type Allocation struct {
	ID, Site, ProviderResourceID, ProjectID, OfferingID, ProviderProjectID, NativeScope string
	Lifecycle                                                                           string
	Reasons, Configured, Applied                                                        []byte
	WaldurState                                                                         string
	Paused                                                                              bool
	Revision                                                                            int64
	ContentDigest                                                                       string
	ObservedAt, LastSeenAt                                                              time.Time
}

// FromDomain encodes a for storage.
func FromDomain(a domain.Allocation) Allocation {
	return Allocation{
		ID: a.ID, Site: a.Site, ProviderResourceID: a.ProviderResourceID, ProjectID: a.ProjectID,
		OfferingID: a.OfferingID, ProviderProjectID: a.ProviderProjectID, NativeScope: a.NativeScope,
		Lifecycle: a.Lifecycle, Reasons: mustJSON(nonNil(a.Reasons)), Configured: mustJSON(nonNilLimits(a.Configured)),
		Applied: limitsOrNull(a.Applied), WaldurState: a.WaldurState, Paused: a.Paused, Revision: a.Revision,
		ContentDigest: a.ContentDigest, ObservedAt: a.ObservedAt.UTC(), LastSeenAt: a.LastSeenAt.UTC(),
	}
}

// ToDomain decodes a stored row.
func (r Allocation) ToDomain() (domain.Allocation, error) {
	a := domain.Allocation{
		ID: r.ID, Site: r.Site, Revision: r.Revision, ContentDigest: r.ContentDigest,
		ObservedAt: r.ObservedAt.UTC(), LastSeenAt: r.LastSeenAt.UTC(),
		Facts: domain.Facts{
			ProjectID: r.ProjectID, ProviderResourceID: r.ProviderResourceID, OfferingID: r.OfferingID,
			ProviderProjectID: r.ProviderProjectID, NativeScope: r.NativeScope, Lifecycle: r.Lifecycle,
			WaldurState: r.WaldurState, Paused: r.Paused,
		},
	}
	if err := json.Unmarshal(r.Reasons, &a.Reasons); err != nil {
		return domain.Allocation{}, fmt.Errorf("decode reasons of allocation %s: %w", r.ID, err)
	}
	if err := json.Unmarshal(r.Configured, &a.Configured); err != nil {
		return domain.Allocation{}, fmt.Errorf("decode configured limits of allocation %s: %w", r.ID, err)
	}
	if a.Reasons == nil {
		a.Reasons = []string{}
	}
	if a.Configured == nil {
		a.Configured = domain.Limits{}
	}
	if r.Applied != nil {
		if err := json.Unmarshal(r.Applied, &a.Applied); err != nil {
			return domain.Allocation{}, fmt.Errorf("decode applied limits of allocation %s: %w", r.ID, err)
		}
		if a.Applied == nil {
			a.Applied = domain.Limits{}
		}
	}
	return a, nil
}

// ToDomainAll decodes rows converted by conv.
func ToDomainAll[T any](in []T, conv func(T) Allocation) ([]domain.Allocation, error) {
	out := make([]domain.Allocation, 0, len(in))
	for _, r := range in {
		a, err := conv(r).ToDomain()
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// Changes decodes stored outbox rows; get returns a row's position, event
// type and payload.
func Changes[T any](in []T, get func(T) (int64, string, []byte)) ([]domain.Change, error) {
	out := make([]domain.Change, 0, len(in))
	for _, r := range in {
		position, eventType, payload := get(r)
		c, err := domain.ParseChange(position, eventType, payload)
		if err != nil {
			return nil, fmt.Errorf("change %d: %w", position, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// GroupConflicts folds (instance, provider Project, Project) rows, sorted by
// the first two, into conflicts.
func GroupConflicts(n int, row func(i int) (instance, external, project string)) []domain.BindingConflict {
	var out []domain.BindingConflict
	for i := range n {
		inst, ext, proj := row(i)
		if k := len(out) - 1; k >= 0 && out[k].Instance == inst && out[k].ProviderProjectID == ext {
			out[k].ProjectIDs = append(out[k].ProjectIDs, proj)
			continue
		}
		out = append(out, domain.BindingConflict{Instance: inst, ProviderProjectID: ext, ProjectIDs: []string{proj}})
	}
	return out
}

// Binding is a member_bindings row with engine-neutral column types.
type Binding struct {
	ID, PartyID, ProjectID, Environment string
	Generation                          int64
	State                               string
	Reasons                             []byte
	SiteBindingID, SiteUsername         string
	SiteBindingGeneration               int64
	AccountUID, AllocationID, Namespace string
	// Account is the binding's native account name.
	Account   string
	Revision  int64
	ChangedAt time.Time
}

// BindingFromDomain encodes b for storage.
func BindingFromDomain(b domain.MemberBinding) Binding {
	return Binding{
		ID: b.ID, PartyID: b.PartyID, ProjectID: b.ProjectID, Environment: b.Environment, Generation: b.Generation,
		State: b.State, Reasons: mustJSON(nonNil(b.Reasons)), SiteBindingID: b.Site.ID, SiteUsername: b.Site.Username,
		SiteBindingGeneration: b.Site.Generation, AccountUID: b.Account.UID, AllocationID: b.Account.AllocationID,
		Namespace: b.Account.Namespace, Account: b.NativeName, Revision: b.Revision, ChangedAt: b.ChangedAt.UTC(),
	}
}

// ToDomain decodes a stored binding row.
func (r Binding) ToDomain() (domain.MemberBinding, error) {
	b := domain.MemberBinding{
		ID: r.ID, BindingKey: domain.BindingKey{PartyID: r.PartyID, ProjectID: r.ProjectID, Environment: r.Environment},
		Generation: r.Generation, State: r.State,
		Site:       domain.SiteBindingRef{ID: r.SiteBindingID, Username: r.SiteUsername, Generation: r.SiteBindingGeneration},
		Account:    domain.ReadyAccount{UID: r.AccountUID, AllocationID: r.AllocationID, Namespace: r.Namespace},
		NativeName: r.Account, Revision: r.Revision, ChangedAt: r.ChangedAt.UTC(),
	}
	if err := json.Unmarshal(r.Reasons, &b.Reasons); err != nil {
		return domain.MemberBinding{}, fmt.Errorf("decode reasons of member binding %s: %w", r.ID, err)
	}
	if b.Reasons == nil {
		b.Reasons = []string{}
	}
	return b, nil
}

// Micros returns t as microseconds since the Unix epoch (SQLite columns).
func Micros(t time.Time) int64 { return t.UTC().UnixMicro() }

// FromMicros is the inverse of Micros, in UTC.
func FromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

func limitsOrNull(l domain.Limits) []byte {
	if l == nil {
		return nil
	}
	return mustJSON(l)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilLimits(l domain.Limits) domain.Limits {
	if l == nil {
		return domain.Limits{}
	}
	return l
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encode %T: %v", v, err)) // string slices and int64 maps always encode
	}
	return b
}

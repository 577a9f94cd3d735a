package pgstore

import (
	"context"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/internal/rows"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/pgstore/pgdb"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// InconsistentAllocationsAfter implements application.Reader.
func (s *Store) InconsistentAllocationsAfter(ctx context.Context, afterID string, staleBefore time.Time, limit int) ([]domain.Allocation, error) {
	rs, err := s.q.InconsistentAllocationsAfter(ctx, pgdb.InconsistentAllocationsAfterParams{After: afterID, StaleBefore: staleBefore.UTC(), MaxRows: clampRows(limit)})
	if err != nil {
		return nil, dbErr("inconsistent allocations", err)
	}
	return rows.ToDomainAll(rs, toRow)
}

// AmbiguousResources implements application.Reader.
func (s *Store) AmbiguousResources(ctx context.Context) ([]domain.AmbiguousResource, error) {
	rs, err := s.q.AmbiguousResources(ctx)
	if err != nil {
		return nil, dbErr("ambiguous resources", err)
	}
	return rows.GroupAmbiguous(len(rs), func(i int) (string, string, string) { return rs[i].ProjectID, rs[i].Site, rs[i].ID }), nil
}

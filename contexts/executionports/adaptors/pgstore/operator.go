package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/pgstore/pgdb"
	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// RecordStop implements application.LockedStream: one upsert under the
// stream's lock.
func (l *locked) RecordStop(ctx context.Context, stop application.RuntimeStop) error {
	return l.q.RecordRuntimeStop(ctx, pgdb.RecordRuntimeStopParams{
		Environment: l.environment, InstallationID: stop.InstallationID, Reason: string(stop.Reason), Sequence: stop.Sequence,
		Version: stop.Version, Message: stop.Message, StoppedAt: ts(stop.StoppedAt),
	})
}

// RuntimeStop implements application.StreamStore.
func (s *Store) RuntimeStop(ctx context.Context, environment string) (application.RuntimeStop, bool, error) {
	row, err := s.q.RuntimeStop(ctx, environment)
	if errors.Is(err, pgx.ErrNoRows) {
		return application.RuntimeStop{}, false, nil
	}
	if err != nil {
		return application.RuntimeStop{}, false, unavailable(fmt.Errorf("read the runtime stop of stream %s: %w", environment, err))
	}
	return application.RuntimeStop{
		Environment: environment, InstallationID: row.InstallationID, Reason: siteprotocol.StopReason(row.Reason), Sequence: row.Sequence,
		Version: row.Version, Message: row.Message, StoppedAt: row.StoppedAt.Time.UTC(),
	}, true, nil
}

// ClearRuntimeStop implements application.StreamStore: a read, and a
// delete only when a stop is on record (a pull writes nothing otherwise).
func (s *Store) ClearRuntimeStop(ctx context.Context, environment string) (bool, error) {
	if _, found, err := s.RuntimeStop(ctx, environment); err != nil || !found {
		return false, err
	}
	n, err := s.q.ClearRuntimeStop(ctx, environment)
	if err != nil {
		return false, unavailable(fmt.Errorf("clear the runtime stop of stream %s: %w", environment, err))
	}
	return n > 0, nil
}

// CommandPage implements application.StreamStore.
func (s *Store) CommandPage(ctx context.Context, environment string, q application.PageQuery) ([]application.CommandRow, error) {
	limit := int32(min(q.Limit, 1<<30))
	var rows []pgdb.CommandsPageAfterRow
	var err error
	if q.Before > 0 {
		var before []pgdb.CommandsPageBeforeRow
		before, err = s.q.CommandsPageBefore(ctx, pgdb.CommandsPageBeforeParams{Environment: environment, Before: q.Before, Operation: q.Operation, MaxCount: limit})
		for _, r := range before {
			rows = append(rows, pgdb.CommandsPageAfterRow(r))
		}
	} else {
		rows, err = s.q.CommandsPageAfter(ctx, pgdb.CommandsPageAfterParams{Environment: environment, After: q.After, Operation: q.Operation, MaxCount: limit})
	}
	if err != nil {
		return nil, unavailable(fmt.Errorf("read a page of stream %s's commands: %w", environment, err))
	}
	out := make([]application.CommandRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, application.CommandRow{
			Sequence: r.Sequence, ID: r.CommandID, Operation: r.Operation, Digest: r.Digest, Canonical: r.Canonical, AppendedAt: r.AppendedAt.Time.UTC(),
			Result: r.Result, ResultDigest: r.ResultDigest.String, AcknowledgedAt: r.AcknowledgedAt.Time, ResultExpiredAt: r.ResultExpiredAt.Time,
		})
	}
	return out, nil
}

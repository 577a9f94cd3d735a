package application

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// PageQuery selects a page of a stream's commands in the store
// (StreamStore.CommandPage): with Before > 0 the Limit commands before it,
// newest first; else the Limit after After, oldest first; of Operation
// only when it is not "".
type PageQuery struct {
	After     int64
	Before    int64
	Operation string
	Limit     int
}

// CommandRow is one command of a page as stored, with its result once
// acknowledged (Result nil also once the content expired).
type CommandRow struct {
	Sequence        int64
	ID              string
	Operation       string
	Digest          string
	Canonical       []byte
	AppendedAt      time.Time
	Result          []byte
	ResultDigest    string
	AcknowledgedAt  time.Time
	ResultExpiredAt time.Time
}

// Bounds of an operator's command listing (docs/operations.md#operator-reads).
const (
	// MaxCommandsLimit bounds a page's commands.
	MaxCommandsLimit = 200
	// MaxCommandsScan bounds the commands one listing reads to fill a
	// filtered page; a listing that stops there answers with what it
	// found and the cursor to go on from.
	MaxCommandsScan = 5000
)

// CommandsQuery asks for an operator's page of a stream's commands: with
// Forward, those after After (oldest first; After 0: from the first);
// else those before Before (0: the newest); filtered by operation, outcome
// (of the recorded result; "pending" for commands without one), Attempt
// and member, each "" for any.
type CommandsQuery struct {
	Forward   bool
	After     int64
	Before    int64
	Limit     int
	Operation string
	Outcome   string
	Attempt   string
	Member    string
}

// OutcomePending filters for commands without a recorded result.
const OutcomePending = "pending"

// CommandsPage is an operator's page: the matching commands in ascending
// sequence, and the cursors to read on. Older is the Before of the page of
// older commands, 0 when the page reached the stream's first command;
// Newer is the After of the page of newer ones (the stream may grow, so
// there is always one: the head when the page reached it).
type CommandsPage struct {
	Commands []CommandView
	Older    int64
	Newer    int64
}

// CommandView is one command as an operator sees it: its identity and
// envelope, its canonical form and result with a member's data replaced by
// sizes and digests (siteprotocol.OperatorView), never their bytes.
type CommandView struct {
	Row       CommandRow
	RunID     string
	AttemptID string
	MemberID  string
	ProjectID string
	Family    string
	// Command is the command's operator view (sequence and digest
	// included).
	Command json.RawMessage
	// Outcome, Reason and Message are the result's, "" until acknowledged
	// (and once expired); Result is its operator view, nil then.
	Outcome string
	Reason  string
	Message string
	Result  json.RawMessage
}

// Commands returns an operator's page of environment's commands
// (docs/operations.md#operator-reads). It reads the store in batches in the
// asked direction, keeping the commands that pass every filter, until the
// page is full, the stream ends or MaxCommandsScan commands were read. It
// returns an error wrapping ErrInvalidRequest for both Forward and Before,
// a negative one, or an outcome outside the vocabulary and "pending".
func (s *Streams) Commands(ctx context.Context, environment string, q CommandsQuery) (CommandsPage, error) {
	if _, err := s.Environment(environment); err != nil {
		return CommandsPage{}, err
	}
	switch {
	case q.After < 0 || q.Before < 0:
		return CommandsPage{}, fmt.Errorf("%w: after and before must be 0 or more", ErrInvalidRequest)
	case q.Forward && q.Before > 0:
		return CommandsPage{}, fmt.Errorf("%w: give after or before, not both", ErrInvalidRequest)
	case q.Outcome != "" && q.Outcome != OutcomePending && !siteprotocol.Outcome(q.Outcome).Valid():
		return CommandsPage{}, fmt.Errorf("%w: outcome must be succeeded, failed, refused or pending", ErrInvalidRequest)
	}
	if q.Limit <= 0 || q.Limit > MaxCommandsLimit {
		q.Limit = min(max(q.Limit, 50), MaxCommandsLimit)
	}
	st, err := s.store.State(ctx, environment)
	if err != nil {
		return CommandsPage{}, err
	}
	forward := q.Forward
	start := q.After
	if !forward {
		start = q.Before
		if start == 0 || start > st.HeadSequence+1 {
			start = st.HeadSequence + 1
		}
	}
	cursor, more := start, true
	var found []CommandView
	for scanned := 0; more && len(found) < q.Limit && scanned < MaxCommandsScan; {
		batch := min(MaxCommandsLimit, MaxCommandsScan-scanned)
		pq := PageQuery{Operation: q.Operation, Limit: batch}
		if forward {
			pq.After = cursor
		} else {
			pq.Before = cursor
		}
		rows, err := s.store.CommandPage(ctx, environment, pq)
		if err != nil {
			return CommandsPage{}, err
		}
		consumed := 0
		for _, r := range rows {
			consumed++
			cursor = r.Sequence
			v, err := viewOf(r)
			if err != nil {
				return CommandsPage{}, fmt.Errorf("view command %d of stream %s: %w", r.Sequence, environment, err)
			}
			if v.matches(q) {
				if found = append(found, v); len(found) == q.Limit {
					break
				}
			}
		}
		scanned += consumed
		more = consumed < len(rows) || len(rows) == batch
	}
	page := CommandsPage{Commands: found}
	if forward {
		page.Newer = cursor
		if start > 0 {
			page.Older = start + 1
		}
	} else {
		page.Newer = start - 1
		if more && cursor > 1 {
			page.Older = cursor
		}
		// Ascending, as every page is.
		for i, j := 0, len(found)-1; i < j; i, j = i+1, j-1 {
			found[i], found[j] = found[j], found[i]
		}
	}
	return page, nil
}

// matches reports whether v passes every filter of q (the operation was
// filtered by the store).
func (v CommandView) matches(q CommandsQuery) bool {
	switch {
	case q.Attempt != "" && v.AttemptID != q.Attempt:
		return false
	case q.Member != "" && v.MemberID != q.Member:
		return false
	case q.Outcome == OutcomePending:
		return v.Row.ResultDigest == ""
	case q.Outcome != "" && v.Outcome != q.Outcome:
		return false
	}
	return true
}

// viewOf decodes r's envelope and result and makes their operator views.
func viewOf(r CommandRow) (CommandView, error) {
	stored, err := siteprotocol.EncodeStored(r.Canonical, r.Sequence, r.Digest)
	if err != nil {
		return CommandView{}, err
	}
	var env siteprotocol.Command
	if err := json.Unmarshal(stored, &env); err != nil {
		return CommandView{}, err
	}
	v := CommandView{Row: r, RunID: env.RunID, AttemptID: env.AttemptID, MemberID: env.MemberID, ProjectID: env.ProjectID, Family: string(env.Family)}
	if v.Command, err = siteprotocol.OperatorView(stored); err != nil {
		return CommandView{}, err
	}
	if r.Result != nil {
		var res siteprotocol.Result
		if err := json.Unmarshal(r.Result, &res); err != nil {
			return CommandView{}, err
		}
		v.Outcome, v.Reason, v.Message = string(res.Outcome), string(res.Reason), res.Message
		if v.Result, err = siteprotocol.OperatorView(r.Result); err != nil {
			return CommandView{}, err
		}
	}
	return v, nil
}

package domain

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Reasons for refusing a report or an event. The domain reasons are
// snake_case (docs/resource-provisioning.md#lifecycle-and-states); a generic validation failure carries
// the platform's kebab-case reason, the one Huma's own 422s carry. Clients
// decide by reason alone.
const (
	// ReasonStaleReport: the report's observed_at is older than the
	// allocation's saved observed_at.
	ReasonStaleReport = "stale_report"
	// ReasonAllocationRetired: a non-retiring report for a retired
	// allocation (a tombstone).
	ReasonAllocationRetired = "allocation_retired"
	// ReasonReportConflict: a report with the saved observed_at but other
	// content (a retransmission must be identical).
	ReasonReportConflict = "report_conflict"
	// ReasonEventConflict: a Beto event whose event_id was received before
	// with other content.
	ReasonEventConflict = "event_conflict"
	// ReasonValidation: the input breaks a validation rule (the platform's
	// generic reason, httpserver.DefaultReason(422)).
	ReasonValidation = "validation-failed"
)

// Problem is one validation failure at a location of the input, in Huma's
// notation ("body.reports[2].limits.ram").
type Problem struct {
	Location string
	Message  string
	Value    any
}

// ValidationError is returned for input that breaks the rules; nothing is
// stored. It lists every problem found.
type ValidationError struct {
	Problems []Problem
}

func (e *ValidationError) Error() string {
	parts := make([]string, 0, len(e.Problems))
	for _, p := range e.Problems {
		parts = append(parts, p.Location+": "+p.Message)
	}
	return "invalid input: " + strings.Join(parts, "; ")
}

// Invalid returns a *ValidationError with problems, or nil if there are
// none.
func Invalid(problems ...Problem) error {
	if len(problems) == 0 {
		return nil
	}
	return &ValidationError{Problems: problems}
}

// Refusal is one refused item of a request that is otherwise well formed
// (a stale, retired or conflicting report; a conflicting event).
type Refusal struct {
	// Reason is one of the Reason* constants.
	Reason string
	// Location names the refused item ("body.reports[3]").
	Location string
	// Detail explains it for a human.
	Detail string
}

// ConflictError is returned when the input contradicts stored facts: the
// request is refused as a whole and nothing is stored. Refusals are in
// input order; Reason is the first refusal's reason.
type ConflictError struct {
	Refusals []Refusal
}

// Reason returns the first refusal's reason.
func (e *ConflictError) Reason() string {
	if len(e.Refusals) == 0 {
		return ""
	}
	return e.Refusals[0].Reason
}

func (e *ConflictError) Error() string {
	parts := make([]string, 0, len(e.Refusals))
	for _, r := range e.Refusals {
		parts = append(parts, fmt.Sprintf("%s: %s (%s)", r.Location, r.Reason, r.Detail))
	}
	return "refused: " + strings.Join(parts, "; ")
}

// CheckText returns a problem when v, the field at loc, is longer than
// maxIDLength bytes, is not valid UTF-8, holds a control character (NUL
// cannot even be stored: PostgreSQL refuses it), or is empty while
// required. Every string this context stores or queries passes it.
func CheckText(loc string, v string, required bool) []Problem {
	switch {
	case v == "" && required:
		return []Problem{{Location: loc, Message: "required", Value: v}}
	case len(v) > maxIDLength:
		return []Problem{{Location: loc, Message: fmt.Sprintf("at most %d bytes", maxIDLength), Value: v}}
	case !utf8.ValidString(v) || strings.ContainsFunc(v, unicode.IsControl):
		return []Problem{{Location: loc, Message: "must be valid UTF-8 without control characters", Value: v}}
	}
	return nil
}

// CheckCanonicalID returns a problem when v, the field at loc, is not a
// canonical Pharos ID: a lower-case UUID (Beto's canonical Project, Party
// and binding IDs; planning and the Site protocol take nothing else). An
// empty v is a problem only when required.
func CheckCanonicalID(loc, v string, required bool) []Problem {
	switch {
	case v == "" && !required:
		return nil
	case v == "":
		return []Problem{{Location: loc, Message: "required", Value: v}}
	case !siteprotocol.IsUUID(v):
		return []Problem{{Location: loc, Message: "must be a canonical ID: a lower-case UUID such as 7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d", Value: v}}
	}
	return nil
}

// CheckTime returns a problem when t, the time at loc, is zero (missing)
// or finer than a microsecond: both storage engines keep microseconds, so
// a finer time would be rounded and two different instants could compare
// equal (a report 500 ns newer would meet the saved one as a conflict).
func CheckTime(loc string, t time.Time) []Problem {
	switch {
	case t.IsZero():
		return []Problem{{Location: loc, Message: "required"}}
	case t.Nanosecond()%int(time.Microsecond) != 0:
		return []Problem{{Location: loc, Message: "at most microsecond precision (six fractional digits of a second)", Value: t.Format(time.RFC3339Nano)}}
	}
	return nil
}

package domain

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Reasons for refusing a report or an event (snake_case, as seed 003 writes
// them). Clients decide by reason alone.
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
	// ReasonValidation: the input breaks a validation rule.
	ReasonValidation = "validation_failed"
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

// checkText returns a problem when v, the field at loc, is longer than
// maxIDLength bytes, is not valid UTF-8, holds a control character (NUL
// cannot even be stored), or is empty while required.
func checkText(loc string, v string, required bool) []Problem {
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

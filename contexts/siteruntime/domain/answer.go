package domain

import (
	"fmt"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Answer is what an executor reports for one command; the worker encodes it
// as the command's exact result (siteprotocol.NewResult). The same command
// must always produce the same Answer: Execute and Recover of one command
// agree, and an Answer carries no clock reading of the Runtime's own
// (docs/site-protocol.md#the-result).
type Answer struct {
	Outcome siteprotocol.Outcome
	Reason  siteprotocol.Reason
	// Message is for humans; it is part of the exact result.
	Message string
	// Detail is the operation-specific detail (a value that encodes as a
	// JSON object, e.g. siteprotocol.StateDetail), or nil.
	Detail any
	// NativeRefs names the native objects the operation touched.
	NativeRefs []siteprotocol.NativeRef
	// Note is for the Runtime's log line of the command and is not part of
	// the exact result, e.g. that a start's account was checked by name
	// only (AccountCheckedByNameOnly); empty when there is nothing to note.
	Note string
}

// Refused returns a refused Answer with reason and a formatted message.
func Refused(reason siteprotocol.Reason, format string, args ...any) Answer {
	return Answer{Outcome: siteprotocol.OutcomeRefused, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Succeeded returns a succeeded Answer.
func Succeeded(reason siteprotocol.Reason, message string, detail any, refs ...siteprotocol.NativeRef) Answer {
	return Answer{Outcome: siteprotocol.OutcomeSucceeded, Reason: reason, Message: message, Detail: detail, NativeRefs: refs}
}

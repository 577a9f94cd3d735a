package application

import (
	"fmt"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// The checks of the intakes without their effects: the HTTP adaptor runs
// them with its own checks of the body, so one 422 names every bad field
// (docs/resource-provisioning.md#bad-input). Each returns nil or a
// *domain.ValidationError listing every problem, exactly as the intake
// (SubmitReports, ReceiveBetoEvent, SubmitAccounts) would refuse it now.

// CheckReports checks a report batch as SubmitReports does: its size, each
// report, and every observed_at against the server clock plus the clock
// skew.
func (s *Service) CheckReports(reports []domain.Report) error {
	return s.validateBatch(reports, s.now())
}

// CheckBetoEvent checks an event as ReceiveBetoEvent does.
func (s *Service) CheckBetoEvent(ev domain.BetoEvent) error {
	return domain.Invalid(ev.Validate("body")...)
}

// CheckAccounts checks an account report as SubmitAccounts does.
func (s *Service) CheckAccounts(r domain.AccountReport) error {
	return s.checkAccounts(r, s.now())
}

func (s *Service) checkAccounts(r domain.AccountReport, now time.Time) error {
	problems := r.ValidateNames("body", s.anySlurm())
	if latest := now.Add(s.cfg.ClockSkew); r.ObservedAt.After(latest) {
		problems = append(problems, domain.Problem{
			Location: "body.observed_at",
			Message:  fmt.Sprintf("lies beyond the server clock (%s) plus the allowed clock skew of %s; check the agent's clock", now.Format(time.RFC3339), s.cfg.ClockSkew),
			Value:    r.ObservedAt.UTC().Format(time.RFC3339Nano),
		})
	}
	return domain.Invalid(problems...)
}

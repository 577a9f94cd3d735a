// Package telemetry implements application.Observer: refusals and conflicts
// an operator should see are logged (zap) and counted (Prometheus, on the
// process's admin registry).
package telemetry

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
	"github.com/pharos-metallo/metallo/platform/httpserver"
)

// Metric names.
const (
	// EventConflictsMetric counts Beto events refused because their event_id
	// was received before with other content.
	EventConflictsMetric = "metallo_provisioning_beto_event_conflicts_total"
	// BindingConflictsMetric counts Project events after which a provider
	// Project was claimed by several canonical Projects.
	BindingConflictsMetric = "metallo_provisioning_project_binding_conflicts_total"
)

// Telemetry logs and counts. It is safe for concurrent use.
type Telemetry struct {
	log              *zap.Logger
	eventConflicts   prometheus.Counter
	bindingConflicts prometheus.Counter
}

var _ application.Observer = (*Telemetry)(nil)

// New registers the counters on reg. It fails when they are registered
// already.
func New(log *zap.Logger, reg prometheus.Registerer) (*Telemetry, error) {
	t := &Telemetry{
		log: log,
		eventConflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: EventConflictsMetric,
			Help: "Beto events refused because their event_id was received before with other content.",
		}),
		bindingConflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: BindingConflictsMetric,
			Help: "Project events after which a provider Project is claimed by several canonical Projects (see GET /resource-provisioning/project-binding-conflicts).",
		}),
	}
	for _, c := range []prometheus.Collector{t.eventConflicts, t.bindingConflicts} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register resource provisioning metrics: %w", err)
		}
	}
	return t, nil
}

// EventConflict implements application.Observer.
func (t *Telemetry) EventConflict(ctx context.Context, eventID, eventType string) {
	t.eventConflicts.Inc()
	httpserver.RequestLog(ctx, t.log).Warn("refused a Beto event: its event_id was received before with other content",
		zap.String("event_id", eventID), zap.String("event_type", eventType), zap.String("reason", domain.ReasonEventConflict))
}

// BindingConflict implements application.Observer.
func (t *Telemetry) BindingConflict(ctx context.Context, c domain.BindingConflict) {
	t.bindingConflicts.Inc()
	httpserver.RequestLog(ctx, t.log).Warn("a provider Project is claimed by several Projects; its allocations stay project_unbound",
		zap.String("instance", c.Instance), zap.String("provider_project_id", c.ProviderProjectID), zap.Strings("project_ids", c.ProjectIDs))
}

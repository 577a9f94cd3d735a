package siteruntime

import (
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// watchLog logs what the Runtime's watch of its Jobs does
// (application.WatchEvents; docs/site-runtime.md#terminal-states-of-jobs-that-are-gone).
type watchLog struct{ log *zap.Logger }

// TerminalRecorded logs a recorded terminal state at info.
func (l watchLog) TerminalRecorded(ts domain.TerminalState) {
	l.log.Info("terminal state recorded", zap.String("attempt", ts.AttemptID), zap.String("kind", ts.Kind),
		zap.String("namespace", ts.Namespace), zap.String("name", ts.Name), zap.String("uid", ts.UID),
		zap.String("state", ts.State), zap.String("reason", ts.Reason))
}

// TerminalNotRecorded logs a state that could not be recorded, or a watch
// that is not ready, at warn.
func (l watchLog) TerminalNotRecorded(ts domain.TerminalState, err error) {
	l.log.Warn("terminal state not recorded", zap.String("attempt", ts.AttemptID), zap.String("namespace", ts.Namespace),
		zap.String("name", ts.Name), zap.String("uid", ts.UID), zap.String("state", ts.State), zap.Error(err))
}

var _ application.WatchEvents = watchLog{}

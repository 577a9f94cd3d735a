// Package logging builds the process's zap logger and wires it into Fx's own
// event log (fxevent.ZapLogger), so start-up and shutdown are logged in the
// same structured stream as the application.
package logging

import (
	"fmt"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Config selects the log encoding and level.
type Config struct {
	// Format is "json" (production) or "console" (development).
	Format string
	// Level is a zap level name: debug, info, warn, error.
	Level string
}

// New builds a logger from cfg. It returns an error naming the offending
// setting when Format or Level is not recognised.
func New(cfg Config) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(cfg.Level)
	if err != nil {
		return nil, fmt.Errorf("log level %q: %w", cfg.Level, err)
	}
	var zc zap.Config
	switch cfg.Format {
	case "json", "":
		zc = zap.NewProductionConfig()
	case "console":
		zc = zap.NewDevelopmentConfig()
	default:
		return nil, fmt.Errorf("log format %q: want json or console", cfg.Format)
	}
	zc.Level = zap.NewAtomicLevelAt(level)
	zc.DisableStacktrace = level > zapcore.DebugLevel
	zc.EncoderConfig.TimeKey = "time"
	zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	// Durations carry their unit ("1.5s", "200ms"), in every format
	// (docs/operations.md#logs).
	zc.EncoderConfig.EncodeDuration = zapcore.StringDurationEncoder
	logger, err := zc.Build()
	if err != nil {
		return nil, fmt.Errorf("build logger: %w", err)
	}
	return logger, nil
}

// Module supplies logger to the application and uses it for Fx's own events.
// The logger is built by the caller (the command) so the first log line can
// be written before Fx starts.
func Module(logger *zap.Logger) fx.Option {
	return fx.Options(
		fx.Supply(logger),
		fx.WithLogger(func() fxevent.Logger {
			l := &fxevent.ZapLogger{Logger: logger.Named("fx")}
			l.UseLogLevel(zapcore.DebugLevel)
			// Fx's own error events repeat, with dependency chains and
			// stack traces, what the command reports once (its root cause):
			// they are debug detail.
			l.UseErrorLevel(zapcore.DebugLevel)
			return l
		}),
		fx.Invoke(func(lc fx.Lifecycle) {
			lc.Append(fx.StopHook(func() { _ = logger.Sync() }))
		}),
	)
}

package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/dig"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/platform/buildinfo"
	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/logging"
)

// Env is what the command tree needs from the process: its streams and its
// environment. main passes the real ones; tests pass their own.
type Env struct {
	Stdout, Stderr io.Writer
	LookupEnv      func(string) (string, bool)
	// Roles returns the role registry (fresh values each call). Nil means
	// DefaultRoles.
	Roles func() RoleSet
}

// ExitError carries a process exit status other than 1.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Main runs the command line args and returns the process exit status.
func Main(ctx context.Context, args []string, env Env) int {
	cmd := NewRootCommand(env)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintln(env.Stderr, "metallo:", err)
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return 1
}

// NewRootCommand builds the metallo command tree.
func NewRootCommand(env Env) *cobra.Command {
	if env.Roles == nil {
		env.Roles = DefaultRoles
	}
	build := buildinfo.Read()
	root := &cobra.Command{
		Use:           "metallo",
		Short:         "Metallo runs research computing work at Sites",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Version makes cobra add --version, printed with the template
		// below: the text of `metallo version`.
		Version: build.Version,
	}
	root.SetVersionTemplate(strings.ReplaceAll(versionLines(build), "{{", `{{"{{"}}`))
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.AddCommand(
		newVersionCommand(env),
		newServeCommand(env),
		newMigrateCommand(env),
		newKeysCommand(env),
		newOpenAPICommand(env),
	)
	for _, c := range extraCommands(env) {
		root.AddCommand(c)
	}
	return root
}

// bindEnv fills flags not given on the command line from METALLO_*.
func bindEnv(cmd *cobra.Command, env Env) error {
	lookup := env.LookupEnv
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	return config.BindEnv(cmd.Flags(), lookup)
}

type logFlags struct{ format, level string }

func (l *logFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&l.format, "log-format", "json", "log encoding: json or console")
	fs.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error")
}

func (l *logFlags) build() (*zap.Logger, error) {
	log, err := logging.New(logging.Config{Format: l.format, Level: l.level})
	if err != nil {
		return nil, config.Invalid("log-format/--log-level", l.format+"/"+l.level, err)
	}
	return log, nil
}

// runApp starts an Fx app, waits for a signal or a shutdown request, and
// stops it. Start errors are returned, never exited on.
func runApp(ctx context.Context, opts fx.Option, stopTimeout time.Duration) error {
	app := fx.New(opts)
	if err := app.Err(); err != nil {
		// The root cause names the bad flag or file; the dependency chain
		// that led to it is debug detail (--log-level debug shows it).
		return fmt.Errorf("start: %w", dig.RootCause(err))
	}
	// Signals are caught from before start, so a SIGTERM during start-up
	// cancels the start and stops what already started.
	sigCtx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	startCtx, cancel := context.WithTimeout(sigCtx, app.StartTimeout())
	defer cancel()
	if err := app.Start(startCtx); err != nil {
		return fmt.Errorf("start: %w", dig.RootCause(err))
	}
	var exitCode int
	select {
	case <-sigCtx.Done():
	case sig := <-app.Wait():
		exitCode = sig.ExitCode
	}
	stopCtx, cancelStop := context.WithTimeout(context.Background(), stopTimeout)
	defer cancelStop()
	if err := app.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	if exitCode != 0 {
		return &ExitError{Code: exitCode, Err: fmt.Errorf("stopped with exit status %d", exitCode)}
	}
	return nil
}

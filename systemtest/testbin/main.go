// Command testbin is the metallo binary for the Site Runtime's system
// tests: the real command tree and roles (app.Main), with one addition to
// the runtime role — an executor that stands in for a native system
// (the real one is Kubernetes: adaptors/kube), composed through an Fx option. Everything else
// the tests exercise (worker, journals, Site client, failpoints, execution
// role) is the production code.
//
// The stand-in serves start commands of the batch family (replacing any
// native executor for that route). Its native system is an append-only
// effects file (METALLO_TEST_EFFECTS_FILE):
//   - Execute appends the effect — a line naming the command, its Attempt,
//     a fresh UID and the specification digest — UNCONDITIONALLY, fsyncs it,
//     hits after-native-call, records the Job in jobs.sqlite and hits
//     after-native-record.
//   - Recover looks before acting: a jobs.sqlite record of the command
//     answers at once; else an effect line of the command is adopted (and
//     recorded) when its specification digest matches, and is unexplained
//     (the worker stops) when it does not; else it performs Execute's path.
//
// A payload env entry GATE=<path> makes Execute wait, after recording the
// Job, until <path> exists (it creates <path>.waiting first), so a test can
// act while the worker is between the native record and the result.
package main

import (
	"context"
	"os"

	"go.uber.org/fx"

	"github.com/pharos-metallo/metallo/app"
	"github.com/pharos-metallo/metallo/contexts/siteruntime"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/systemtest/harness"
)

func main() {
	effects := os.Getenv(harness.EffectsEnv)
	roles := func() app.RoleSet {
		rs := app.DefaultRoles()
		for i := range rs {
			if rs[i].Context != siteruntime.Name {
				continue
			}
			module := rs[i].Module
			rs[i].Module = func(migrate bool) fx.Option {
				return fx.Options(module(migrate), fx.Provide(siteruntime.AsExecutors(
					func(records application.BatchRecords, fp application.Failpoints) []application.Registration {
						return harness.NewEffectExecutor(effects, records, fp).Registrations()
					})))
			}
		}
		return rs
	}
	os.Exit(app.Main(context.Background(), os.Args[1:], app.Env{
		Stdout: os.Stdout, Stderr: os.Stderr, LookupEnv: os.LookupEnv, Roles: roles,
	}))
}

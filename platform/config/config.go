// Package config gives every command-line flag an environment equivalent:
// flag --provisioning-database-url is also METALLO_PROVISIONING_DATABASE_URL.
// A flag given on the command line wins over its environment variable. A bad
// value in either fails start-up with an error naming the flag.
package config

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

// EnvPrefix is prepended to every flag's environment name.
const EnvPrefix = "METALLO_"

// EnvName returns the environment variable that stands for flag name, e.g.
// "keys-file" -> "METALLO_KEYS_FILE".
func EnvName(flag string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// ErrInvalidFlag is wrapped by every error that BindEnv and the Validate
// helpers return, so callers can tell configuration errors apart.
var ErrInvalidFlag = errors.New("invalid configuration")

// FlagError names the flag (and its environment variable) whose value is bad.
type FlagError struct {
	Flag  string
	Value string
	Err   error
}

func (e *FlagError) Error() string {
	return fmt.Sprintf("invalid value %q for --%s (%s): %v", e.Value, e.Flag, EnvName(e.Flag), e.Err)
}

// Unwrap returns both the cause and ErrInvalidFlag.
func (e *FlagError) Unwrap() []error { return []error{e.Err, ErrInvalidFlag} }

// BindEnv sets every flag of fs that was not given on the command line from
// its environment variable, read through lookup (os.LookupEnv in main). It
// applies every variable it can and returns all bad values together, each as
// a *FlagError. Variables with the prefix that name no flag of fs are
// ignored: several commands share one environment.
func BindEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		v, ok := lookup(EnvName(f.Name))
		if !ok {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, &FlagError{Flag: f.Name, Value: v, Err: err})
		}
	})
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errors.Join(errs...)
}

// Invalid returns a *FlagError for a value that parsed but breaks a rule
// (a port out of range, an unknown role).
func Invalid(flag, value string, err error) error {
	return &FlagError{Flag: flag, Value: value, Err: err}
}

// Removed is a flag a release removed. It stays registered, hidden, so a
// start that still gives it — on the command line or as its METALLO_
// variable — is refused naming the way forward (Err), never taken for an
// unknown flag or a variable silently ignored (docs/operations.md#upgrades).
type Removed struct {
	name, instead string
	values        []string
}

// RemovedFlag registers the removed flag name on fs, hidden; instead says
// what replaces it.
func RemovedFlag(fs *pflag.FlagSet, name, instead string) *Removed {
	r := &Removed{name: name, instead: instead}
	fs.Var(r, name, "removed: "+instead)
	_ = fs.MarkHidden(name)
	return r
}

// Err returns nil when the flag was not given, else a *FlagError naming it,
// its variable and what replaces it.
func (r *Removed) Err() error {
	if r.values == nil {
		return nil
	}
	return Invalid(r.name, strings.Join(r.values, ","), fmt.Errorf("removed: %s", r.instead))
}

// String implements pflag.Value.
func (r *Removed) String() string { return strings.Join(r.values, ",") }

// Set implements pflag.Value: every value is taken (and refused by Err).
func (r *Removed) Set(v string) error {
	r.values = append(r.values, v)
	return nil
}

// Type implements pflag.Value.
func (r *Removed) Type() string { return "removed" }

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

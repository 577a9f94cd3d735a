package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/gitcheckout"
	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// DefaultOutcomeFile is where Kubernetes reads a container's termination
// message.
const DefaultOutcomeFile = "/dev/termination-log"

// newWorkspaceInitCommand is `metallo workspace-init`, the checkout the
// trusted helper Pod runs (docs/site-runtime.md#workspace-checkout-metallo-workspace-init).
func newWorkspaceInitCommand(env Env) *cobra.Command {
	var (
		o       gitcheckout.Options
		timeout time.Duration
		outcome string
	)
	cmd := &cobra.Command{
		Use:   "workspace-init",
		Short: "Check a repository out at an exact commit into a workspace (the trusted helper)",
		Long: `Fetch the exact commit of --url with git (the whole repository when the host
refuses a shallow fetch of an unadvertised commit), check it out detached at
--dest, and with --lfs fetch and verify every LFS object. The checkout may
occupy at most --size-limit bytes (LFS objects included), enforced while
fetching; a symbolic link leaving the checkout or entering .git is refused;
no hook runs and no submodule is fetched. The token is read from
--credential-dir by the credential helper and is written nowhere. A complete
checkout of the commit already at --dest is verified, not fetched again; a
partial one is never accepted. Waits within --timeout for the host to accept
connections. The outcome (JSON) goes to --outcome-file, the Pod's
termination message; a failure exits non-zero with its reason:
repository-unavailable, commit-missing, size-exceeded, symlink-escape,
lfs-missing or credential-unavailable.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd, env); err != nil {
				return err
			}
			if timeout <= 0 {
				return config.Invalid("timeout", timeout.String(), errors.New("must be positive: the checkout's deadline"))
			}
			if outcome == "" {
				return config.Invalid("outcome-file", "", errors.New("required: where the outcome is written"))
			}
			if o.CredentialDir != "" {
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("the credential helper is this binary: %w", err)
				}
				o.HelperCommand = gitcheckout.HelperCommand(exe, "workspace-init", "credential-helper", "--credential-dir", o.CredentialDir, "--url", o.URL)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			out := gitcheckout.Run(ctx, o)
			b := out.Encode()
			fmt.Fprint(cmd.OutOrStdout(), string(b))
			werr := os.WriteFile(outcome, b, 0o644)
			if werr != nil {
				werr = config.Invalid("outcome-file", outcome, fmt.Errorf("the outcome cannot be written: %w", werr))
			}
			if out.Outcome != siteprotocol.OutcomeSucceeded {
				return errors.Join(fmt.Errorf("workspace-init: %s / %s: %s", out.Outcome, out.Reason, out.Message), werr)
			}
			return werr
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.URL, "url", "", "repository URL (https; no credentials in it)")
	fs.StringVar(&o.Commit, "commit", "", "the exact commit, a full hash")
	fs.BoolVar(&o.LFS, "lfs", false, "fetch, check out and verify every LFS object of the commit")
	fs.StringVar(&o.Dest, "dest", "", "the checkout directory (absolute; its parent, the workspace, must exist)")
	fs.Int64Var(&o.SizeLimit, "size-limit", 0, "most bytes the checkout may occupy, LFS objects included (the smaller of the workspace size and the Site maximum)")
	fs.StringVar(&o.CredentialDir, "credential-dir", "", "directory holding the grant's username and token files (empty: a public repository)")
	fs.StringVar(&o.CAFile, "ca-file", "", "PEM bundle of the repository host's CA (system roots when empty)")
	fs.DurationVar(&timeout, "timeout", 10*time.Minute, "deadline of the whole checkout, waiting for the host included")
	fs.BoolVar(&o.VerifyOnly, "verify-only", false, "only verify the complete checkout at --dest (a serving Pod's read-only workspace); never fetch, write or remove anything")
	fs.StringVar(&outcome, "outcome-file", DefaultOutcomeFile, "where the outcome (JSON, at most 4096 bytes) is written: the Pod's termination message")
	cmd.AddCommand(newCredentialHelperCommand(env))
	return cmd
}

// newCredentialHelperCommand is the credential helper Git runs during a
// checkout (hidden: workspace-init configures it).
func newCredentialHelperCommand(env Env) *cobra.Command {
	var dir, url string
	cmd := &cobra.Command{
		Use:    "credential-helper get|store|erase",
		Short:  "Git credential helper of workspace-init: answers from --credential-dir for the repository's host only",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := bindEnv(cmd, env); err != nil {
				return err
			}
			return gitcheckout.AnswerCredential(args[0], cmd.InOrStdin(), cmd.OutOrStdout(), dir, url)
		},
	}
	cmd.Flags().StringVar(&dir, "credential-dir", "", "directory holding username and token")
	cmd.Flags().StringVar(&url, "url", "", "the repository URL whose host alone is answered")
	return cmd
}

package app

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/workspaceread"
	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// newWorkspaceReadCommand is `metallo workspace-read`, the read of one
// workspace file the workspace reader Pod runs
// (docs/site-runtime.md#workspace-read-metallo-workspace-read).
func newWorkspaceReadCommand(env Env) *cobra.Command {
	var (
		root, path string
		maxBytes   int64
	)
	cmd := &cobra.Command{
		Use:   "workspace-read",
		Short: "Read one file of a workspace (the trusted reader of read-file)",
		Long: `Read the first --max-bytes bytes of the regular file --path names inside the
directory --root (the workspace claim, mounted read-only) and write one JSON
line to standard output: {"outcome":"succeeded","content_base64":…,
"truncated":…,"bytes":…}, or the refusal path-rejected (an unclean path, a
symbolic link leaving --root or with an absolute target, a directory, FIFO,
socket or device, a missing file) or the failure native-error (a file it may
not read, an I/O error), each with a message. Symbolic links are resolved
inside --root only (os.Root); a FIFO never blocks the read. Nothing else is
written to standard output or standard error, and the exit status is 0
whenever the line was written: the line is the answer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd, env); err != nil {
				return err
			}
			if root == "" {
				return config.Invalid("root", "", errors.New("required: the workspace directory"))
			}
			_, err := cmd.OutOrStdout().Write(workspaceread.Read(root, path, maxBytes).Encode())
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&root, "root", "", "the workspace directory; nothing outside it is read")
	fs.StringVar(&path, "path", "", "the file, a clean path relative to --root")
	fs.Int64Var(&maxBytes, "max-bytes", siteprotocol.MaxReadBytes, "most bytes to answer (1..1048576); one more is read to know whether the file is longer")
	return cmd
}

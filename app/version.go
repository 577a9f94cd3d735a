package app

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/pharos-metallo/metallo/platform/buildinfo"
	"github.com/pharos-metallo/metallo/platform/config"
)

// Output formats of `metallo version`.
const (
	versionText = "text"
	versionJSON = "json"
)

func newVersionCommand(env Env) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print this binary's version, VCS revision and time, dirty flag and Go version",
		Long: `Print the build of this binary: its version (a release tag, or a version naming
the commit), the full VCS revision and its commit time, whether the tree had
uncommitted changes, and the Go toolchain. A build without VCS data says
(devel) and unknown unless it was linked with -ldflags -X (docs/operations.md#versions).
--version prints the same text.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd, env); err != nil {
				return err
			}
			info := buildinfo.Read()
			switch output {
			case versionText:
				_, err := io.WriteString(cmd.OutOrStdout(), versionLines(info))
				return err
			case versionJSON:
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			}
			return config.Invalid("output", output, fmt.Errorf("want %s or %s", versionText, versionJSON))
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", versionText, "output format: text or json")
	return cmd
}

// versionLines is the text `metallo version` and `metallo --version`
// print: the version on the first line, then one field a line.
func versionLines(i buildinfo.Info) string {
	when, modified := "unknown", "unknown"
	if !i.Time.IsZero() {
		when = i.Time.Format(time.RFC3339)
	}
	if i.Modified != nil {
		modified = strconv.FormatBool(*i.Modified)
	}
	return fmt.Sprintf("metallo %s\n  revision: %s\n  time:     %s\n  modified: %s\n  go:       %s %s\n",
		i.Version, i.Revision, when, modified, i.GoVersion, i.Platform)
}

package app

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/config"
)

func newKeysCommand(env Env) *cobra.Command {
	keys := &cobra.Command{Use: "keys", Short: "Manage bearer keys (keys.yaml)"}
	var principal, appendTo string
	newCmd := &cobra.Command{
		Use:   "new --principal KIND:ID",
		Short: "Print a new random key once, and the keys-file entry that admits it",
		Long: `Print a fresh random bearer key for the principal (site:<id>, environment:<id>
or service:<name>) and where its SHA-256 goes: for site: and service: the entry
to add under "keys:" in keys.yaml (or --append it); for environment: the
environment's "auth: {key_sha256: …}" in environments.yaml (--append is
refused). Only the SHA-256 is ever stored; the key is shown this once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd, env); err != nil {
				return err
			}
			p, err := auth.ParsePrincipal(principal)
			if err != nil {
				return config.Invalid("principal", principal, err)
			}
			if p.Kind == auth.KindEnvironment && appendTo != "" {
				return config.Invalid("append", appendTo, errors.New("an environment's key belongs in environments.yaml (auth: {key_sha256: …} of the environment), not in a keys file"))
			}
			key, entry, err := auth.NewKey(p)
			if err != nil {
				return err
			}
			if p.Kind == auth.KindEnvironment {
				// environments.yaml authenticates an environment's Runtime,
				// never keys.yaml (README, "Configuration").
				fmt.Fprintf(cmd.OutOrStdout(), "key: %s\n# set as the auth of environment %s in environments.yaml (not keys.yaml)\n"+
					"environments:\n  - id: %s\n    auth:\n      key_sha256: %s\n", key, p.ID, p.ID, entry.SHA256)
				return nil
			}
			line, err := yaml.Marshal([]auth.KeyEntry{entry})
			if err != nil {
				return fmt.Errorf("encode keys-file entry: %w", err)
			}
			out := cmd.OutOrStdout()
			if appendTo == "" {
				fmt.Fprintf(out, "key: %s\n# add under keys: in keys.yaml\n%s", key, line)
				return nil
			}
			// The file first: a key printed but never stored would be handed out unusable.
			if err := appendKey(appendTo, entry); err != nil {
				return err
			}
			fmt.Fprintf(out, "key: %s\n# added %s to %s\n", key, entry.Principal, appendTo)
			return nil
		},
	}
	newCmd.Flags().StringVar(&principal, "principal", "", "site:<id>, environment:<id> or service:<name>")
	newCmd.Flags().StringVar(&appendTo, "append", "", "also add the entry to this keys file (created if missing)")
	keys.AddCommand(newCmd)
	return keys
}

// appendKey adds entry to the keys file at path, creating it if missing. The
// file is validated before and after, and replaced atomically.
func appendKey(path string, entry auth.KeyEntry) error {
	var f auth.KeysFile
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("read keys file: %w", err)
	default:
		if err := yaml.UnmarshalStrict(raw, &f); err != nil {
			return fmt.Errorf("parse keys file %s: %w", path, err)
		}
	}
	f.Keys = append(f.Keys, entry)
	if _, err := auth.NewKeyStore(f); err != nil {
		return err
	}
	out, err := yaml.Marshal(f)
	if err != nil {
		return fmt.Errorf("encode keys file: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, out, 0o600); err != nil {
		return fmt.Errorf("write keys file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replace keys file: %w", err)
	}
	return nil
}

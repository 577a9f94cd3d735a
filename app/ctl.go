package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/httpapi"
	"github.com/pharos-metallo/metallo/platform/cabundle"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// `metallo ctl`: the operator's command line over the execution role
// (docs/operations.md#metallo-ctl): the operator's reads with an
// operator:<name> key (or a service key), and with a service key the
// append, rebind and plan routes; table or JSON output.

// ctlFlags are the flags every ctl command shares.
type ctlFlags struct {
	server  string
	keyFile string
	caFile  string
	output  string
	timeout time.Duration
}

// ctlClient calls the execution role's routes with the key of keyFile.
type ctlClient struct {
	base *url.URL
	key  string
	http *http.Client
}

// client reads the key and builds the HTTP client. Errors name the flag.
func (f *ctlFlags) client() (*ctlClient, error) {
	if f.keyFile == "" {
		return nil, errors.New("--key-file (METALLO_KEY_FILE) must name the file holding the bearer key")
	}
	raw, err := os.ReadFile(f.keyFile)
	if err != nil {
		return nil, fmt.Errorf("--key-file: %w", err)
	}
	key := strings.TrimSpace(string(raw))
	if key == "" || strings.ContainsAny(key, " \t\r\n") {
		return nil, fmt.Errorf("--key-file %s must hold one key on one line", f.keyFile)
	}
	u, err := url.Parse(strings.TrimRight(f.server, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q must be an http(s) URL with a host", f.server)
	}
	tlsCfg, err := cabundle.TLSConfig(f.caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	switch f.output {
	case "table", "json":
	default:
		return nil, fmt.Errorf("--output %q: want table or json", f.output)
	}
	return &ctlClient{base: u, key: key, http: &http.Client{Timeout: f.timeout, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: tlsCfg}}}, nil
}

// call sends method path with body (nil: none) and returns the answer's
// bytes; an answer of 400 or more is an error naming its status, reason
// and detail.
func (c *ctlClient) call(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if resp.StatusCode >= 400 {
		var p struct {
			Reason string `json:"reason"`
			Detail string `json:"detail"`
		}
		_ = json.Unmarshal(raw, &p)
		return nil, fmt.Errorf("%s %s: %d %s: %s (request %s)", method, path, resp.StatusCode, p.Reason, p.Detail, resp.Header.Get("X-Request-Id"))
	}
	return raw, nil
}

// get calls GET path and decodes the answer into out.
func (c *ctlClient) get(ctx context.Context, path string, out any) ([]byte, error) {
	raw, err := c.call(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("GET %s: the answer is not what the route documents: %w", path, err)
	}
	return raw, nil
}

// printJSON writes raw indented.
func printJSON(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

func newCtlCommand(env Env) *cobra.Command {
	f := &ctlFlags{}
	cmd := &cobra.Command{
		Use:   "ctl",
		Short: "Read every stream as an operator; append, rebind and plan with a service key",
		Long: "metallo ctl calls the execution role (docs/operations.md#metallo-ctl). environments, commands and bindings read with an " +
			"operator:<name> key (or a service key); append, rebind and plan need a service key (an operator key is refused 403). " +
			"The key is read from --key-file (METALLO_KEY_FILE); --server (METALLO_SERVER) is the execution role's URL.",
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return bindEnv(cmd, env)
		},
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.server, "server", "http://127.0.0.1:8080", "the execution role's URL (env METALLO_SERVER)")
	pf.StringVar(&f.keyFile, "key-file", "", "the file holding the bearer key: an operator:<name> key, or a service key for append, rebind and plan (env METALLO_KEY_FILE)")
	pf.StringVar(&f.caFile, "ca-file", "", "a PEM bundle to verify an https server with (default: the system roots)")
	pf.StringVarP(&f.output, "output", "o", "table", "table or json (the route's answer as served)")
	pf.DurationVar(&f.timeout, "timeout", 30*time.Second, "bound of each request")
	cmd.AddCommand(
		newCtlEnvironmentsCommand(f), newCtlCommandsCommand(f, env), newCtlBindingsCommand(f, env),
		newCtlAppendCommand(f, env), newCtlRebindCommand(f, env), newCtlPlanCommand(f, env),
	)
	return cmd
}

// completeEnvironments completes an environment ID argument from the
// server's listing (the key and server flags as given so far).
func completeEnvironments(f *ctlFlags, env Env) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		_ = bindEnv(cmd, env)
		c, err := f.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var body struct {
			Environments []httpapi.EnvironmentBody `json:"environments"`
		}
		if _, err := c.get(cmd.Context(), "/execution/v1/environments", &body); err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var ids []string
		for _, e := range body.Environments {
			if strings.HasPrefix(e.Environment, prefix) {
				ids = append(ids, e.Environment)
			}
		}
		return ids, cobra.ShellCompDirectiveNoFileComp
	}
}

func newCtlEnvironmentsCommand(f *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "environments",
		Aliases: []string{"envs", "environment"},
		Short:   "List the environments: stream position, lag, bound installation, Runtime version, last pull and stop",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			var body struct {
				Environments []httpapi.EnvironmentBody `json:"environments"`
			}
			raw, err := c.get(cmd.Context(), "/execution/v1/environments", &body)
			if err != nil {
				return err
			}
			if f.output == "json" {
				return printJSON(cmd.OutOrStdout(), raw)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ENVIRONMENT\tSITE\tBACKEND\tHEAD\tACKED\tLAG\tINSTALLATION\tVERSION\tLAST PULL\tSTOP")
			for _, e := range body.Environments {
				version := "-"
				if e.RuntimeVersion != nil {
					version = orDash(*e.RuntimeVersion)
				}
				stop := "-"
				if e.Stop != nil {
					stop = fmt.Sprintf("%s at %d (%s, %s)", e.Stop.Reason, e.Stop.Sequence, e.Stop.RuntimeVersion, e.Stop.StoppedAt)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", e.Environment, e.Site, e.Backend, e.HeadSequence, e.AcknowledgedSequence,
					e.Lag, orDash(e.InstallationID), version, orDash(e.LastPullAt), stop)
			}
			return tw.Flush()
		},
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// short cuts an ID to its first 8 characters for a table.
func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return orDash(id)
}

func newCtlCommandsCommand(f *ctlFlags, env Env) *cobra.Command {
	var (
		after, before                       int64
		limit                               int
		operation, outcome, attempt, member string
	)
	cmd := &cobra.Command{
		Use:   "commands <environment>",
		Short: "List a stream's commands and results (newest first page; --after/--before to page), member data as sizes and digests",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			q := url.Values{"limit": {strconv.Itoa(limit)}}
			if cmd.Flags().Changed("after") {
				q.Set("after", strconv.FormatInt(after, 10))
			}
			if cmd.Flags().Changed("before") {
				q.Set("before", strconv.FormatInt(before, 10))
			}
			for k, v := range map[string]string{"operation": operation, "outcome": outcome, "attempt": attempt, "member": member} {
				if v != "" {
					q.Set(k, v)
				}
			}
			var body struct {
				Commands []httpapi.CommandSummaryBody `json:"commands"`
				Older    int64                        `json:"older"`
				Newer    int64                        `json:"newer"`
			}
			raw, err := c.get(cmd.Context(), "/execution/v1/streams/"+url.PathEscape(args[0])+"/commands?"+q.Encode(), &body)
			if err != nil {
				return err
			}
			if f.output == "json" {
				return printJSON(cmd.OutOrStdout(), raw)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SEQ\tOPERATION\tFAMILY\tATTEMPT\tMEMBER\tOUTCOME\tREASON\tAPPENDED\tACKNOWLEDGED\tPRIVATE")
			for _, cm := range body.Commands {
				private := append(privateValues("command", cm.Command), privateValues("result", cm.Result)...)
				outcome := orDash(cm.Outcome)
				if cm.ResultDigest != "" && cm.Outcome == "" {
					outcome = "expired"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cm.Sequence, cm.Operation, orDash(cm.Family), short(cm.AttemptID),
					short(cm.MemberID), outcome, orDash(cm.Reason), cm.AppendedAt, orDash(cm.AcknowledgedAt), orDash(strings.Join(private, " ")))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if body.Older > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "older: --before %d\n", body.Older)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "newer: --after %d\n", body.Newer)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.Int64Var(&after, "after", 0, "list the commands after this sequence, oldest first (0: from the first)")
	fs.Int64Var(&before, "before", 0, "list the commands before this sequence (the older page)")
	fs.IntVar(&limit, "limit", 50, "at most this many commands (1-200)")
	fs.StringVar(&operation, "operation", "", "only commands of this operation, e.g. start")
	fs.StringVar(&outcome, "outcome", "", "only commands whose result is succeeded, failed or refused, or pending (not acknowledged)")
	fs.StringVar(&attempt, "attempt", "", "only commands of this Attempt (attempt_id)")
	fs.StringVar(&member, "member", "", "only commands of this member (member_id)")
	cmd.MarkFlagsMutuallyExclusive("after", "before")
	cmd.ValidArgsFunction = completeEnvironments(f, env)
	return cmd
}

// privateValues lists, for a table, every private value of an operator
// view (siteprotocol.PrivateValue) as where=size/sha256-prefix.
func privateValues(prefix string, raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	var out []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if p, ok := x["private"].(bool); ok && p {
				size, _ := x["size_bytes"].(float64)
				sum, _ := x["sha256"].(string)
				out = append(out, fmt.Sprintf("%s=%dB/sha256:%s", path, int64(size), sum[:min(12, len(sum))]))
				return
			}
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				walk(path+"."+k, x[k])
			}
		case []any:
			for i, e := range x {
				walk(path+"["+strconv.Itoa(i)+"]", e)
			}
		}
	}
	walk(prefix, v)
	return out
}

func newCtlBindingsCommand(f *ctlFlags, env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bindings <environment>",
		Short: "Show a stream's binding history: the first pull's binding and every rebind and unbind",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			var body struct {
				Bindings []httpapi.BindingBody `json:"bindings"`
			}
			raw, err := c.get(cmd.Context(), "/execution/v1/streams/"+url.PathEscape(args[0])+"/binding-history", &body)
			if err != nil {
				return err
			}
			if f.output == "json" {
				return printJSON(cmd.OutOrStdout(), raw)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RECORDED\tACTION\tINSTALLATION\tPREVIOUS\tPRINCIPAL\tREASON")
			for _, b := range body.Bindings {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", b.RecordedAt, b.Action, orDash(b.InstallationID), orDash(b.PreviousInstallationID), b.Principal, b.Reason)
			}
			return tw.Flush()
		},
	}
	cmd.ValidArgsFunction = completeEnvironments(f, env)
	return cmd
}

// readBody reads a JSON request body from path ("-": standard input).
func readBody(cmd *cobra.Command, path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(io.LimitReader(cmd.InOrStdin(), siteprotocol.MaxCommandBytes+1))
	}
	return os.ReadFile(path)
}

// mutate sends a mutating call and prints its answer (JSON in both
// outputs: the answer is the record of what changed).
func ctlMutate(cmd *cobra.Command, f *ctlFlags, method, path string, body []byte) error {
	c, err := f.client()
	if err != nil {
		return err
	}
	raw, err := c.call(cmd.Context(), method, path, body)
	if err != nil {
		return err
	}
	return printJSON(cmd.OutOrStdout(), raw)
}

func newCtlAppendCommand(f *ctlFlags, env Env) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "append <environment> --file command.json",
		Short: "Append a command to a stream (a service key; docs/site-protocol.md#the-command)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := readBody(cmd, file)
			if err != nil {
				return fmt.Errorf("--file: %w", err)
			}
			return ctlMutate(cmd, f, http.MethodPost, "/execution/v1/streams/"+url.PathEscape(args[0])+"/commands", body)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "-", "the command as JSON (-: standard input)")
	cmd.ValidArgsFunction = completeEnvironments(f, env)
	return cmd
}

func newCtlRebindCommand(f *ctlFlags, env Env) *cobra.Command {
	var (
		installation, reason string
		unbind               bool
	)
	cmd := &cobra.Command{
		Use:   "rebind <environment> (--installation ID | --unbind) --reason TEXT",
		Short: "Bind a stream to a Runtime installation, or unbind it (a service key)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := json.Marshal(siteprotocol.Rebind{InstallationID: installation, Unbind: unbind, Reason: reason})
			if err != nil {
				return err
			}
			return ctlMutate(cmd, f, http.MethodPost, "/execution/v1/streams/"+url.PathEscape(args[0])+"/rebind", body)
		},
	}
	cmd.Flags().StringVar(&installation, "installation", "", "the installation to bind")
	cmd.Flags().BoolVar(&unbind, "unbind", false, "unbind the stream: the next installation that pulls binds it")
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded with who and when)")
	cmd.MarkFlagsMutuallyExclusive("installation", "unbind")
	cmd.MarkFlagsOneRequired("installation", "unbind")
	_ = cmd.MarkFlagRequired("reason")
	cmd.ValidArgsFunction = completeEnvironments(f, env)
	return cmd
}

func newCtlPlanCommand(f *ctlFlags, env Env) *cobra.Command {
	var (
		project, environment string
		demand               map[string]int64
	)
	cmd := &cobra.Command{
		Use:   "plan --project ID --environment ID --demand cpu=2000,memory=4294967296",
		Short: "Plan a demand against the Project's allocation (a service key; docs/execution-ports.md#capacity-planning)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body, err := json.Marshal(httpapi.PlanRequest{Project: project, Environment: environment, Demand: demand})
			if err != nil {
				return err
			}
			return ctlMutate(cmd, f, http.MethodPost, "/execution/v1/plans", body)
		},
	}
	cmd.Flags().StringVar(&project, "project", "", "the canonical Project (a lower-case UUID)")
	cmd.Flags().StringVar(&environment, "environment", "", "the execution environment")
	cmd.Flags().StringToInt64Var(&demand, "demand", nil, "the demand in canonical units: cpu (millicores), memory and storage (bytes), gpu.<vendor> (devices)")
	_ = cmd.MarkFlagRequired("project")
	_ = cmd.MarkFlagRequired("environment")
	_ = cmd.RegisterFlagCompletionFunc("environment", completeEnvironments(f, env))
	return cmd
}

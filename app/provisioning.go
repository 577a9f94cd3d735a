package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/httpapi"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/waldur"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/cabundle"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/database"
)

// ProvisioningRole is the provisioning role: the resource_provisioning
// context on its own database (--provisioning-database-url; the embedded
// default SQLite file ./var/provisioning.sqlite when empty). It needs
// --waldur-instance, the Waldur instance URL (absolute https or http) whose
// Project bindings resolve allocations, and reads each environment's Site
// from environments.yaml (--environments-file, shared with the execution
// role; serve refuses the removed --environment-site naming that file).
func ProvisioningRole() Role {
	cfg := resourceprovisioning.Config{}
	return centralDatabase(Role{
		Name:    "provisioning",
		Context: resourceprovisioning.Name,
		Central: true,
		Flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&cfg.DatabaseURL, resourceprovisioning.Database().URLFlag, "", "resource_provisioning database: postgres://… or sqlite:<path> (default: the embedded SQLite file "+resourceprovisioning.Database().DefaultPath+")")
			fs.Int32Var(&cfg.MaxConns, resourceprovisioning.Database().MaxConnsFlag, resourceprovisioning.DefaultMaxConns, "most PostgreSQL connections of resource_provisioning")
			fs.StringVar(&cfg.WaldurInstance, "waldur-instance", "", "the Waldur instance URL (e.g. https://waldur.example.org) whose Project bindings in Beto events resolve allocations; required to serve")
			fs.DurationVar(&cfg.Freshness, "allocation-freshness", 15*time.Minute, "an allocation whose last report was received longer ago reads as not ready (pending, stale)")
			fs.DurationVar(&cfg.ReportClockSkew, "report-clock-skew", 5*time.Minute, "a report whose observed_at lies further than this beyond the server clock is refused (422), so an agent's clock glitch cannot lock an allocation")
		},
		Preflight: func(log *zap.Logger) error {
			if err := cfg.Validate(); err != nil {
				return err
			}
			resourceprovisioning.Database().Describe(log, cfg.DatabaseSettings())
			return nil
		},
		Module: func(migrate bool) fx.Option {
			c := cfg
			c.Migrate = migrate
			return resourceprovisioning.Module(c)
		},
		OpenAPI: func(api huma.API) { httpapi.Register(api, &httpapi.Handlers{}) },
	}, resourceprovisioning.Database(), func() database.Settings { return cfg.DatabaseSettings() })
}

// newProvisioningCommand is `metallo provisioning …`, the operator commands
// of the provisioning role.
func newProvisioningCommand(env Env) *cobra.Command {
	cmd := &cobra.Command{Use: "provisioning", Short: "Resource Provisioning tools (Waldur mapping)"}
	cmd.AddCommand(newWaldurReportCommand(env))
	return cmd
}

// newWaldurReportCommand maps Waldur resource records to a report and prints
// or posts it (docs/resource-provisioning.md#the-waldur-mapping).
func newWaldurReportCommand(env Env) *cobra.Command {
	var (
		site, file, post, keyFile, caFile, observed, vendor string
		timeout                                             time.Duration
	)
	cmd := &cobra.Command{
		Use:   "waldur-report --site S --resource FILE [--post URL --key-file F [--provisioning-ca-file CA]] [--observed-at T] [--gpu-vendor nvidia]",
		Short: "Map Waldur marketplace resource records to a provisioning report; print it or post it",
		Long: `Read one Waldur marketplace resource record, or a JSON array of them, from FILE
("-" for standard input) and map each to a report: uuid → provider_resource_id,
offering_uuid, project_uuid, state, paused; limits → configured limits (cpu cores
× 1000 millicores; ram and storage GiB → bytes; gpu → gpu.<vendor> devices);
backend_metadata.quota (Kubernetes quantities) → applied limits;
backend_metadata.name → native_scope. observed_at is now (to the microsecond)
unless --observed-at gives it (RFC 3339, at most microsecond precision). A record
without uuid, offering_uuid, project_uuid or state, with a limit that is not a
number, or with a quota quantity that is not a whole number of millicores, bytes
or devices within 64 bits fails before anything is posted, naming the record and
the field (with several such records, their count and the first five).

Without --post the request body {"reports": […]} is printed. With --post the
reports are posted in batches of at most 100 to URL (the provisioning API's base
URL, http or https; /resource-provisioning/<site>/reports is appended unless the
path already ends in /reports) with the Site key read from --key-file (refused
without --post), verifying an https URL's certificate against --provisioning-ca-file
when given (a PEM bundle; the system roots otherwise), and each answer is
printed. A refused batch (4xx/5xx) fails the command with the problem's reason.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd, env); err != nil {
				return err
			}
			if _, err := auth.ParsePrincipal(auth.KindSite + ":" + site); err != nil {
				return config.Invalid("site", site, err)
			}
			if file == "" {
				return config.Invalid("resource", file, errors.New("a file with Waldur resource records is required"))
			}
			if _, err := waldur.GPUKey(vendor); err != nil {
				return config.Invalid("gpu-vendor", vendor, err)
			}
			if post == "" && keyFile != "" {
				return config.Invalid("key-file", keyFile, errors.New("only used with --post (without it the report is printed, not sent)"))
			}
			if post == "" && caFile != "" {
				return config.Invalid("provisioning-ca-file", caFile, errors.New("only used with --post (without it the report is printed, not sent)"))
			}
			var client *http.Client
			if post != "" {
				if _, err := httpapi.ReportsURL(post, site); err != nil {
					return config.Invalid("post", post, err)
				}
				c, err := cabundle.Client(caFile, timeout)
				if err != nil {
					return config.Invalid("provisioning-ca-file", caFile, err)
				}
				client = c
			}
			at := clock.System{}.Now().Truncate(time.Microsecond)
			if observed != "" {
				t, err := time.Parse(time.RFC3339Nano, observed)
				if err != nil {
					return config.Invalid("observed-at", observed, err)
				}
				if t.Nanosecond()%int(time.Microsecond) != 0 {
					return config.Invalid("observed-at", observed, errors.New("at most microsecond precision (six fractional digits)"))
				}
				at = t
			}
			raw, err := readInput(cmd.InOrStdin(), file)
			if err != nil {
				return err
			}
			records, err := waldur.ParseResources(raw)
			if err != nil {
				return fmt.Errorf("--resource %s: %w", file, err)
			}
			reports, err := waldur.Reports(records, waldur.Options{GPUVendor: vendor, ObservedAt: at})
			if err != nil {
				return fmt.Errorf("--resource %s: %w", file, err)
			}
			out := cmd.OutOrStdout()
			if post == "" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(httpapi.NewReportsRequest(reports))
			}
			return postReports(cmd.Context(), out, client, post, site, keyFile, reports)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&site, "site", "", "the Site whose agent reports (the key must be site:<site>)")
	fs.StringVar(&file, "resource", "", `file with one Waldur resource record or a JSON array of them ("-": standard input)`)
	fs.StringVar(&post, "post", "", "post to this provisioning API base URL instead of printing")
	fs.StringVar(&keyFile, "key-file", "", "file holding the Site's bearer key (with --post)")
	// Named as the execution role's flag of the same meaning (and so its
	// METALLO_ variable), not --ca-file, which is the Runtime's Site API CA.
	fs.StringVar(&caFile, "provisioning-ca-file", "", "PEM bundle to verify the provisioning API's certificate (with --post; system roots when empty)")
	fs.StringVar(&observed, "observed-at", "", "observation time of the records, RFC 3339 with at most microsecond precision (default: now, to the microsecond)")
	fs.StringVar(&vendor, "gpu-vendor", waldur.DefaultGPUVendor, "accelerator vendor of Waldur's gpu limit: gpu.<vendor>")
	fs.DurationVar(&timeout, "timeout", 30*time.Second, "bound on each post")
	return cmd
}

func readInput(stdin io.Reader, file string) ([]byte, error) {
	if file == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("read standard input: %w", err)
		}
		return b, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, config.Invalid("resource", file, err)
	}
	return b, nil
}

func postReports(ctx context.Context, out io.Writer, client *http.Client, base, site, keyFile string, reports []domain.Report) error {
	if keyFile == "" {
		return config.Invalid("key-file", "", errors.New("--post needs the Site's key in --key-file"))
	}
	rawKey, err := os.ReadFile(keyFile)
	if err != nil {
		return config.Invalid("key-file", keyFile, err)
	}
	key := strings.TrimSpace(string(rawKey))
	if key == "" {
		return config.Invalid("key-file", keyFile, errors.New("the file holds no key"))
	}
	target, err := httpapi.ReportsURL(base, site)
	if err != nil {
		return config.Invalid("post", base, err)
	}
	for start := 0; start < len(reports); start += domain.MaxReportsPerBatch {
		end := min(start+domain.MaxReportsPerBatch, len(reports))
		answer, err := httpapi.PostReports(ctx, client, target, key, reports[start:end])
		if err != nil {
			return fmt.Errorf("reports %d–%d: %w", start, end-1, err)
		}
		if _, err := fmt.Fprintf(out, "%s\n", strings.TrimSpace(string(answer))); err != nil {
			return err
		}
	}
	return nil
}

package environments_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/platform/environments"
)

const hashA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" // sha256("test")

// A valid file: every environment by its ID with its Site, authority, backend (kubernetes when
// absent) and authentication, a relative kubeconfig resolved against the file's directory, which
// need not exist here (the execution role checks it: adaptors/environments).
func TestAValidFileGivesEachEnvironmentItsSiteBackendAndAuthentication(t *testing.T) {
	dir := t.TempDir()
	body := `environments:
  - id: alpha-k8s
    site: alpha
    authority: https://metallo.example.org
    auth: {key_sha256: ` + hashA + `}
  - id: alpha-hpc
    site: alpha
    authority: https://metallo.example.org
    backend: slurm
    auth: {key_sha256: ` + strings.Repeat("b", 64) + `}
  - id: beta-k8s
    site: beta
    authority: http://127.0.0.1:8080
    backend: kubernetes
    auth:
      tokenreview: {kubeconfig: beta.kubeconfig, username: "system:serviceaccount:metallo-runtime:runtime-k8s", audience: metallo}
`
	set, err := environments.Parse([]byte(body), dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := set.IDs(); strings.Join(got, ",") != "alpha-hpc,alpha-k8s,beta-k8s" {
		t.Fatalf("IDs %v, want them sorted", got)
	}
	for _, want := range []environments.Environment{
		{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org", Backend: environments.Kubernetes, Auth: environments.Auth{KeySHA256: hashA}},
		{ID: "alpha-hpc", Site: "alpha", Authority: "https://metallo.example.org", Backend: environments.Slurm, Auth: environments.Auth{KeySHA256: strings.Repeat("b", 64)}},
	} {
		if got, ok := set.Environment(want.ID); !ok || got.ID != want.ID || got.Site != want.Site || got.Authority != want.Authority ||
			got.Backend != want.Backend || got.Auth.KeySHA256 != want.Auth.KeySHA256 || got.Auth.TokenReview != nil {
			t.Errorf("%s: %+v %v, want %+v", want.ID, got, ok, want)
		}
	}
	beta, _ := set.Environment("beta-k8s")
	if tr := beta.Auth.TokenReview; beta.Backend != environments.Kubernetes || tr == nil || tr.Kubeconfig != filepath.Join(dir, "beta.kubeconfig") || tr.Audience != "metallo" {
		t.Errorf("beta-k8s: %+v (a relative kubeconfig is relative to the file)", beta)
	}
	if _, ok := set.Environment("gamma-k8s"); ok {
		t.Error("an unlisted environment was found")
	}
	if sites := set.Sites(); len(sites) != 3 || sites["alpha-k8s"] != "alpha" || sites["alpha-hpc"] != "alpha" || sites["beta-k8s"] != "beta" {
		t.Errorf("sites %v", sites)
	}
}

func entry(id, site, authority, auth string) string {
	return "  - id: " + id + "\n    site: " + site + "\n    authority: " + authority + "\n    auth: " + auth + "\n"
}

// Each fault is refused naming its entry and field.
func TestEveryInvalidEntryIsRefusedNamingTheEntry(t *testing.T) {
	good := entry("alpha-k8s", "alpha", "https://m.example.org", "{key_sha256: "+hashA+"}")
	for name, tc := range map[string]struct{ body, want string }{
		"no environment":        {"environments: []\n", "no environment is configured"},
		"an unknown member":     {"environments:\n" + good + "    colour: blue\n", `environments[0] (alpha-k8s): unknown field "colour"`},
		"an unknown auth field": {"environments:\n" + entry("alpha-k8s", "alpha", "https://m.example.org", "{key_sha256: "+hashA+", keyfile: k}"), `environments[0] (alpha-k8s): unknown field "auth.keyfile"`},
		"a field in capitals":   {"environments:\n" + good + "    Backend: slurm\n", `environments[0] (alpha-k8s): unknown field "Backend"`},
		"an unknown top field":  {"environments:\n" + good + "retired: []\n", `unknown field "retired"`},
		"a bad id":              {"environments:\n" + entry("alpha k8s", "alpha", "https://m.example.org", "{key_sha256: "+hashA+"}"), "environments[0] (alpha k8s): id"},
		"a duplicate id":        {"environments:\n" + good + entry("alpha-k8s", "alpha", "https://m.example.org", "{key_sha256: "+strings.Repeat("a", 64)+"}"), "environments[1] (alpha-k8s): id is listed twice"},
		"no site":               {"environments:\n" + entry("alpha-k8s", `""`, "https://m.example.org", "{key_sha256: "+hashA+"}"), "environments[0] (alpha-k8s): site"},
		"plain http to a host":  {"environments:\n" + entry("alpha-k8s", "alpha", "http://m.example.org", "{key_sha256: "+hashA+"}"), "environments[0] (alpha-k8s): authority"},
		"a relative authority":  {"environments:\n" + entry("alpha-k8s", "alpha", "metallo", "{key_sha256: "+hashA+"}"), "environments[0] (alpha-k8s): authority"},
		"an unknown backend":    {"environments:\n" + good + "    backend: nomad\n", `environments[0] (alpha-k8s): backend "nomad": want one of kubernetes, slurm`},
		"a backend in capitals": {"environments:\n" + good + "    backend: Kubernetes\n", `environments[0] (alpha-k8s): backend "Kubernetes"`},
		"no auth":               {"environments:\n" + entry("alpha-k8s", "alpha", "https://m.example.org", "{}"), "environments[0] (alpha-k8s): auth must give exactly one"},
		"both auths":            {"environments:\n" + entry("alpha-k8s", "alpha", "https://m.example.org", "{key_sha256: "+hashA+", tokenreview: {kubeconfig: k, username: u, audience: a}}"), "environments[0] (alpha-k8s): auth must give exactly one"},
		"an upper-case hash":    {"environments:\n" + entry("alpha-k8s", "alpha", "https://m.example.org", "{key_sha256: "+strings.ToUpper(hashA)+"}"), "environments[0] (alpha-k8s): auth.key_sha256"},
		"one key for two":       {"environments:\n" + good + entry("beta-k8s", "beta", "https://m.example.org", "{key_sha256: "+hashA+"}"), "environments[1] (beta-k8s): auth.key_sha256 is also the key of environment alpha-k8s"},
		"a partial tokenreview": {"environments:\n" + entry("alpha-k8s", "alpha", "https://m.example.org", "{tokenreview: {kubeconfig: k, username: u}}"), "environments[0] (alpha-k8s): auth.tokenreview needs"},
		"one review for two": {"environments:\n" + entry("alpha-k8s", "alpha", "https://m.example.org", "{tokenreview: {kubeconfig: k, username: u, audience: a}}") +
			entry("beta-k8s", "beta", "https://m.example.org", "{tokenreview: {kubeconfig: k, username: u, audience: a}}"), "environments[1] (beta-k8s): auth.tokenreview names the same cluster, username and audience as environment alpha-k8s"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := environments.Parse([]byte(tc.body), t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// One refusal names every fault of the file, so one edit fixes them all.
func TestEveryFaultOfTheFileIsReportedAtOnce(t *testing.T) {
	body := "environments:\n" +
		entry("alpha-k8s", "al/pha", "http://m.example.org", "{key_sha256: "+hashA+"}") + "    backend: nomad\n    retired: true\n" +
		entry("alpha-k8s", "alpha", "https://m.example.org", "{}") +
		entry("beta-k8s", "beta", "https://m.example.org", "{key_sha256: "+hashA+"}")
	_, err := environments.Parse([]byte(body), t.TempDir())
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"environments[0] (alpha-k8s): site", "environments[0] (alpha-k8s): authority", `environments[0] (alpha-k8s): unknown field "retired"`, `environments[0] (alpha-k8s): backend "nomad"`,
		"environments[1] (alpha-k8s): id is listed twice", "environments[1] (alpha-k8s): auth must give exactly one",
		"environments[2] (beta-k8s): auth.key_sha256 is also the key of environment alpha-k8s",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal lacks %q:\n%v", want, err)
		}
	}
}

// Load names the flag and the file; a file that is not there is refused too.
func TestLoadNamesTheFlag(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "environments.yaml")
	if _, err := environments.Load(path, nil, nil); err == nil || !strings.Contains(err.Error(), "--environments-file") {
		t.Fatalf("a missing file: %v", err)
	}
	if err := os.WriteFile(path, []byte("environments:\n"+entry("alpha-k8s", "alpha", "https://m.example.org", "{}")), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := environments.Load(path, nil, nil); err == nil || !strings.Contains(err.Error(), "--environments-file") || !strings.Contains(err.Error(), path) ||
		!strings.Contains(err.Error(), "environments[0] (alpha-k8s)") {
		t.Fatalf("a bad file: %v", err)
	}
}

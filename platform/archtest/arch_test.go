package archtest

import (
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/pharos-metallo/metallo"

type pkg struct {
	ImportPath string
	Imports    []string
	// TestImports and XTestImports are the imports of its _test.go files;
	// Deps every package its non-test files need, transitively.
	TestImports  []string
	XTestImports []string
	Deps         []string
	// Dir and GoFiles locate the package's non-test source files.
	Dir     string
	GoFiles []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Dir = "../.."
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(out)
	var pkgs []pkg
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("go list: %v", err)
	}
	return pkgs
}

var contextPkg = regexp.MustCompile(`^` + regexp.QuoteMeta(module) + `/contexts/([a-z]+)/(domain|application|adaptors)(/.*)?$`)

func isStd(path string) bool { return !strings.Contains(strings.SplitN(path, "/", 2)[0], ".") }

// inProcessOwner is the one allowed crossing between contexts: an
// in-process owner adaptor calls the owner context's application services
// directly (docs/execution-ports.md#owner-adaptors).
func inProcessOwner(from, to string) bool {
	return strings.Contains(from, "/adaptors/inprocess") && strings.HasSuffix(strings.SplitN(strings.TrimPrefix(to, module+"/contexts/"), "/", 3)[1], "application")
}

func TestDomainAndApplicationImportOnlyTheStandardLibraryTheirContextAndSiteProtocol(t *testing.T) {
	for _, v := range layerViolations(listPackages(t)) {
		t.Error(v)
	}
}

func TestNoContextImportsAnother(t *testing.T) {
	for _, v := range crossContextViolations(listPackages(t)) {
		t.Error(v)
	}
}

func TestNoExecutorFamilyImportsAnother(t *testing.T) {
	for _, v := range familyViolations(listPackages(t)) {
		t.Error(v)
	}
}

func TestPlatformIsDomainFree(t *testing.T) {
	for _, v := range platformViolations(listPackages(t)) {
		t.Error(v)
	}
}

// TestNoContextOrPlatformPackageImportsApp checks that app/, which
// composes the roles, is imported by nothing under contexts/ or platform/,
// their tests included, directly or through another package
// (docs/architecture.md#layer-rules).
func TestNoContextOrPlatformPackageImportsApp(t *testing.T) {
	for _, v := range appViolations(listPackages(t)) {
		t.Error(v)
	}
}

// TestNoProductionPackageImportsATestHarness checks that no package but a
// test harness (systemtest/…, testsetup, a …test package) needs one,
// directly or through another package: not app/, contexts/, platform/,
// standins/ nor the demo (docs/architecture.md#layer-rules).
func TestNoProductionPackageImportsATestHarness(t *testing.T) {
	for _, v := range harnessViolations(listPackages(t)) {
		t.Error(v)
	}
}

func TestOnlyPlatformOpensTheCentralDatabasesAndLoadsKubeconfigs(t *testing.T) {
	for _, v := range openerViolations(t, listPackages(t)) {
		t.Error(v)
	}
}

// TestTheOpenerRuleCatchesViolations proves the opener rule reports a
// planted sql.Open, pgxpool.New, goose call and kubeconfig load outside
// platform/, and accepts them in platform/, in the Runtime's journal
// adaptor, and a kubeconfig written (not loaded) anywhere.
func TestTheOpenerRuleCatchesViolations(t *testing.T) {
	dir := t.TempDir()
	src := `package x

import (
	"context"
	dbsql "database/sql"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func f(ctx context.Context) {
	_, _ = dbsql.Open("sqlite", "x")
	_, _ = pgxpool.New(ctx, "postgres://x")
	_ = goose.DialectPostgres
	_, _ = clientcmd.BuildConfigFromFlags("", "kubeconfig")
	_ = clientcmd.WriteToFile(*clientcmdapi.NewConfig(), "kubeconfig")
}
`
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	files := []string{"x.go"}
	pkgs := []pkg{
		{ImportPath: module + "/contexts/executionports/adaptors/pgstore", Dir: dir, GoFiles: files},
		{ImportPath: module + "/platform/database", Dir: dir, GoFiles: files},
		{ImportPath: module + "/contexts/siteruntime/adaptors/journal", Dir: dir, GoFiles: files},
	}
	v := openerViolations(t, pkgs)
	if len(v) != 4 || !strings.Contains(v[0], "database/sql.Open") || !strings.Contains(v[1], "pgxpool.New") ||
		!strings.Contains(v[2], "goose") || !strings.Contains(v[3], "clientcmd.BuildConfigFromFlags") {
		t.Errorf("opener rule: %q", v)
	}
	for _, x := range v {
		if !strings.Contains(x, "contexts/executionports/adaptors/pgstore") {
			t.Errorf("opener rule reports an allowed package: %s", x)
		}
	}
}

// TestTheRulesCatchViolations proves each rule reports a planted violation
// and accepts the allowed imports.
func TestTheRulesCatchViolations(t *testing.T) {
	c := module + "/contexts/"
	pkgs := []pkg{
		{ImportPath: c + "siteruntime/application", Imports: []string{"context", c + "siteruntime/domain", module + "/platform/siteprotocol", "go.uber.org/zap"}},
		{ImportPath: c + "siteruntime/domain", Imports: []string{c + "siteruntime/application"}},
		{ImportPath: c + "executionports/adaptors/inprocessowners", Imports: []string{c + "resourceprovisioning/application"}},
		{ImportPath: c + "executionports/adaptors/httpapi", Imports: []string{c + "resourceprovisioning/application"}},
		{ImportPath: module + "/platform/auth", Imports: []string{c + "siteruntime/domain"}},
		{ImportPath: c + "siteruntime/application/families/batch", Imports: []string{c + "siteruntime/application", c + "siteruntime/application/families/batch/internal"}},
		{ImportPath: c + "siteruntime/application/families/inference", Imports: []string{c + "siteruntime/application/families/appservice"}},
		{ImportPath: c + "siteruntime/adaptors/kube/families/batch", Imports: []string{c + "siteruntime/adaptors/kube", c + "siteruntime/application/families/batch"}},
		{ImportPath: c + "siteruntime/adaptors/kube/families/inference", Imports: []string{c + "siteruntime/adaptors/kube", c + "siteruntime/adaptors/kube/families/appservice"}},
		{ImportPath: c + "siteruntime/adaptors/kube", Imports: []string{c + "siteruntime/application/families/inference"}},
		{ImportPath: c + "siteruntime", Imports: []string{c + "siteruntime/adaptors/kube/families/batch", c + "siteruntime/application/families/batch"}},
	}
	if v := layerViolations(pkgs); len(v) != 2 || !strings.Contains(v[0], "go.uber.org/zap") || !strings.Contains(v[1], "siteruntime/application") {
		t.Errorf("layer rule: %q", v)
	}
	if v := crossContextViolations(pkgs); len(v) != 1 || !strings.Contains(v[0], "adaptors/httpapi") {
		t.Errorf("cross-context rule: %q", v)
	}
	if v := platformViolations(pkgs); len(v) != 1 {
		t.Errorf("platform rule: %q", v)
	}
	if v := familyViolations(pkgs); len(v) != 3 || !strings.Contains(v[0], "application/families/inference imports") ||
		!strings.Contains(v[1], "adaptors/kube/families/inference imports") || !strings.Contains(v[2], "adaptors/kube imports") {
		t.Errorf("family rule: %q", v)
	}
	apps := []pkg{
		{ImportPath: c + "siteruntime/adaptors/kube", XTestImports: []string{module + "/app"}},
		{ImportPath: module + "/platform/auth", TestImports: []string{module + "/systemtest/harness"}},
		{ImportPath: module + "/systemtest/harness", Deps: []string{module + "/app/cmd/x"}},
		{ImportPath: c + "executionports", Imports: []string{module + "/platform/auth"}},
		{ImportPath: module + "/systemtest/testbin", Imports: []string{module + "/app"}},
		{ImportPath: module + "/app", TestImports: []string{module + "/systemtest/harness"}},
	}
	if v := appViolations(apps); len(v) != 2 || !strings.Contains(v[0], "adaptors/kube") || !strings.Contains(v[1], "platform/auth") {
		t.Errorf("app rule: %q", v)
	}
	harnesses := []pkg{
		{ImportPath: module + "/deploy/demo", Deps: []string{module + "/standins/githost", module + "/platform/database/dbtest"}},
		{ImportPath: module + "/standins/githost", Deps: []string{module + "/systemtest/harness"}},
		{ImportPath: c + "siteruntime", Deps: []string{module + "/platform/testsetup"}},
		{ImportPath: module + "/platform/gittest", Deps: []string{module + "/platform/database/dbtest", module + "/standins/githost"}},
		{ImportPath: module + "/systemtest/testbin", Deps: []string{module + "/systemtest/harness", module + "/app"}},
		{ImportPath: module + "/app", Deps: []string{module + "/platform/auth"}, TestImports: []string{module + "/platform/kube/kubetest"}},
	}
	if v := harnessViolations(harnesses); len(v) != 3 || !strings.Contains(v[0], "deploy/demo") || !strings.Contains(v[1], "standins/githost") ||
		!strings.Contains(v[2], "testsetup") {
		t.Errorf("harness rule: %q", v)
	}
}

// isApp reports whether path is app/ or a package under it.
func isApp(path string) bool { return path == module+"/app" || strings.HasPrefix(path, module+"/app/") }

// appViolations reports every package under contexts/ or platform/ whose
// files, tests included, import app/ or a package that needs it.
func appViolations(pkgs []pkg) []string {
	deps := map[string][]string{}
	for _, p := range pkgs {
		deps[p.ImportPath] = p.Deps
	}
	var out []string
	for _, p := range pkgs {
		if !strings.HasPrefix(p.ImportPath, module+"/contexts/") && !strings.HasPrefix(p.ImportPath, module+"/platform/") {
			continue
		}
		for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
			if isApp(imp) || slices.ContainsFunc(deps[imp], isApp) {
				out = append(out, p.ImportPath+" (its tests included) imports "+imp+": nothing under contexts/ or platform/ imports app/, which composes the roles")
			}
		}
	}
	return out
}

// isHarness reports whether path is one of the project's test harness
// packages: under systemtest/, platform/testsetup, or named …test (dbtest,
// kubetest, gittest, routetest, …).
func isHarness(path string) bool {
	if !strings.HasPrefix(path, module+"/") {
		return false
	}
	return strings.HasPrefix(path, module+"/systemtest/") || path == module+"/systemtest" ||
		path == module+"/platform/testsetup" || strings.HasSuffix(filepath.Base(path), "test")
}

// harnessViolations reports every package that is no test harness whose
// non-test files need one, directly or through another package.
func harnessViolations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		if isHarness(p.ImportPath) {
			continue
		}
		for _, dep := range p.Deps {
			if isHarness(dep) {
				out = append(out, p.ImportPath+" needs the test harness "+dep+": only tests and other harnesses use the harnesses (the demo uses standins/)")
			}
		}
	}
	return out
}

func layerViolations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		m := contextPkg.FindStringSubmatch(p.ImportPath)
		if m == nil || (m[2] != "domain" && m[2] != "application") {
			continue
		}
		own := module + "/contexts/" + m[1] + "/"
		for _, imp := range p.Imports {
			switch {
			case isStd(imp):
			case imp == module+"/platform/siteprotocol":
			case strings.HasPrefix(imp, own+"domain"):
			case strings.HasPrefix(imp, own+"application") && m[2] == "application":
			default:
				out = append(out, p.ImportPath+" imports "+imp+": domain and application may import only the standard library, their own context's inner packages and platform/siteprotocol")
			}
		}
	}
	return out
}

func crossContextViolations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		from := contextOf(p.ImportPath)
		if from == "" {
			continue
		}
		for _, imp := range p.Imports {
			to := contextOf(imp)
			if to != "" && to != from && !inProcessOwner(p.ImportPath, imp) {
				out = append(out, p.ImportPath+" imports "+imp+": contexts do not import each other (only an adaptors/inprocess… owner adaptor may call the owner's application)")
			}
		}
	}
	return out
}

func platformViolations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		if !strings.HasPrefix(p.ImportPath, module+"/platform/") {
			continue
		}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, module+"/contexts/") || strings.HasPrefix(imp, module+"/app") {
				out = append(out, p.ImportPath+" imports "+imp+": platform packages never import contexts or app")
			}
		}
	}
	return out
}

// familyPkg matches a package of one executor family (in any layer): its
// context's path up to families/, and the family's name
// (docs/architecture.md#executor-families).
var familyPkg = regexp.MustCompile(`^(.*/)families/([a-z0-9]+)(/.*)?$`)

// familyViolations reports a package of one executor family (its
// application package, its Kubernetes adaptor package) importing a package
// of another, and a shared adaptor package (one under adaptors/ outside
// families/) importing any family's: what families share lives in the
// shared packages, and only the composition (the context's module) picks
// the families.
func familyViolations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		m := familyPkg.FindStringSubmatch(p.ImportPath)
		if m == nil {
			if strings.Contains(p.ImportPath, "/adaptors/") {
				for _, imp := range p.Imports {
					if familyPkg.MatchString(imp) {
						out = append(out, p.ImportPath+" imports "+imp+": a shared adaptor package never imports an executor family's")
					}
				}
			}
			continue
		}
		for _, imp := range p.Imports {
			if n := familyPkg.FindStringSubmatch(imp); n != nil && n[2] != m[2] {
				out = append(out, p.ImportPath+" imports "+imp+": an executor family's packages never import another family's")
			}
		}
	}
	return out
}

func contextOf(path string) string {
	rest, ok := strings.CutPrefix(path, module+"/contexts/")
	if !ok {
		return ""
	}
	return strings.SplitN(rest, "/", 2)[0]
}

// openers are the calls that open a database or load a Kubernetes client
// configuration, by import path: the named identifiers, or every identifier
// but the named exceptions (except). In the main module only platform/
// uses them (platform/database for the central contexts' databases,
// platform/kube/kubeconfig for kubeconfigs); the Runtime's journal adaptor
// keeps its own SQLite handling (docs/architecture.md#layer-rules).
var openers = map[string]struct {
	names  []string
	except []string
}{
	"database/sql":                     {names: []string{"Open", "OpenDB"}},
	"github.com/jackc/pgx/v5":          {names: []string{"Connect", "ConnectConfig"}},
	"github.com/jackc/pgx/v5/pgxpool":  {names: []string{"New", "NewWithConfig"}},
	"github.com/jackc/pgx/v5/stdlib":   {names: []string{"OpenDB", "OpenDBFromPool", "GetDefaultDriver"}},
	"github.com/pressly/goose/v3":      {except: []string{}},
	"github.com/pressly/goose/v3/lock": {except: []string{}},
	"k8s.io/client-go/tools/clientcmd": {except: []string{"WriteToFile", "Write"}},
	"k8s.io/client-go/rest":            {names: []string{"InClusterConfig"}},
}

// openerAllowed reports whether a package may use the openers.
func openerAllowed(path string) bool {
	return strings.HasPrefix(path, module+"/platform/") || path == module+"/contexts/siteruntime/adaptors/journal" ||
		strings.HasPrefix(path, module+"/contexts/siteruntime/adaptors/journal/")
}

// openerViolations parses each package's non-test files and reports every
// use of an opener outside the allowed packages.
func openerViolations(t *testing.T, pkgs []pkg) []string {
	t.Helper()
	var out []string
	fset := token.NewFileSet()
	for _, p := range pkgs {
		if !strings.HasPrefix(p.ImportPath, module+"/") || openerAllowed(p.ImportPath) {
			continue
		}
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			local := map[string]string{} // local name → import path of an opener package
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if _, ok := openers[path]; !ok {
					continue
				}
				n := filepath.Base(path)
				if strings.HasPrefix(n, "v") && strings.Count(path, "/") > 1 {
					if _, err := strconv.Atoi(n[1:]); err == nil {
						n = filepath.Base(filepath.Dir(path))
					}
				}
				if imp.Name != nil {
					n = imp.Name.Name
				}
				local[n] = path
			}
			if len(local) == 0 {
				continue
			}
			ast.Inspect(f, func(node ast.Node) bool {
				sel, ok := node.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				x, ok := sel.X.(*ast.Ident)
				if !ok {
					return true
				}
				path, ok := local[x.Name]
				if !ok {
					return true
				}
				rule := openers[path]
				bad := rule.except != nil && !contains(rule.except, sel.Sel.Name) || contains(rule.names, sel.Sel.Name)
				if bad {
					out = append(out, fset.Position(sel.Pos()).String()+": "+p.ImportPath+" uses "+path+"."+sel.Sel.Name+
						": in the main module only platform/ opens the central contexts' databases (platform/database) and loads kubeconfigs (platform/kube/kubeconfig)")
				}
				return true
			})
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

package archtest

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

const module = "github.com/pharos-metallo/metallo"

type pkg struct {
	ImportPath string
	Imports    []string
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

func TestPlatformIsDomainFree(t *testing.T) {
	for _, v := range platformViolations(listPackages(t)) {
		t.Error(v)
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

func contextOf(path string) string {
	rest, ok := strings.CutPrefix(path, module+"/contexts/")
	if !ok {
		return ""
	}
	return strings.SplitN(rest, "/", 2)[0]
}

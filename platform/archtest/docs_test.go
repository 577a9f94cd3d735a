package archtest

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository's root, from this package's directory.
const repoRoot = "../.."

// docsDir is where the project's documents live, relative to repoRoot.
const docsDir = "docs"

// scannedFile reports whether the citation checks read the file at rel (a
// slash-separated path relative to repoRoot): Go, Markdown, YAML, SQL and
// shell files and Makefiles, outside version control, build output and
// local state.
func scannedFile(rel string) bool {
	switch filepath.Ext(rel) {
	case ".go", ".md", ".yaml", ".yml", ".sql", ".sh":
		return true
	}
	return filepath.Base(rel) == "Makefile"
}

func skippedDir(rel string) bool {
	switch rel {
	case ".git", "var", "bin", "deploy/localcluster/var":
		return true
	}
	return strings.HasSuffix(rel, "/node_modules")
}

// repoFiles returns every scanned file of the repository with its text.
func repoFiles(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repoRoot, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && skippedDir(rel) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !scannedFile(rel) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files[rel] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("found only %d files under %s: is the test running in its package directory?", len(files), repoRoot)
	}
	return files
}

// headingAnchors returns the GitHub-style anchors of a Markdown document's
// headings: the heading's text in lower case, every character that is not
// a letter, digit, space, '-' or '_' dropped, spaces turned into '-'; a
// repeated anchor gets "-1", "-2", … Headings inside fenced code blocks
// are not headings.
func headingAnchors(markdown string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(markdown, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimLeft(line, "#")
		if text == "" || text[0] != ' ' {
			continue
		}
		a := anchorOf(strings.TrimSpace(text))
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func anchorOf(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// A citation of a document from anywhere: docs/<file>.md or
// docs/<file>.md#<anchor>.
var docCitation = regexp.MustCompile(`\bdocs/([A-Za-z0-9_-]+\.md)(#[A-Za-z0-9_-]*)?`)

// A Markdown link target: ](target).
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

type citation struct {
	from   string // the citing file
	line   int
	file   string // the cited file, relative to repoRoot
	anchor string // "" for the file alone
}

func lineOf(text string, offset int) int { return strings.Count(text[:offset], "\n") + 1 }

// citations returns every citation of a file under docs/ in files: the
// docs/<file>.md[#anchor] form anywhere, and in Markdown files the links
// that lead into docs/ (relative to the linking file, or #anchor within a
// document of docs/).
func citations(files map[string]string) []citation {
	var out []citation
	for name, text := range files {
		for _, m := range docCitation.FindAllStringSubmatchIndex(text, -1) {
			c := citation{from: name, line: lineOf(text, m[0]), file: docsDir + "/" + text[m[2]:m[3]]}
			if m[4] >= 0 {
				c.anchor = text[m[4]+1 : m[5]]
			}
			out = append(out, c)
		}
		if filepath.Ext(name) != ".md" {
			continue
		}
		for _, m := range markdownLink.FindAllStringSubmatchIndex(text, -1) {
			target := text[m[2]:m[3]]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			if file == "" {
				file = name
			} else {
				file = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(name), file)))
			}
			out = append(out, citation{from: name, line: lineOf(text, m[0]), file: file, anchor: anchor})
		}
	}
	slices.SortFunc(out, func(a, b citation) int {
		if a.from != b.from {
			return strings.Compare(a.from, b.from)
		}
		return a.line - b.line
	})
	return out
}

// TestEveryCitedDocumentSectionExists checks that every docs/<file>.md#anchor
// cited in a Go, Markdown, YAML, SQL or shell file names an existing
// heading of that document, and that every relative Markdown link names an
// existing file (and, for a Markdown file, an existing heading): a renamed
// heading or a moved file breaks the build, not the reader.
func TestEveryCitedDocumentSectionExists(t *testing.T) {
	files := repoFiles(t)
	anchors := map[string]map[string]bool{}
	for name, text := range files {
		if filepath.Ext(name) == ".md" {
			anchors[name] = headingAnchors(text)
		}
	}
	n := 0
	for _, c := range citations(files) {
		n++
		if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(c.file))); err != nil {
			t.Errorf("%s:%d cites %s, which does not exist", c.from, c.line, c.file)
			continue
		}
		if c.anchor == "" {
			continue
		}
		heads, ok := anchors[c.file]
		if !ok {
			t.Errorf("%s:%d cites %s#%s, which is not a Markdown document of the repository", c.from, c.line, c.file, c.anchor)
			continue
		}
		if !heads[c.anchor] {
			t.Errorf("%s:%d cites %s#%s: no heading of %s has that anchor", c.from, c.line, c.file, c.anchor, c.file)
		}
	}
	if n == 0 {
		t.Fatal("no citation found at all")
	}
}

// outsidePatterns are citations of documents outside the repository: the
// shared design pages, the design records and the cases, by path, by file
// name, by record number or by calling them the design. (The patterns are
// assembled from pieces so that this file does not match them.)
var outsidePatterns = []*regexp.Regexp{
	regexp.MustCompile(`\.\./` + `shared\b`),
	regexp.MustCompile(`\bshared/(` + `design|seeds|cases)\b`),
	regexp.MustCompile(`(?i)\b` + `seed [0-9]{3}\b`),
	regexp.MustCompile(`\b[0-9]{3}_[0-9a-f]{16}` + `\.txt\b`),
	regexp.MustCompile(`(?i)\bthe ` + `seeds?\b`),
	regexp.MustCompile(`(?i)\bseed` + `'s\b`),
	regexp.MustCompile(`(?i)\bshared (Waldur )?` + `(cases|records)\b`),
	regexp.MustCompile(`(?i)\(` + `design\b`),
	regexp.MustCompile(`(?i)\b` + `design (README|"[^"]*")`),
	regexp.MustCompile(`(?i)\b` + `design:\s*(\.\./|` + "`" + `|[a-z-]+\.md)`),
}

// designPageNames are the file names of the documents (and of the former
// design pages); outside docs/ they may be named only as docs/<name>.
var designPageNames = regexp.MustCompile(`\b(site-protocol|site-runtime|resource-provisioning|execution-ports|testing|architecture|operations|localcluster-notes|native-notes|slurm-notes)` + `\.md\b`)

// TestNothingCitesADocumentOutsideTheRepository checks that no file names
// a path or a document outside the repository, and that outside docs/ a
// document is cited by its path in the repository (docs/<file>.md), never
// by its bare name: the repository must stand on its own.
func TestNothingCitesADocumentOutsideTheRepository(t *testing.T) {
	files := repoFiles(t)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		text := files[name]
		for _, p := range outsidePatterns {
			for _, m := range p.FindAllStringIndex(text, -1) {
				t.Errorf("%s:%d names a document outside the repository: %q; cite docs/<file>.md#<section>", name, lineOf(text, m[0]), text[m[0]:m[1]])
			}
		}
		if strings.HasPrefix(name, docsDir+"/") {
			continue
		}
		for _, m := range designPageNames.FindAllStringIndex(text, -1) {
			if !strings.HasSuffix(text[:m[0]], docsDir+"/") {
				t.Errorf("%s:%d names %q without its path; cite docs/%s#<section>", name, lineOf(text, m[0]), text[m[0]:m[1]], text[m[0]:m[1]])
			}
		}
	}
}

// ruleSections are the sections of docs/ that state the rules the code
// must cite where it applies them.
var ruleSections = []string{
	"docs/site-protocol.md#the-digest-rule",
	"docs/site-protocol.md#installation-fencing",
	"docs/site-runtime.md#the-fold-of-the-clear",
	"docs/site-runtime.md#quota-means-queued",
	"docs/site-runtime.md#the-spec-comparison",
	"docs/site-runtime.md#what-a-torn-last-commit-means",
	"docs/execution-ports.md#the-capacity-rule",
	"docs/resource-provisioning.md#the-lifecycle-precedence",
	"docs/resource-provisioning.md#freshness",
	"docs/resource-provisioning.md#the-change-feeds-ordering",
}

// TestEveryRuleSectionIsCitedFromCode checks that each rule section is
// cited from at least one non-test Go file (the code that applies it).
func TestEveryRuleSectionIsCitedFromCode(t *testing.T) {
	files := repoFiles(t)
	for _, section := range ruleSections {
		found := false
		for name, text := range files {
			if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") && strings.Contains(text, section) {
				if i := strings.Index(text, section) + len(section); i == len(text) || !isAnchorChar(rune(text[i])) {
					found = true
					break
				}
			}
		}
		if !found {
			t.Errorf("no Go file cites %s: cite it where the rule is applied", section)
		}
	}
}

func isAnchorChar(r rune) bool {
	return r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// TestTheCitationChecksCatchWhatTheyMust proves the checks can fail: a
// heading's anchor as GitHub writes it, a missing anchor, a citation of an
// outside path and a bare page name.
func TestTheCitationChecksCatchWhatTheyMust(t *testing.T) {
	doc := "# The Site Runtime (`site_runtime`, role `runtime`)\n## The change feed's ordering\n## Routes\n```\n## Not a heading\n```\n## Routes\n"
	got := headingAnchors(doc)
	for _, want := range []string{"the-site-runtime-site_runtime-role-runtime", "the-change-feeds-ordering", "routes", "routes-1"} {
		if !got[want] {
			t.Errorf("anchor %q missing from %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a line inside a code block counted as a heading")
	}
	cs := citations(map[string]string{
		"a.go":            "// see docs/site-runtime.md#journals and docs/operations.md",
		docsDir + "/x.md": "[a](site-runtime." + "md#stop-conditions) [b](#here) [c](https://example.org/x.md)",
		"deploy/y/README": "not markdown: [a](z.md)",
	})
	want := []citation{
		{from: "a.go", line: 1, file: "docs/site-runtime.md", anchor: "journals"},
		{from: "a.go", line: 1, file: "docs/operations.md"},
		{from: docsDir + "/x.md", line: 1, file: "docs/site-runtime.md", anchor: "stop-conditions"},
		{from: docsDir + "/x.md", line: 1, file: docsDir + "/x.md", anchor: "here"},
	}
	if !slices.Equal(cs, want) {
		t.Errorf("citations:\n got %v\nwant %v", cs, want)
	}
	bad := []string{
		"see ../" + "shared/" + "design/site-runtime." + "md",
		"(seed " + "000, \"Native qualification\")",
		"as the " + "seed writes them",
		"(" + "design \"Report body\")",
	}
	for _, text := range bad {
		matched := false
		for _, p := range outsidePatterns {
			matched = matched || p.MatchString(text)
		}
		if !matched {
			t.Errorf("%q is not caught", text)
		}
	}
	for _, ok := range []string{"kill test seed %d", "strictly serial by design: commit #1", "docs/site-runtime.md#journals"} {
		for _, p := range outsidePatterns {
			if p.MatchString(ok) {
				t.Errorf("%q is caught by %s", ok, p)
			}
		}
	}
	if !designPageNames.MatchString("(site-runtime." + "md, \"Journals\")") {
		t.Error("a bare page name is not caught")
	}
}

// Command lanecheck reads `go test -json` output on stdin (or from -file),
// prints a readable account of it (each package's result and the output of
// every failed test), and fails when any test failed, any test was skipped,
// or a required lane ran no test. A test belongs to a lane when its output
// contains the line "metallo-lane: <lane>" (logged by the lane's test
// helpers: dbtest for postgres, kubetest for kubernetes, gittest for
// githost, slurmtest for slurm).
//
// Usage: go test -json ./... | lanecheck -require postgres,kubernetes
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Output     string
	Elapsed    float64
}

var laneRe = regexp.MustCompile(`metallo-lane: ([a-z0-9-]+)`)

type key struct{ pkg, test string }

func main() {
	require := flag.String("require", "", "comma-separated lanes that must run at least one test")
	file := flag.String("file", "", "read go test -json from this file instead of stdin")
	quiet := flag.Bool("quiet", false, "print only failures and the summary")
	flag.Parse()
	in := io.Reader(os.Stdin)
	if *file != "" {
		f, err := os.Open(*file)
		if err != nil {
			fmt.Fprintln(os.Stderr, "lanecheck:", err)
			os.Exit(2)
		}
		defer f.Close()
		in = f
	}
	os.Exit(run(in, os.Stdout, strings.Split(*require, ","), *quiet))
}

func run(in io.Reader, out io.Writer, require []string, quiet bool) int {
	output := map[key]*strings.Builder{}
	lanes := map[string]map[key]bool{}
	var failed, skipped []key
	passed := 0
	pkgFailed := map[string]bool{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil {
			// Build errors and other non-JSON lines pass through.
			fmt.Fprintln(out, string(line))
			continue
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "build-output":
			fmt.Fprint(out, e.Output)
		case "build-fail":
			fmt.Fprintf(out, "FAIL  %s (build failed)\n", e.ImportPath)
			pkgFailed[e.ImportPath] = true
		case "output":
			b := output[k]
			if b == nil {
				b = &strings.Builder{}
				output[k] = b
			}
			b.WriteString(e.Output)
			if e.Test != "" {
				if m := laneRe.FindStringSubmatch(e.Output); m != nil {
					if lanes[m[1]] == nil {
						lanes[m[1]] = map[key]bool{}
					}
					lanes[m[1]][k] = true
				}
			}
		case "pass":
			if e.Test != "" {
				passed++
			} else if !quiet {
				fmt.Fprintf(out, "ok    %s (%.1fs)\n", e.Package, e.Elapsed)
			}
		case "skip":
			if e.Test != "" {
				skipped = append(skipped, k)
			}
		case "fail":
			if e.Test != "" {
				failed = append(failed, k)
			} else {
				pkgFailed[e.Package] = true
				fmt.Fprintf(out, "FAIL  %s (%.1fs)\n", e.Package, e.Elapsed)
				if b := output[k]; b != nil && !hasTestFailure(failed, e.Package) {
					fmt.Fprint(out, indent(b.String()))
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(out, "lanecheck: read:", err)
		return 2
	}
	status := 0
	for _, k := range failed {
		fmt.Fprintf(out, "\n--- FAIL %s %s\n%s", k.pkg, k.test, indent(output[k].String()))
		status = 1
	}
	for _, k := range skipped {
		fmt.Fprintf(out, "\n--- SKIP %s %s (skips are not allowed: a lane must run or fail)\n%s", k.pkg, k.test, indent(output[k].String()))
		status = 1
	}
	if len(pkgFailed) > 0 {
		status = 1
	}
	names := make([]string, 0, len(lanes))
	for l := range lanes {
		names = append(names, l)
	}
	sort.Strings(names)
	fmt.Fprintf(out, "\n%d tests passed, %d failed, %d skipped", passed, len(failed), len(skipped))
	for _, l := range names {
		fmt.Fprintf(out, "; lane %s: %d tests", l, len(lanes[l]))
	}
	fmt.Fprintln(out)
	for _, r := range require {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		if len(lanes[r]) == 0 {
			fmt.Fprintf(out, "lane %s ran no test: it must run (see the README's test section)\n", r)
			status = 1
		}
	}
	return status
}

func hasTestFailure(failed []key, pkg string) bool {
	for _, k := range failed {
		if k.pkg == pkg {
			return true
		}
	}
	return false
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return "    " + strings.Join(lines, "\n    ") + "\n"
}

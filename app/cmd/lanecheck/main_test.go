package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func jsonl(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

func TestLaneWithNoTestFails(t *testing.T) {
	in := jsonl(
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    x_test.go:1: metallo-lane: postgres\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA"}`,
		`{"Action":"pass","Package":"p"}`,
	)
	var out strings.Builder
	if code := run(strings.NewReader(in), &out, []string{"postgres"}, true); code != 0 {
		t.Fatalf("postgres lane ran a test, want 0, got %d: %s", code, out.String())
	}
	out.Reset()
	if code := run(strings.NewReader(in), &out, []string{"postgres", "kubernetes"}, true); code == 0 || !strings.Contains(out.String(), "lane kubernetes ran no test") {
		t.Fatalf("want failure naming the kubernetes lane, got %d: %s", code, out.String())
	}
}

func TestAnySkippedTestFails(t *testing.T) {
	in := jsonl(
		`{"Action":"run","Package":"p","Test":"TestB"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"--- SKIP: TestB\n"}`,
		`{"Action":"skip","Package":"p","Test":"TestB"}`,
		`{"Action":"skip","Package":"q"}`,
	)
	var out strings.Builder
	if code := run(strings.NewReader(in), &out, nil, true); code == 0 || !strings.Contains(out.String(), "SKIP p TestB") {
		t.Fatalf("want failure for the skipped test, got %d: %s", code, out.String())
	}
}

func TestFailedTestFailsAndShowsOutput(t *testing.T) {
	in := jsonl(
		`{"Action":"output","Package":"p","Test":"TestC","Output":"boom\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestC"}`,
		`{"Action":"fail","Package":"p"}`,
	)
	var out strings.Builder
	if code := run(strings.NewReader(in), &out, nil, true); code != 1 || !strings.Contains(out.String(), "boom") {
		t.Fatalf("got %d: %s", code, out.String())
	}
}

// Every lane .ci/lanes requires (the Slurm lane among them) fails the run when it alone ran no
// test, naming it, and passes once one of its tests ran.
func TestEveryRequiredLaneFailsTheRunWhenItRanNoTest(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", ".ci", "lanes"))
	if err != nil {
		t.Fatal(err)
	}
	lanes := strings.Fields(string(b))
	if !slices.Contains(lanes, "slurm") {
		t.Errorf(".ci/lanes does not require the slurm lane: %v", lanes)
	}
	report := func(ran []string) string {
		var lines []string
		for i, l := range ran {
			test := fmt.Sprintf("Test%d", i)
			lines = append(lines,
				fmt.Sprintf(`{"Action":"run","Package":"p","Test":%q}`, test),
				fmt.Sprintf(`{"Action":"output","Package":"p","Test":%q,"Output":"    x_test.go:1: metallo-lane: %s\n"}`, test, l),
				fmt.Sprintf(`{"Action":"pass","Package":"p","Test":%q}`, test))
		}
		return jsonl(append(lines, `{"Action":"pass","Package":"p"}`)...)
	}
	var out strings.Builder
	if code := run(strings.NewReader(report(lanes)), &out, lanes, true); code != 0 {
		t.Fatalf("every lane ran a test, want 0, got %d: %s", code, out.String())
	}
	for _, missing := range lanes {
		out.Reset()
		others := slices.DeleteFunc(slices.Clone(lanes), func(l string) bool { return l == missing })
		code := run(strings.NewReader(report(others)), &out, lanes, true)
		if code == 0 || !strings.Contains(out.String(), "lane "+missing+" ran no test") {
			t.Errorf("without a %s test: got %d, want a failure naming the lane: %s", missing, code, out.String())
		}
	}
}

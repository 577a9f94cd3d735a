package main

import (
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

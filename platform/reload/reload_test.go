package reload_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/pharos-metallo/metallo/platform/reload"
)

// parseWords is the test's file format: non-empty lines, "bad" anywhere is a parse error.
func parseWords(raw []byte) ([]string, error) {
	s := strings.TrimSpace(string(raw))
	if strings.Contains(s, "bad") {
		return nil, errors.New("a bad word")
	}
	return strings.Split(s, "\n"), nil
}

func write(t *testing.T, path, body string) {
	t.Helper()
	// Written beside it and renamed into place, as an editor or a configuration tool does.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func load(t *testing.T, path string, reg prometheus.Registerer) (*reload.File[[]string], *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	f, err := reload.Load(reload.Options{Name: "words", Flag: "words-file", Path: path, Log: zap.New(core), Registerer: reg, Poll: time.Hour}, parseWords)
	if err != nil {
		t.Fatal(err)
	}
	return f, logs
}

// A changed file is applied whole; one that does not parse is refused whole and the previous
// version stays in use; the same bytes again change nothing; the file coming back is applied.
// Each applied or refused version is one log line and one count, and the gauge says whether the
// file on disk is the one in use.
func TestAChangedFileIsAppliedAndARefusedOneKeepsThePrevious(t *testing.T) {
	path := filepath.Join(t.TempDir(), "words.txt")
	write(t, path, "alpha\nbeta")
	reg := prometheus.NewRegistry()
	f, logs := load(t, path, reg)
	var committed [][]string
	if err := f.Use(func(next []string) (func(), error) { return func() { committed = append(committed, next) }, nil }); err != nil {
		t.Fatal(err)
	}
	if got := f.Current(); strings.Join(got, ",") != "alpha,beta" || len(committed) != 1 {
		t.Fatalf("at load: %v, committed %v", got, committed)
	}
	count := func(outcome string) float64 {
		return sample(t, reg, "metallo_config_reloads_total", map[string]string{"file": "words", "outcome": outcome})
	}
	ok := func() float64 {
		return sample(t, reg, "metallo_config_last_reload_successful", map[string]string{"file": "words"})
	}

	if got := f.Reload(); got != reload.Unchanged || logs.Len() != 0 {
		t.Fatalf("the same file: %s, %d log lines", got, logs.Len())
	}
	write(t, path, "alpha")
	if got := f.Reload(); got != reload.Applied || strings.Join(f.Current(), ",") != "alpha" || len(committed) != 2 {
		t.Fatalf("a changed file: %s, %v, committed %v", got, f.Current(), committed)
	}
	write(t, path, "alpha\nbad")
	if got := f.Reload(); got != reload.Refused || strings.Join(f.Current(), ",") != "alpha" || len(committed) != 2 {
		t.Fatalf("a broken file: %s, %v, committed %v", got, f.Current(), committed)
	}
	if ok() != 0 {
		t.Error("the gauge says the refused file is in use")
	}
	if got := f.Reload(); got != reload.Unchanged {
		t.Fatalf("the same broken file again: %s", got)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if got := f.Reload(); got != reload.Refused || strings.Join(f.Current(), ",") != "alpha" {
		t.Fatalf("a removed file: %s, %v", got, f.Current())
	}
	write(t, path, "gamma")
	if got := f.Reload(); got != reload.Applied || strings.Join(f.Current(), ",") != "gamma" || ok() != 1 {
		t.Fatalf("the file back: %s, %v, gauge %v", got, f.Current(), ok())
	}
	if a, r := count(reload.Applied), count(reload.Refused); a != 2 || r != 2 {
		t.Errorf("counted %v applied, %v refused; want 2 and 2", a, r)
	}
	var lines []string
	for _, e := range logs.All() {
		lines = append(lines, e.Level.String()+" "+e.Message+" "+e.ContextMap()["path"].(string))
		if e.ContextMap()["file"] != "words" {
			t.Errorf("a line without the file's name: %v", e.ContextMap())
		}
	}
	want := []string{
		"info configuration file reloaded; the new version is in use " + path,
		"error configuration file refused; the previous version stays in use " + path,
		"error configuration file refused; the previous version stays in use " + path,
		"info configuration file reloaded; the new version is in use " + path,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if e := logs.All()[1].ContextMap()["error"]; e != "a bad word" {
		t.Errorf("the refusal's error: %v", e)
	}
}

// A user that refuses a version refuses it whole: no user's commit runs, the previous version
// stays in use. A user that refuses the version in use is not added (Use's error names the flag).
func TestAUserRefusesAVersionWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "words.txt")
	write(t, path, "alpha")
	f, _ := load(t, path, nil)
	var first, second []string
	if err := f.Use(func(next []string) (func(), error) { return func() { first = next }, nil }); err != nil {
		t.Fatal(err)
	}
	if err := f.Use(func(next []string) (func(), error) {
		if len(next) > 1 {
			return nil, errors.New("at most one word")
		}
		return func() { second = next }, nil
	}); err != nil {
		t.Fatal(err)
	}
	write(t, path, "beta\ngamma")
	if got := f.Reload(); got != reload.Refused || strings.Join(f.Current(), ",") != "alpha" || strings.Join(first, ",") != "alpha" || strings.Join(second, ",") != "alpha" {
		t.Fatalf("%s: current %v, first %v, second %v", got, f.Current(), first, second)
	}
	err := f.Use(func([]string) (func(), error) { return nil, errors.New("never") })
	if err == nil || !strings.Contains(err.Error(), "--words-file") || !strings.Contains(err.Error(), "never") {
		t.Fatalf("a user refusing the version in use: %v", err)
	}
}

// Load refuses a file that does not read or parse, naming the flag.
func TestLoadNamesTheFlag(t *testing.T) {
	dir := t.TempDir()
	for _, body := range []string{"", "bad"} {
		path := filepath.Join(dir, "words.txt")
		if body != "" {
			write(t, path, body)
		}
		_, err := reload.Load(reload.Options{Name: "words", Flag: "words-file", Path: path}, parseWords)
		if err == nil || !strings.Contains(err.Error(), "--words-file") {
			t.Errorf("%q: %v", body, err)
		}
	}
}

// A Kubernetes ConfigMap or Secret volume updates its files by pointing the directory's ..data
// symlink at a new directory: no watched file changes, the directory does. Watch sees it by its
// events (the poll is an hour here), and the new version is in use once the line is logged.
func TestWatchSeesAVolumesSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	version := func(n, body string) {
		if err := os.Mkdir(filepath.Join(dir, n), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n, "words.txt"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(n, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..2026_11_29_10_00_00.1", "alpha")
	path := filepath.Join(dir, "words.txt")
	if err := os.Symlink(filepath.Join("..data", "words.txt"), path); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.DebugLevel)
	f, err := reload.Load(reload.Options{Name: "words", Flag: "words-file", Path: path, Log: zap.New(core), Poll: time.Hour}, parseWords)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); f.Watch(t.Context()) }()
	t.Cleanup(func() { <-done })

	// Changes are seen from the moment Watch says it watches the directory.
	waitLog(t, logs, "watching the configuration file's directory")
	version("..2026_11_29_10_05_00.2", "beta")
	waitLog(t, logs, "configuration file reloaded; the new version is in use")
	if got := f.Current(); strings.Join(got, ",") != "beta" {
		t.Fatalf("after the logged reload: %v", got)
	}
	// A directory that changes more often than the read waits after an event is still read:
	// events do not postpone the read. The bound only ends a test whose read never comes.
	deadline := time.Now().Add(time.Minute)
	for n := 3; logs.FilterMessage("configuration file reloaded; the new version is in use").Len() < 2; n++ {
		if time.Now().After(deadline) {
			t.Fatal("never read while the directory kept changing")
		}
		version(fmt.Sprintf("..2026_11_29_10_10_00.%d", n), fmt.Sprintf("gamma%d", n))
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLog waits until logs hold a line msg; the bound only ends a test whose line never comes.
func waitLog(t *testing.T, logs *observer.ObservedLogs, msg string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for logs.FilterMessage(msg).Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no line %q within a minute; lines: %v", msg, logs.All())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sample returns the value of the one sample of name with labels in reg.
func sample(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := len(m.GetLabel()) == len(labels)
			for _, l := range m.GetLabel() {
				match = match && labels[l.GetName()] == l.GetValue()
			}
			switch {
			case !match:
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			default:
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no sample %s%v", name, labels)
	return 0
}

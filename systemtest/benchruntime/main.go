// Command benchruntime is `make bench-runtime`: the Site Runtime's delivery
// benchmark (docs/testing.md#benchmarks). On loopback it runs the execution
// role (SQLite) and a Runtime (testbin with its stand-in executor in no-op
// mode: every start answers at once and records nothing) as processes,
// and measures:
//
//   - commands/s through pull → journal → no-op executor → acknowledgement
//     while the Runtime drains pre-appended commands, with the clear of an
//     acknowledged command folded into the next command's commit #1 and not;
//   - the per-command cycle (p50/p99 of the gaps between consecutive
//     acknowledgement times the server records) and, one command in flight,
//     append → acknowledged latency;
//   - durable commits per command (the Runtime's counted by its
//     metallo_runtime_journal_commits_total; the server's one transaction
//     per acknowledgement), and the limit they imply next to raw durable
//     SQLite commits/s on the same disk, sampled in bursts while the
//     Runtime is paused during each drain (sampler);
//   - the Runtime's RSS after 10,000 commands and its live Go heap after
//     1,000 and after 10,000.
//
// It prints a Markdown table for BENCHMARKS.md.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/systemtest/harness"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchruntime:", err)
		os.Exit(1)
	}
}

type drainResult struct {
	fold                bool
	commands            int
	perSecond           float64
	p50, p99            time.Duration
	runtimeCommits      float64
	rss                 int64
	heapWarm, heapDrain float64
	warm                int
	// runtimeCPU and serverCPU are CPU time per command.
	runtimeCPU, serverCPU time.Duration
	// raw is the baseline: raw durable SQLite commits/s of the bursts
	// taken during this drain, pooled (all commits ÷ all their time).
	raw    float64
	bursts int
	// pausedShare is the share of the timed span the Runtime spent stopped
	// for the bursts.
	pausedShare float64
	round       int
}

func run() error {
	total := flag.Int("commands", 10000, "commands drained per mode")
	warm := flag.Int("warm", 1000, "commands drained first (heap baseline), not timed")
	inFlight := flag.Int("latency-commands", 300, "commands sent one at a time for the latency row")
	rounds := flag.Int("rounds", 3, "rounds; each drains both modes, alternating")
	base := flag.String("dir", "", "working directory (default: a new temporary directory); the disk measured")
	profile := flag.String("profile", "", "directory to write CPU profiles of the Runtime and the server into (runtime.pprof, server.pprof), taken during round 1's folded drain; profiling costs CPU, so that round's numbers read lower")
	profileFor := flag.Duration("profile-for", 15*time.Second, "length of the CPU profiles (-profile)")
	sampleEvery := flag.Duration("baseline-every", time.Second, "how often the timed drain pauses for a baseline burst")
	burst := flag.Int("baseline-burst", 200, "raw commits per baseline burst")
	flag.Parse()
	switch {
	case *warm < 2 || *warm >= *total:
		return fmt.Errorf("-warm %d: want at least 2 and fewer than -commands (%d)", *warm, *total)
	case *inFlight < 1 || *rounds < 1:
		return fmt.Errorf("-latency-commands %d, -rounds %d: want at least 1 each", *inFlight, *rounds)
	case *sampleEvery <= 0 || *burst < 1:
		return fmt.Errorf("-baseline-every %s, -baseline-burst %d: want a positive interval and at least 1 commit", *sampleEvery, *burst)
	}
	dir := *base
	if dir == "" {
		d, err := os.MkdirTemp("", "metallo-bench-runtime-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	ctx := context.Background()
	fmt.Fprintln(os.Stderr, "building binaries…")
	bins, err := harness.Build(ctx, dir)
	if err != nil {
		return err
	}
	var results []drainResult
	for round := 1; round <= *rounds; round++ {
		for _, fold := range []bool{true, false} {
			fmt.Fprintf(os.Stderr, "round %d: draining %d commands (fold %v)…\n", round, *total, fold)
			prof := profiling{}
			if *profile != "" && round == 1 && fold {
				prof = profiling{dir: *profile, seconds: int(profileFor.Seconds())}
			}
			r, err := drain(bins, filepath.Join(dir, fmt.Sprintf("round-%d-fold-%v", round, fold)), fold, *total, *warm, prof, *sampleEvery, *burst)
			if err != nil {
				return err
			}
			r.round = round
			results = append(results, r)
		}
	}
	fmt.Fprintf(os.Stderr, "closed loop, %d commands…\n", *inFlight)
	lp50, lp99, err := closedLoop(bins, filepath.Join(dir, "latency"), *inFlight)
	if err != nil {
		return err
	}
	report(results, lp50, lp99, *inFlight, dir, *sampleEvery, *burst)
	return nil
}

// rawDisk is the baseline: durable single-row commits of SQLite with the
// journals' settings (WAL, synchronous=FULL, one connection, BEGIN
// IMMEDIATE) to a file on the disk under test, taken in bursts.
type rawDisk struct {
	db      *sql.DB
	next    int
	commits int
	spent   time.Duration
	payload []byte
}

func openRawDisk(path string) (*rawDisk, error) {
	db, err := database.OpenSQLite(path, 10*time.Second)
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB NOT NULL)"); err != nil {
		_ = db.Close()
		return nil, err
	}
	return &rawDisk{db: db, payload: make([]byte, 600)}, nil
}

// burst commits n rows, one per transaction; counted says whether the
// burst counts towards the baseline (a first burst warms the file up).
func (d *rawDisk) burst(n int, counted bool) error {
	start := time.Now()
	for range n {
		tx, err := d.db.Begin()
		if err != nil {
			return err
		}
		if _, err := tx.Exec("INSERT INTO t (id, v) VALUES (?, ?)", d.next, d.payload); err != nil {
			_ = tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		d.next++
	}
	if counted {
		d.commits += n
		d.spent += time.Since(start)
	}
	return nil
}

// rate is the pooled commits/s of the counted bursts.
func (d *rawDisk) rate() float64 {
	if d.spent <= 0 {
		return 0
	}
	return float64(d.commits) / d.spent.Seconds()
}

func (d *rawDisk) Close() error { return d.db.Close() }

// pause is a window in which the Runtime was stopped (SIGSTOP … SIGCONT)
// for a baseline burst.
type pause struct{ from, to time.Time }

// sampler pauses the Runtime every interval while the timed commands
// drain and takes a baseline burst of the raw disk: the disk's speed on a
// shared machine moves by a factor of two within seconds, so a baseline
// taken before and after a drain of half a minute says little about the
// disk the drain saw. While the Runtime is stopped the server finishes
// the request in flight (settle) and then idles; the burst has the disk
// to itself.
type sampler struct {
	proc     *harness.Process
	disk     *rawDisk
	interval time.Duration
	n        int
	pauses   []pause
	stop     chan struct{}
	done     chan error
	once     sync.Once
	err      error
}

// settle is how long a burst waits after stopping the Runtime: the
// server's request in flight (an acknowledgement: one commit) ends well
// within it (a cycle's p99 is a few milliseconds), which is assumed, not
// checked.
const settle = 10 * time.Millisecond

func startSampler(proc *harness.Process, disk *rawDisk, interval time.Duration, n int) *sampler {
	s := &sampler{proc: proc, disk: disk, interval: interval, n: n, stop: make(chan struct{}), done: make(chan error, 1)}
	go func() { s.done <- s.run() }()
	return s
}

// run pauses the Runtime a full interval after it was last continued, so
// however slow a burst, the Runtime runs at least interval between two.
func (s *sampler) run() error {
	t := time.NewTimer(s.interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return nil
		case <-t.C:
		}
		from := time.Now()
		if err := s.proc.Signal(syscall.SIGSTOP); err != nil {
			return fmt.Errorf("stop the Runtime: %w", err)
		}
		time.Sleep(settle)
		err := s.disk.burst(s.n, true)
		if cerr := s.proc.Signal(syscall.SIGCONT); cerr != nil && err == nil {
			err = fmt.Errorf("continue the Runtime: %w", cerr)
		}
		s.pauses = append(s.pauses, pause{from: from, to: time.Now()})
		if err != nil {
			return err
		}
		t.Reset(s.interval)
	}
}

// finish ends the sampling (the Runtime runs on) and returns the pauses
// it made; later calls return the same.
func (s *sampler) finish() ([]pause, error) {
	s.once.Do(func() {
		close(s.stop)
		s.err = <-s.done
	})
	return s.pauses, s.err
}

// paused is how much of [from, to] the Runtime spent stopped.
func paused(pauses []pause, from, to time.Time) time.Duration {
	var d time.Duration
	for _, p := range pauses {
		a, b := p.from, p.to
		if a.Before(from) {
			a = from
		}
		if b.After(to) {
			b = to
		}
		if b.After(a) {
			d += b.Sub(a)
		}
	}
	return d
}

// profiling asks a drain for CPU profiles of both processes, taken from
// their admin listeners' /debug/pprof/profile (--admin-profiling) while
// the timed commands drain; dir "" asks for none.
type profiling struct {
	dir     string
	seconds int
}

func setup(bins harness.Binaries, dir string, prof profiling) (*harness.Site, *harness.Runtime, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, nil, err
	}
	site, err := harness.NewSite(bins.Metallo, dir)
	if err != nil {
		return nil, nil, err
	}
	if prof.dir != "" {
		site.ServerArgs = []string{"--admin-listen", "127.0.0.1:0", "--admin-profiling"}
	}
	if err := site.StartDirect("execution.sqlite"); err != nil {
		return nil, nil, err
	}
	rt, err := harness.NewRuntime(bins.Runtime, site, filepath.Join(dir, "runtime"))
	if err != nil {
		site.Close()
		return nil, nil, err
	}
	rt.Effects = "" // the stand-in executor as a no-op
	if out, err := rt.Install(); err != nil {
		site.Close()
		return nil, nil, fmt.Errorf("%v: %s", err, out)
	}
	return site, rt, nil
}

func appendRange(site *harness.Site, from, to int) error {
	for n := from; n <= to; n++ {
		if _, err := site.Append(command(n)); err != nil {
			return err
		}
	}
	return nil
}

func command(n int) []byte {
	return []byte(fmt.Sprintf(`{"id":"%08x-0001-4000-8000-%012x","operation":"start","issued_at":"2026-11-29T10:00:00Z",`+
		`"run_id":"%08x-0002-4000-8000-%012x","attempt_id":"%08x-0003-4000-8000-%012x",`+
		`"member_id":"9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80","project_id":"0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9",`+
		`"account_ref":{"binding_id":"e41f0000-0000-4000-8000-000000000001","generation":1},"family":"batch",`+
		`"payload":{"demand":{"cpu":2000,"memory":4294967296},"time_limit_seconds":3600,"argv":["python","train.py","--step","%d"],"env":{"EPOCHS":"3"}}}`,
		n, n, n, n, n, n, n))
}

func commandID(n int) string { return fmt.Sprintf("%08x-0001-4000-8000-%012x", n, n) }

// heapSample is the Runtime's live heap (after its last GC) when it had
// acknowledged a sequence.
type heapSample struct {
	acked int
	heap  float64
}

// waitAcked waits until the Runtime has acknowledged seq, sampling its
// live heap on the way.
func waitAcked(p *harness.Process, addr string, seq int, timeout time.Duration) ([]heapSample, error) {
	deadline := time.Now().Add(timeout)
	var samples []heapSample
	for {
		var v float64
		m, err := scrape(addr, ackedSeries, heapSeries)
		if err == nil {
			v = m[ackedSeries]
			samples = append(samples, heapSample{acked: int(v), heap: m[heapSeries]})
		}
		if err == nil && int(v) >= seq {
			return samples, nil
		}
		if p.Exited() || time.Now().After(deadline) {
			return samples, fmt.Errorf("sequence %d not acknowledged (at %v, %v):\n%s", seq, v, err, p.Output())
		}
		time.Sleep(250 * time.Millisecond) // a scrape costs the Runtime CPU; the timing comes from the server
	}
}

// retainedHeap is the smallest live heap of the samples taken while the
// Runtime's acknowledged sequence was in (from, to]. The live heap a GC
// reports also holds what was allocated while it marked (at this rate a
// megabyte or so), so single readings are noisy; the smallest is the
// closest to what the Runtime retains, and grows with a leak.
func retainedHeap(samples []heapSample, from, to int) float64 {
	least := 0.0
	for _, s := range samples {
		if s.acked > from && s.acked <= to && (least == 0 || s.heap < least) {
			least = s.heap
		}
	}
	return least
}

func drain(bins harness.Binaries, dir string, fold bool, total, warm int, prof profiling, every time.Duration, burst int) (drainResult, error) {
	r := drainResult{fold: fold, commands: total - warm, warm: warm}
	site, rt, err := setup(bins, dir, prof)
	if err != nil {
		return r, err
	}
	defer site.Close()
	disk, err := openRawDisk(filepath.Join(dir, "raw.sqlite"))
	if err != nil {
		return r, err
	}
	defer disk.Close()
	if err := disk.burst(burst, false); err != nil {
		return r, err
	}
	// Every command is appended before the Runtime starts: appends are
	// server commits on the same disk and take turns with acknowledgements
	// on the server's one SQLite connection, so appending during the timed
	// drain would slow what is measured.
	if err := appendRange(site, 1, total); err != nil {
		return r, err
	}
	args := []string{"--fold-acknowledgement=" + strconv.FormatBool(fold), "--pull-wait", "30s", "--liveness-bound", "2m", "--backoff-max", "1s"}
	if prof.dir != "" {
		args = append(args, "--admin-profiling")
	}
	p, err := rt.Start("", args...)
	if err != nil {
		return r, err
	}
	defer p.Kill()
	addr, err := harness.AdminAddr(p)
	if err != nil {
		return r, err
	}
	warmSamples, err := waitAcked(p, addr, warm, 5*time.Minute)
	if err != nil {
		return r, err
	}
	// The Runtime drains on past the warm-up: commits and CPU time are
	// taken per acknowledged command between two readings, each reading
	// the acknowledged sequence and the commit count from one scrape.
	at0, err := progress(p, site, addr)
	if err != nil {
		return r, err
	}
	start := time.Now()
	smp := startSampler(p, disk, every, burst)
	defer func() { _, _ = smp.finish() }()
	profiled := make(chan error, 1)
	if prof.dir != "" {
		serverAdmin, err := harness.AdminAddr(site.Server)
		if err != nil {
			return r, err
		}
		go func() { profiled <- takeProfiles(prof, map[string]string{"runtime": addr, "server": serverAdmin}) }()
	} else {
		profiled <- nil
	}
	samples, err := waitAcked(p, addr, total, 10*time.Minute)
	if err != nil {
		return r, err
	}
	pauses, err := smp.finish()
	if err != nil {
		return r, err
	}
	if err := <-profiled; err != nil {
		return r, err
	}
	elapsed := time.Since(start) - paused(pauses, start, time.Now())
	r.raw, r.bursts = disk.rate(), len(pauses)
	if r.bursts == 0 {
		return r, fmt.Errorf("the drain ended before the first baseline burst (-baseline-every %s): drain more commands", every)
	}
	at1, err := progress(p, site, addr)
	if err != nil {
		return r, err
	}
	acked := at1.acked - at0.acked
	if acked <= 0 {
		return r, fmt.Errorf("no command acknowledged between the readings (sequence %v, then %v)", at0.acked, at1.acked)
	}
	r.runtimeCPU = time.Duration(float64(at1.runtimeCPU-at0.runtimeCPU) / acked)
	r.serverCPU = time.Duration(float64(at1.serverCPU-at0.serverCPU) / acked)
	r.runtimeCommits = (at1.commits - at0.commits) / acked
	// The heap around the first `warm` commands (the last samples of the
	// warm-up) against the heap over the last `warm` commands.
	// The Runtime drains on past warm; the warm-up's samples end with the
	// first one at or past it.
	r.heapWarm = retainedHeap(warmSamples, warm/2, warmSamples[len(warmSamples)-1].acked)
	r.heapDrain = retainedHeap(samples, total-warm, total)
	if r.heapWarm == 0 || r.heapDrain == 0 {
		return r, fmt.Errorf("no live-heap sample over the second half of the warm-up or the last %d commands: drain more commands", warm)
	}
	r.rss = rssBytes(p.Pid())
	// commands/s comes from the acknowledgement times the server records,
	// from the first timed command's to the last's.
	var times []time.Time
	for n := warm + 1; n <= total; n++ {
		rec, err := site.Command(commandID(n))
		if err != nil {
			return r, err
		}
		at, err := time.Parse(time.RFC3339Nano, rec.AcknowledgedAt)
		if err != nil {
			return r, fmt.Errorf("command %d acknowledged_at %q: %w", n, rec.AcknowledgedAt, err)
		}
		times = append(times, at)
	}
	// The Runtime's pauses for the baseline bursts are taken out of the
	// span and out of each gap between acknowledgements they overlap.
	whole := times[len(times)-1].Sub(times[0])
	stopped := paused(pauses, times[0], times[len(times)-1])
	span := whole - stopped
	if span <= 0 {
		span = elapsed
	}
	r.perSecond = float64(len(times)-1) / span.Seconds()
	r.pausedShare = float64(stopped) / float64(whole)
	var gaps []time.Duration
	for i := 1; i < len(times); i++ {
		gaps = append(gaps, times[i].Sub(times[i-1])-paused(pauses, times[i-1], times[i]))
	}
	r.p50, r.p99 = percentile(gaps, 50), percentile(gaps, 99)
	return r, p.Stop(time.Minute)
}

// reading is the Runtime's progress at one moment: its acknowledged
// sequence and journal commits (one scrape) and both processes' CPU time.
type reading struct {
	acked, commits        float64
	runtimeCPU, serverCPU time.Duration
}

func progress(p *harness.Process, site *harness.Site, addr string) (reading, error) {
	v, err := scrape(addr, ackedSeries, commitsSeries)
	if err != nil {
		return reading{}, err
	}
	return reading{acked: v[ackedSeries], commits: v[commitsSeries], runtimeCPU: cpuTime(p.Pid()), serverCPU: cpuTime(site.Server.Pid())}, nil
}

// The Runtime's metrics the benchmark reads.
const (
	ackedSeries   = "metallo_runtime_acknowledged_sequence"
	commitsSeries = "metallo_runtime_journal_commits_total"
	heapSeries    = "metallo_runtime_heap_live_bytes"
)

// scrape reads the named series from one scrape of the Runtime's metrics
// at addr; a series that is missing is an error.
func scrape(addr string, names ...string) (map[string]float64, error) {
	v, err := harness.Metrics(addr, names...)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if _, ok := v[name]; !ok {
			return nil, fmt.Errorf("the Runtime's metrics lack %s", name)
		}
	}
	return v, nil
}

// closedLoop appends one command at a time and waits until the server has
// its result: append → pull → journal → executor → acknowledgement.
func closedLoop(bins harness.Binaries, dir string, n int) (time.Duration, time.Duration, error) {
	site, rt, err := setup(bins, dir, profiling{})
	if err != nil {
		return 0, 0, err
	}
	defer site.Close()
	p, err := rt.Start("", "--pull-wait", "30s", "--liveness-bound", "2m", "--backoff-max", "1s")
	if err != nil {
		return 0, 0, err
	}
	defer p.Kill()
	if _, err := harness.AdminAddr(p); err != nil {
		return 0, 0, err
	}
	var lat []time.Duration
	for i := 1; i <= n; i++ {
		start := time.Now()
		if _, err := site.Append(command(i)); err != nil {
			return 0, 0, err
		}
		for {
			rec, err := site.Command(commandID(i))
			if err != nil {
				return 0, 0, err
			}
			if len(rec.Result) > 0 {
				break
			}
			if time.Since(start) > time.Minute {
				return 0, 0, fmt.Errorf("command %d not acknowledged within a minute:\n%s", i, p.Output())
			}
			time.Sleep(time.Millisecond)
		}
		lat = append(lat, time.Since(start))
	}
	return percentile(lat, 50), percentile(lat, 99), p.Stop(time.Minute)
}

// takeProfiles takes CPU profiles of prof.seconds from each admin address
// at once and writes them to prof.dir as <name>.pprof.
func takeProfiles(prof profiling, admins map[string]string) error {
	if err := os.MkdirAll(prof.dir, 0o750); err != nil {
		return err
	}
	errs := make(chan error, len(admins))
	for name, addr := range admins {
		go func() {
			client := &http.Client{Timeout: time.Duration(prof.seconds+30) * time.Second}
			resp, err := client.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, prof.seconds))
			if err != nil {
				errs <- fmt.Errorf("profile %s: %w", name, err)
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %s: %s", resp.Status, b)
			}
			if err == nil {
				err = os.WriteFile(filepath.Join(prof.dir, name+".pprof"), b, 0o640)
			}
			if err != nil {
				err = fmt.Errorf("profile %s: %w", name, err)
			}
			errs <- err
		}()
	}
	var first error
	for range admins {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first == nil {
		fmt.Fprintf(os.Stderr, "CPU profiles written to %s\n", prof.dir)
	}
	return first
}

func percentile(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}

// cpuTime returns the user+system CPU time process pid has used
// (/proc/<pid>/stat, clock ticks of 10 ms).
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func rssBytes(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return -1
}

func (r drainResult) limit() float64 { return r.raw / (r.runtimeCommits + 1) }

func (r drainResult) mode() string {
	if r.fold {
		return "folded into the next commit #1 (default)"
	}
	return "own commit #3"
}

func report(results []drainResult, lp50, lp99 time.Duration, inFlight int, dir string, every time.Duration, burst int) {
	mib := func(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }
	fmt.Printf("Measured %s on %s (%d CPUs, %s), Go %s; disk: %s; load average at the end: %s.\n\n", time.Now().UTC().Format("2006-01-02"), cpuModel(),
		runtime.NumCPU(), kernel(), runtime.Version(), filesystem(dir), loadAverage())
	fmt.Printf("Baseline, same disk, same run: raw durable SQLite commits/s (WAL, synchronous=FULL, one row per transaction, one connection), sampled during each timed drain: after every %s it has run, the Runtime is stopped (SIGSTOP), after %s for the server to finish its request %d commits are made to a file next to the journals, and the Runtime is continued (SIGCONT); the bursts of a drain are pooled (all their commits ÷ all their time), and the pauses are taken out of the drain's time and of the cycles they fall in. The Runtime resumes each time with a disk that has just taken a burst; the column gives the share of the drain it was paused.\n\n", every, settle, burst)
	fmt.Println("| round | clear of an acknowledged command | commands | commands/s | cycle p50 | cycle p99 | durable commits per command (Runtime + server) | baseline commits/s (bursts; share of the drain paused) | limit (commits/s ÷ commits per command) | commands/s ÷ limit | CPU per command: Runtime, server |")
	fmt.Println("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range results {
		fmt.Printf("| %d | %s | %d | %.0f | %s | %s | %.2f + 1 = %.2f | %.0f (%d; %.0f%%) | %.0f | %.2f | %s, %s |\n", r.round, r.mode(), r.commands, r.perSecond,
			r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.runtimeCommits, r.runtimeCommits+1, r.raw, r.bursts, 100*r.pausedShare, r.limit(),
			r.perSecond/r.limit(), r.runtimeCPU.Round(10*time.Microsecond), r.serverCPU.Round(10*time.Microsecond))
	}
	for _, fold := range []bool{true, false} {
		var ratios, rates []float64
		for _, r := range results {
			if r.fold == fold {
				ratios, rates = append(ratios, r.perSecond/r.limit()), append(rates, r.perSecond)
			}
		}
		fmt.Printf("| **median** | %s | | **%.0f** | | | | | | **%.2f** | |\n", drainResult{fold: fold}.mode(), median(rates), median(ratios))
	}
	fmt.Printf("\nOne command in flight (append → acknowledged, %d commands, folded): p50 %s, p99 %s.\n\n", inFlight, lp50.Round(time.Microsecond), lp99.Round(time.Microsecond))
	first, last := results[0].warm, results[0].warm+results[0].commands
	fmt.Printf("Retained Go heap: the smallest /gc/heap/live:bytes (the heap the last GC kept) sampled every 250 ms over the second half of the first %d commands, and over the last %d of %d.\n\n", first, first, last)
	fmt.Printf("| round | clear | Runtime RSS after %d commands (target < 96 MiB) | retained heap at %d commands | at %d | growth (target within 10%%) |\n", last, first, last)
	fmt.Println("| ---: | --- | ---: | ---: | ---: | ---: |")
	for _, r := range results {
		mode := "own commit #3"
		if r.fold {
			mode = "folded"
		}
		fmt.Printf("| %d | %s | %s | %s | %s | %+.1f%% |\n", r.round, mode, mib(float64(r.rss)), mib(r.heapWarm), mib(r.heapDrain), 100*(r.heapDrain-r.heapWarm)/r.heapWarm)
	}
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ":"))
		}
	}
	return "unknown CPU"
}

func kernel() string {
	out, err := exec.Command("uname", "-sr").Output()
	if err != nil {
		return runtime.GOOS
	}
	return strings.TrimSpace(string(out))
}

func filesystem(dir string) string {
	out, err := exec.Command("df", "-T", dir).Output()
	if err != nil {
		return dir
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) < 2 {
		return dir
	}
	return f[1] + " on " + f[0]
}

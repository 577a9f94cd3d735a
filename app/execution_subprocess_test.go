package app

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// servedProcess is a `metallo serve` subprocess.
type servedProcess struct {
	cmd  *exec.Cmd
	base string

	mu  sync.Mutex
	log []string
	// logDone is closed once the process's standard error reached its end
	// (it exited); exited then carries its Wait error.
	logDone chan struct{}
	wait    sync.Once
	exitErr error
}

// exit waits for the process to exit (its log read to the end, then Wait)
// and returns Wait's error; it may be called more than once.
func (p *servedProcess) exit() error {
	p.wait.Do(func() {
		<-p.logDone
		p.exitErr = p.cmd.Wait()
	})
	return p.exitErr
}

// startServed starts `bin serve args…` on a free loopback port and waits until
// it serves its API (the "serving API" log line). The process is stopped
// with SIGTERM (by its PID) when the test ends.
func startServed(t *testing.T, bin string, args ...string) *servedProcess {
	t.Helper()
	args = append([]string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", ""}, args...)
	p := &servedProcess{cmd: exec.Command(bin, args...), logDone: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), "METALLO_LOG_LEVEL=info")
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", args, err)
	}
	addr := make(chan string, 1)
	go p.readLog(stderr, addr)
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.exit(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("log of %v:\n%s", args, p.logText())
		}
	})
	select {
	case a := <-addr:
		p.base = "http://" + a
	case <-time.After(2 * time.Minute):
		t.Fatalf("metallo %v did not start serving:\n%s", args, p.logText())
	}
	return p
}

func (p *servedProcess) readLog(r io.Reader, addr chan<- string) {
	defer close(p.logDone)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	sent := false
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		p.log = append(p.log, line)
		p.mu.Unlock()
		var entry struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if !sent && json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "serving API" && entry.Addr != "" {
			addr <- entry.Addr
			sent = true
		}
	}
}

// logLines are the lines the process logged so far.
func (p *servedProcess) logLines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

func (p *servedProcess) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.log, "\n")
}

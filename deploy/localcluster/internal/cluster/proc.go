package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// components in start order; stopped in reverse order. The reaper is stopped first.
var components = []string{"etcd", "apiserver", "controller-manager", "scheduler", "kwok", "provisioner", kserveComponent}

func pidFile(dir, name string) string { return filepath.Join(dir, "run", name+".pid") }
func logFile(dir, name string) string { return filepath.Join(dir, "logs", name+".log") }

// exitFile records how a component started by this process ended (written by its reaper, so
// only while the starting process still runs): "signal: killed", "exit status 1".
func exitFile(dir, name string) string { return filepath.Join(dir, "run", name+".exit") }

// exitStatus says how a component ended, when this process saw it end, or "".
func exitStatus(dir, name string) string {
	b, err := os.ReadFile(exitFile(dir, name))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// start runs a detached process (its own session, output to its log file) and records its pid.
func start(dir, name, bin string, args ...string) error {
	return startProcess(dir, name, nil, bin, args...)
}

// startProcess is start with extra open files passed to the process (from fd 3 on).
func startProcess(dir, name string, extra []*os.File, bin string, args ...string) error {
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "run"), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(logFile(dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer devnull.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = devnull
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.Dir = dir
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	pid := cmd.Process.Pid
	if err := os.WriteFile(pidFile(dir, name), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	// Start returns once execve has passed its point of no return (the
	// close-on-exec pipe closes there), but the kernel sets the new
	// program's argument area only afterwards, while it maps the binary: until
	// then /proc/<pid>/cmdline reads empty and alive would take the process
	// for dead (seen on a loaded machine with the kubelet's and KServe's large
	// binaries). Wait for it, bounded.
	for i := 0; i < 100; i++ {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err != nil || len(b) > 0 {
			break // ready, or already gone (the watchers report that)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = os.Remove(exitFile(dir, name))
	// Reap the child if it dies while this process still runs, so it is not left a zombie that
	// looks alive, and record how it ended; once this process exits, init adopts it.
	go func() {
		_ = cmd.Wait()
		_ = os.WriteFile(exitFile(dir, name), []byte(cmd.ProcessState.String()+"\n"), 0o644)
	}()
	return nil
}

// readPid returns the pid recorded for a component, or 0.
func readPid(dir, name string) int {
	b, err := os.ReadFile(pidFile(dir, name))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// alive tells whether pid runs and is one of this cluster's processes: its command line names
// the state directory, so a recycled pid is never taken for ours.
func alive(pid int, dir string) bool {
	if pid <= 0 {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(cmdline) == 0 {
		return false
	}
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// A zombie (state Z) has exited.
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return false
		}
	}
	// A path under dir, or dir itself as an argument (not a sibling such as dir+"2").
	return bytes.Contains(cmdline, []byte(dir+"/")) || bytes.Contains(cmdline, []byte("\x00"+dir+"\x00"))
}

// componentAlive tells whether a recorded component runs.
func componentAlive(dir, name string) bool { return alive(readPid(dir, name), dir) }

// stop sends SIGTERM to a component's process group, then SIGKILL after the grace period.
func stop(dir, name string, grace time.Duration) (bool, error) {
	pid := readPid(dir, name)
	defer os.Remove(pidFile(dir, name))
	if !alive(pid, dir) {
		return false, nil
	}
	// The component leads its own session and process group (Setsid).
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !alive(pid, dir) {
			return true, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 50 && alive(pid, dir); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if alive(pid, dir) {
		return true, fmt.Errorf("%s (pid %d) did not exit after SIGKILL", name, pid)
	}
	return true, nil
}

// stopAll stops the reaper (unless it is the caller) and every component, last started first.
func stopAll(dir string, log func(string, ...any)) error {
	var errs []error
	// The real node first: its teardown needs containerd, not the control plane.
	if err := stopRealNode(dir, log); err != nil {
		errs = append(errs, fmt.Errorf("real node: %w", err))
	}
	if readPid(dir, "reaper") != os.Getpid() {
		if _, err := stop(dir, "reaper", 2*time.Second); err != nil {
			errs = append(errs, err)
		}
	} else {
		os.Remove(pidFile(dir, "reaper"))
	}
	names := make([]string, 0, len(components))
	for i := len(components) - 1; i >= 0; i-- {
		names = append(names, components[i])
	}
	// Then whatever else has a pid file: a cluster started by a build with other components
	// (the cache's binary is shared by every checkout) is stopped whole all the same.
	recorded, _ := filepath.Glob(filepath.Join(dir, "run", "*.pid"))
	for _, f := range recorded {
		name := strings.TrimSuffix(filepath.Base(f), ".pid")
		if name != "reaper" && !slices.Contains(components, name) {
			names = append(names, name)
		}
	}
	for _, name := range names {
		stopped, err := stop(dir, name, 10*time.Second)
		if err != nil {
			errs = append(errs, err)
		}
		if stopped {
			log("stopped %s", name)
		}
	}
	return errors.Join(errs...)
}

// freePorts returns n distinct free TCP ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tail returns the last n lines of a component's log, for error messages.
func tail(dir, name string, n int) string {
	b, err := os.ReadFile(logFile(dir, name))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

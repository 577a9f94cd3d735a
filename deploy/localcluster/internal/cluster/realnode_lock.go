package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// machineDir holds the machine-wide real-node lock and the record of its holder: outside every
// cluster's state directory, since all the clusters of this machine (one per worktree) compete
// for the one real node.
const machineDir = "/var/lib/metallo/realnode"

func machineLockPath() string   { return filepath.Join(machineDir, "lock") }
func machineRecordPath() string { return filepath.Join(machineDir, "holder.json") }

// holderRecord is written before the node changes anything on the host: which cluster holds
// the node, and the host as that cluster found it (what cluster-down restores).
type holderRecord struct {
	// Dir is the holding cluster's state directory.
	Dir string `json:"dir"`
	// Pid is the `localcluster up` process that claimed the node; Since when.
	Pid   int       `json:"pid"`
	Since time.Time `json:"since"`
	// Found is the host before the node started.
	Found hostState `json:"found"`
	// Subnet and Bridge are the pod network.
	Subnet string `json:"subnet"`
	Bridge string `json:"bridge"`
}

// heldError says that another cluster holds the machine's real node.
type heldError struct{ holder holderRecord }

func (e *heldError) Error() string {
	h := e.holder
	if h.Dir == "" {
		return "the machine's real node is held by a process that left no record in " + machineRecordPath()
	}
	return fmt.Sprintf("the machine's one real node is held by the local cluster in %s (since %s): stop that cluster "+
		"there (make cluster-down) or start this one without a real node (METALLO_CLUSTER_REAL_NODE=off make cluster-up; "+
		"tests that need a container then fail)", h.Dir, h.Since.Local().Format(time.RFC3339))
}

// claimRealNode takes the machine's real-node lock for the cluster in dir and returns it open:
// the caller passes it to containerd and the kubelet (flock locks belong to the open file,
// which children inherit), so the lock is held exactly while a process of the node lives and
// is released by the kernel when the last one ends, however it ends. A record left by a holder
// whose processes all died (the lock is free) is restored first. It fails with a *heldError
// when another cluster's node runs, and when the pod subnet collides with an address of the
// machine.
func claimRealNode(dir, subnet string) (*os.File, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the real node needs root (kubelet and containerd manage mounts, cgroups and network namespaces)")
	}
	if err := os.MkdirAll(machineDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(machineLockPath(), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		h, _ := readHolder()
		return nil, &heldError{holder: h}
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	if stale, err := readHolder(); err == nil {
		logf("the real node's previous holder (%s) ended without stopping it: restoring the host as it found it", stale.Dir)
		if err := restoreHost(stale, logf); err != nil {
			return nil, fmt.Errorf("restore the host after the real node of %s: %w", stale.Dir, err)
		}
		if err := os.Remove(machineRecordPath()); err != nil {
			return nil, err
		}
	}
	if err := checkSubnet(subnet); err != nil {
		return nil, err
	}
	found, err := snapshotHost()
	if err != nil {
		return nil, fmt.Errorf("record the host: %w", err)
	}
	if err := writeHolder(holderRecord{Dir: dir, Pid: os.Getpid(), Since: time.Now().UTC(), Found: found, Subnet: subnet, Bridge: realNodeBridge}); err != nil {
		return nil, err
	}
	ok = true
	return f, nil
}

// realNodeFree fails with a *heldError when another cluster's real node runs (the lock is taken
// and released at once: claimRealNode decides).
func realNodeFree() error {
	f, err := os.OpenFile(machineLockPath(), os.O_RDONLY, 0)
	if err != nil {
		return nil // never taken on this machine
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		h, _ := readHolder()
		return &heldError{holder: h}
	}
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}

func readHolder() (holderRecord, error) {
	var h holderRecord
	b, err := os.ReadFile(machineRecordPath())
	if err != nil {
		return h, err
	}
	return h, json.Unmarshal(b, &h)
}

func writeHolder(h holderRecord) error {
	b, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	tmp := machineRecordPath() + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, machineRecordPath())
}

// stopRealNode stops the real node of the cluster in dir, when it holds it, and restores the
// host as the node found it. It leaves alone a real node held by another cluster.
func stopRealNode(dir string, log func(string, ...any)) error {
	h, err := readHolder()
	ours := err == nil && h.Dir == dir
	running := false
	for _, c := range realNodeComponents {
		running = running || componentAlive(dir, c)
	}
	if !ours {
		if running {
			// Our processes without our record (it was removed by hand): stop them; there is
			// no record of the host to restore.
			log("the real node's processes run without a record in %s: stopping them", machineRecordPath())
			return teardownNode(dir, realNodeDir(dir), log)
		}
		return nil
	}
	began := time.Now()
	if err := teardownNode(dir, realNodeDir(dir), log); err != nil {
		return err
	}
	// Every process of the node has ended once the lock can be taken.
	f, err := os.OpenFile(machineLockPath(), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("the real node's lock is still held after its processes were stopped: %s", strings.Join(lockHolders(), "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := restoreHost(h, log); err != nil {
		return err
	}
	if err := os.Remove(machineRecordPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	log("stopped the real node and restored the host as it was found (%s)", time.Since(began).Round(100*time.Millisecond))
	return nil
}

// lockHolders names the processes that have the lock file open.
func lockHolders() []string {
	var out []string
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		fds, err := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if t, err := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name())); err == nil && t == machineLockPath() {
				cmd, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
				out = append(out, fmt.Sprintf("pid %s (%s)", p.Name(), strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")))
				break
			}
		}
	}
	return out
}

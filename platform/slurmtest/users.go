package slurmtest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pharos-metallo/metallo/platform/testsetup"
)

// User is a Unix user made for one test, in the cluster's test uid range.
type User struct {
	// Name is the login name (slt-<8 hex digits>), also its group's and its Slurm user's.
	Name string
	// UID and GID are its uid and its own group's gid (equal, in the test range).
	UID, GID int
	// WorkDir is a directory the user owns (mode 0700) under the cluster's work directory: a
	// job's working directory and where its output goes.
	WorkDir string
}

// NewUser creates a Unix user with a group of its own and a work directory, removed when the
// test ends: its jobs are cancelled and waited for, then its Slurm user, the Unix user, its
// group and the work directory go. It fails the test when the machine refuses (not root, the
// test range full).
func (e *Env) NewUser() *User {
	e.T.Helper()
	if os.Geteuid() != 0 {
		e.T.Fatalf("slurmtest: %v", errNotRoot)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e.sweep(ctx)
	u, err := e.addUnixUser(ctx)
	if err != nil {
		e.T.Fatalf("slurmtest: %v", err)
	}
	e.T.Logf("slurmtest: user %s (uid %d), work directory %s", u.Name, u.UID, u.WorkDir)
	e.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := e.endJobs(ctx, u.Name, ""); err != nil {
			e.T.Errorf("slurmtest: %v", err)
		}
		if err := e.removeSlurmUser(ctx, u.Name); err != nil {
			e.T.Errorf("slurmtest: %v", err)
		}
		if err := removeUnixUser(ctx, u.Name); err != nil {
			e.T.Errorf("slurmtest: %v", err)
		}
		if err := os.RemoveAll(u.WorkDir); err != nil {
			e.T.Errorf("slurmtest: remove %s: %v", u.WorkDir, err)
		}
	})
	return u
}

// owner is what marks a test user (its GECOS field) or account (its description) as made by
// this process for this cluster: the marker, the state directory's hash, the pid and the
// process's start time (so a recycled pid is never taken for the owner).
func (c *Cluster) owner() string {
	pid := os.Getpid()
	return fmt.Sprintf("%s %s %d %s", c.marker, c.dirHash, pid, testsetup.ProcessStart(pid))
}

// ownerGone tells whether an owner string names a process that no longer runs.
func (c *Cluster) ownerGone(owner string) bool {
	f := strings.Fields(owner)
	if len(f) != 4 || f[0] != c.marker {
		return false
	}
	pid, err := strconv.Atoi(f[2])
	if err != nil {
		return false
	}
	return testsetup.ProcessStart(pid) != f[3]
}

// addUnixUser takes the next uid of the test range that no user or group has (nextID), with a
// random name, through groupadd and useradd (which lock /etc/passwd and /etc/group: a
// concurrent test's add is retried).
func (e *Env) addUnixUser(ctx context.Context) (*User, error) {
	owner := e.owner()
	for {
		id, err := e.nextID()
		if err != nil {
			return nil, err
		}
		if idTaken(id) {
			continue
		}
		var b [4]byte
		_, _ = rand.Read(b[:])
		name := "slt-" + hex.EncodeToString(b[:])
		bounds := []string{"-K", fmt.Sprintf("GID_MIN=%d", e.TestUIDMin), "-K", fmt.Sprintf("GID_MAX=%d", e.TestUIDMax)}
		code, err := retryLocked(ctx, "groupadd", append(bounds, "-g", strconv.Itoa(id), name)...)
		if code == 4 || code == 9 { // the gid or the name was taken meanwhile
			continue
		}
		if err != nil {
			return nil, err
		}
		code, err = retryLocked(ctx, "useradd", "-K", fmt.Sprintf("UID_MIN=%d", e.TestUIDMin), "-K", fmt.Sprintf("UID_MAX=%d", e.TestUIDMax),
			"-u", strconv.Itoa(id), "-g", name, "-M", "-d", "/nonexistent", "-s", "/usr/sbin/nologin", "-c", owner, name)
		if code == 4 || code == 9 {
			_, _ = retryLocked(ctx, "groupdel", name)
			continue
		}
		if err != nil {
			_, _ = retryLocked(ctx, "groupdel", name)
			return nil, err
		}
		u := &User{Name: name, UID: id, GID: id, WorkDir: filepath.Join(e.WorkDir, name)}
		if err := os.MkdirAll(e.WorkDir, 0o755); err != nil {
			return nil, err
		}
		if err := os.Mkdir(u.WorkDir, 0o700); err != nil {
			return nil, err
		}
		if err := os.Chown(u.WorkDir, u.UID, u.GID); err != nil {
			return nil, err
		}
		return u, nil
	}
}

// nextID hands out the ids of the test range in order, each once in the cluster's life (the
// counter is the state directory's test-uid.next, which make slurm-up empties with the rest of
// a fresh cluster's state): the controller matches a job to its user by uid and keeps ended jobs
// for MinJobAge, so a reused uid would hand a new test user an earlier one's jobs
// (docs/testing.md#the-slurm-lane). It fails once the range is spent, saying how to start afresh.
func (c *Cluster) nextID() (int, error) {
	path := filepath.Join(c.Dir, "test-uid.next")
	f, err := lockedFile(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return 0, err
	}
	id := c.TestUIDMin
	if s := strings.TrimSpace(string(b)); s != "" {
		if id, err = strconv.Atoi(s); err != nil {
			return 0, fmt.Errorf("%s holds %q, not a uid", path, s)
		}
	}
	if id > c.TestUIDMax {
		return 0, fmt.Errorf("this Slurm cluster has handed out every test uid (%d-%d), and never hands one out twice: "+
			"restart it (make slurm-down && make slurm-up)", c.TestUIDMin, c.TestUIDMax)
	}
	if err := f.Truncate(0); err != nil {
		return 0, err
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(id+1)+"\n"), 0); err != nil {
		return 0, err
	}
	return id, nil
}

// idTaken tells whether a user or group has the id (in /etc/passwd or /etc/group).
func idTaken(id int) bool {
	for _, f := range []string{"/etc/passwd", "/etc/group"} {
		for _, fields := range colonFile(f) {
			if len(fields) > 2 && fields[2] == strconv.Itoa(id) {
				return true
			}
		}
	}
	return false
}

// colonFile reads /etc/passwd or /etc/group into fields.
func colonFile(path string) [][]string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, strings.Split(sc.Text(), ":"))
	}
	return out
}

// retryLocked runs one of shadow's tools (useradd, groupadd, userdel, groupdel), again while it
// answers that another process holds the password or group file's lock (exit code 10), and
// returns its exit code.
func retryLocked(ctx context.Context, name string, args ...string) (int, error) {
	for {
		out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
		var ee *exec.ExitError
		if err == nil {
			return 0, nil
		}
		if !errors.As(err, &ee) {
			return -1, fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
		}
		if ee.ExitCode() != 10 {
			return ee.ExitCode(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		select {
		case <-ctx.Done():
			return ee.ExitCode(), fmt.Errorf("%s %s: the password or group file stayed locked: %w", name, strings.Join(args, " "), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// removeUnixUser removes the user and its group; either already gone is not an error.
func removeUnixUser(ctx context.Context, name string) error {
	if code, err := retryLocked(ctx, "userdel", name); err != nil && code != 6 {
		return err
	}
	if code, err := retryLocked(ctx, "groupdel", name); err != nil && code != 6 {
		return err
	}
	return nil
}

// NewAccount creates a Slurm account (sacctmgr add account, under root) with the given settings
// of its association in sacctmgr's form ("GrpTRES=cpu=1", "MaxJobs=2"), removed when the test
// ends (after the associations made later, which go first).
func (e *Env) NewAccount(limits ...string) string {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e.sweep(ctx)
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "sla-" + hex.EncodeToString(b[:])
	args := []string{"add", "account", name, "cluster=" + e.Name, "description=" + e.owner(), "organization=metallo-test"}
	if _, err := e.changeAccounting(ctx, append(args, limits...)...); err != nil {
		e.T.Fatalf("slurmtest: %v", err)
	}
	e.T.Logf("slurmtest: account %s %s", name, strings.Join(limits, " "))
	e.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := e.removeAccount(ctx, name); err != nil {
			e.T.Errorf("slurmtest: %v", err)
		}
	})
	return name
}

// Associate lets u charge jobs to account (sacctmgr add user), with the given settings of the
// user's association ("MaxJobs=1"); the association is removed when the test ends, after the
// user's jobs in the account have ended.
func (e *Env) Associate(u *User, account string, limits ...string) {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"add", "user", u.Name, "account=" + account, "cluster=" + e.Name}
	if _, err := e.changeAccounting(ctx, append(args, limits...)...); err != nil {
		e.T.Fatalf("slurmtest: %v", err)
	}
	e.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := e.endJobs(ctx, u.Name, account); err != nil {
			e.T.Errorf("slurmtest: %v", err)
			return
		}
		if _, err := e.changeAccounting(ctx, "delete", "user", "where", "name="+u.Name, "account="+account, "cluster="+e.Name); err != nil && !nothingDeleted(err) {
			e.T.Errorf("slurmtest: %v", err)
		}
	})
}

// endJobs cancels the user's jobs (in account, when given) and waits until the controller holds
// none of them unfinished.
func (c *Cluster) endJobs(ctx context.Context, user, account string) error {
	sel := []string{"-u", user}
	if account != "" {
		sel = append(sel, "-A", account)
	}
	if _, err := c.command(ctx, "scancel", sel...); err != nil && !strings.Contains(err.Error(), "Invalid user") {
		return err
	}
	for {
		out, err := c.command(ctx, "squeue", append([]string{"-h", "-o", "%i %T"}, sel...)...)
		if err == nil && strings.TrimSpace(out) == "" {
			return nil
		}
		if err != nil && strings.Contains(err.Error(), "Invalid user") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the jobs of %s did not end after scancel: %s (%v)", user, strings.TrimSpace(out), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// removeSlurmUser removes the user's remaining associations and the Slurm user.
func (c *Cluster) removeSlurmUser(ctx context.Context, name string) error {
	if _, err := c.changeAccounting(ctx, "delete", "user", "where", "name="+name); err != nil && !nothingDeleted(err) {
		return err
	}
	return nil
}

// removeAccount ends the account's jobs, then removes it with its associations.
func (c *Cluster) removeAccount(ctx context.Context, name string) error {
	out, err := c.command(ctx, "sacctmgr", "-n", "-P", "show", "association", "where", "account="+name, "format=user")
	if err != nil {
		return err
	}
	for _, u := range strings.Fields(out) {
		if err := c.endJobs(ctx, u, name); err != nil {
			return err
		}
	}
	// Without cluster=: with it, sacctmgr removes only the account's associations there.
	if _, err := c.changeAccounting(ctx, "delete", "account", "where", "name="+name); err != nil && !nothingDeleted(err) {
		return err
	}
	return nil
}

// changeAccounting runs sacctmgr -i with args (an add, modify or delete), one at a time on the
// machine: under an flock of the state directory's sacctmgr.lock. slurmdbd 22.05 has been seen
// to lose a change made beside another (an account just added "doesn't exist" for the next
// command; a user added while another was removed missing from slurmdbd's own user list for the
// rest of its life, so that the user could not read its jobs from accounting); one change at a
// time has not lost one (docs/testing.md#the-slurm-lane).
func (c *Cluster) changeAccounting(ctx context.Context, args ...string) (string, error) {
	f, err := lockedFile(filepath.Join(c.Dir, "sacctmgr.lock"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	return c.command(ctx, "sacctmgr", append([]string{"-i"}, args...)...)
}

// lockedFile opens (creating) the file and takes an exclusive flock on it, waiting for it; the
// lock goes with the file's Close, or with the process.
func lockedFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

// nothingDeleted tells a sacctmgr delete that found nothing (exit 1, "Nothing deleted").
func nothingDeleted(err error) bool { return strings.Contains(err.Error(), "Nothing deleted") }

// sweep removes the test users and accounts of this cluster whose making process no longer runs
// (one killed before its cleanup).
func (e *Env) sweep(ctx context.Context) {
	for _, f := range colonFile("/etc/passwd") {
		if len(f) < 5 {
			continue
		}
		uid, err := strconv.Atoi(f[2])
		if err != nil || uid < e.TestUIDMin || uid > e.TestUIDMax || !e.ownerGone(f[4]) {
			continue
		}
		e.T.Logf("slurmtest: removing the test user %s left by a process that no longer runs (%s)", f[0], f[4])
		if err := e.endJobs(ctx, f[0], ""); err == nil {
			_ = e.removeSlurmUser(ctx, f[0])
			_ = removeUnixUser(ctx, f[0])
			_ = os.RemoveAll(filepath.Join(e.WorkDir, f[0]))
		}
	}
	out, err := e.command(ctx, "sacctmgr", "-n", "-P", "show", "account", "format=account,description")
	if err != nil {
		return
	}
	for _, line := range strings.Split(out, "\n") {
		name, desc, ok := strings.Cut(line, "|")
		if ok && e.ownerGone(desc) {
			e.T.Logf("slurmtest: removing the account %s left by a process that no longer runs (%s)", name, desc)
			_ = e.removeAccount(ctx, name)
		}
	}
}

// Member is a test user with a Slurm account of its own, as a member is at a Slurm Site, and the
// REST client a Runtime would submit its work through.
type Member struct {
	*User
	// Account is the member's account, with the association limits NewMember was given.
	Account string
	// Runtime is a client as the SlurmUser acting as the member (SlurmUserClient).
	Runtime *Client
}

// NewMember makes a user (NewUser), an account with the given limits (NewAccount) and the user's
// association with it (Associate), all removed when the test ends.
func (e *Env) NewMember(limits ...string) *Member {
	e.T.Helper()
	u := e.NewUser()
	acct := e.NewAccount(limits...)
	e.Associate(u, acct)
	return &Member{User: u, Account: acct, Runtime: e.SlurmUserClient(u.Name)}
}

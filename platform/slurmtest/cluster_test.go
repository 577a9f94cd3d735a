package slurmtest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/platform/slurmtest"
	"github.com/pharos-metallo/metallo/platform/testsetup"
)

// jobWait bounds every wait on a job's state: generous, for a loaded two-core machine.
const jobWait = 3 * time.Minute

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// gated is a job script that runs until the file named gate appears in its working directory,
// so a test decides when a job ends instead of guessing how long it runs.
func gated(gate string) string {
	return "#!/bin/sh\nwhile [ ! -e " + gate + " ]; do sleep 0.2; done\n"
}

// release creates the gate file a gated job of u waits for.
func release(t *testing.T, u *slurmtest.User, gate string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(u.WorkDir, gate), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The cluster carries the configuration the Runtime relies on, in the controller and in
// slurmdbd: members see only their own jobs, root runs none, no job is requeued on its own,
// limits and associations are enforced, the comment is stored and neither the environment
// nor the script; memory is enforced through cgroup v1; slurmrestd listens on loopback only,
// as an unprivileged user, and the SlurmUser's token file is private.
func TestTheClusterIsConfiguredAsTheRuntimeReliesOn(t *testing.T) {
	t.Parallel()
	e := slurmtest.New(t)
	conf := e.Command("scontrol", "show", "config")
	for key, want := range map[string]string{
		"PrivateData":              "jobs",
		"DisableRootJobs":          "Yes",
		"JobRequeue":               "0",
		"AccountingStorageEnforce": "associations,limits",
		"AccountingStoreFlags":     "job_comment",
		"AuthAltTypes":             "auth/jwt",
		"SlurmUser":                e.SlurmUser + "(",
		"ProctrackType":            "proctrack/cgroup",
		"TaskPlugin":               "task/cgroup",
		"SelectTypeParameters":     "CR_CORE_MEMORY",
		"CgroupPlugin":             "cgroup/v1",
		"ConstrainRAMSpace":        "yes",
	} {
		got := setting(conf, key)
		if !strings.HasPrefix(got, want) {
			t.Errorf("scontrol show config: %s = %q, want %q", key, got, want)
		}
	}
	// sacctmgr show configuration prints the client's settings, then slurmdbd's own.
	dbd := e.Command("sacctmgr", "show", "configuration")
	_, dbdPart, ok := strings.Cut(dbd, "SlurmDBD configuration:")
	if !ok {
		t.Fatalf("sacctmgr show configuration has no SlurmDBD section:\n%s", dbd)
	}
	if got := setting(dbdPart, "PrivateData"); got != "jobs" {
		t.Errorf("slurmdbd's PrivateData = %q, want jobs", got)
	}

	fi, err := os.Stat(e.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("the SlurmUser's token file %s has mode %v, want 0600", e.TokenFile, fi.Mode().Perm())
	}

	pidb, err := os.ReadFile(filepath.Join(e.Dir, "run", "slurmrestd.pid"))
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(string(pidb)), "status"))
	if err != nil {
		t.Fatalf("slurmrestd's process: %v", err)
	}
	slurmUID := strings.TrimSuffix(strings.TrimPrefix(setting(conf, "SlurmUser"), e.SlurmUser+"("), ")")
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) == 5 && f[0] == "Uid:" {
			for _, id := range f[1:] {
				if id == "0" || id == slurmUID {
					t.Errorf("slurmrestd runs with uid %s (%s), want an unprivileged user that is not the SlurmUser", id, line)
				}
			}
		}
	}
	if listeners := tcpListeners(t, 6820); len(listeners) != 1 || listeners[0] != "127.0.0.1" {
		t.Errorf("slurmrestd listens on %v, want 127.0.0.1 only", listeners)
	}
}

// setting is the value of "Key = value" in scontrol's or sacctmgr's configuration listing.
func setting(listing, key string) string {
	for _, line := range strings.Split(listing, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// tcpListeners lists the IPv4 and IPv6 addresses listening on port (from /proc/net/tcp{,6}).
func tcpListeners(t *testing.T, port int) []string {
	t.Helper()
	var out []string
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 4 || fields[3] != "0A" { // LISTEN
				continue
			}
			addr, p, _ := strings.Cut(fields[1], ":")
			if n, err := strconv.ParseUint(p, 16, 16); err != nil || int(n) != port {
				continue
			}
			out = append(out, hexAddr(addr))
		}
	}
	return out
}

// hexAddr renders /proc/net/tcp's little-endian IPv4 address (or marks an IPv6 one).
func hexAddr(h string) string {
	if len(h) != 8 {
		return "[" + h + "]"
	}
	v, err := strconv.ParseUint(h, 16, 32)
	if err != nil {
		return h
	}
	return fmt.Sprintf("%d.%d.%d.%d", v&0xff, v>>8&0xff, v>>16&0xff, v>>24)
}

// A job the Runtime submits through slurmrestd with the SlurmUser's token and the member's name
// in X-SLURM-USER-NAME runs as the member: the uid the job itself prints is the member's, and
// so is the user the controller and accounting record, with the job's comment.
func TestAJobSubmittedAsTheSlurmUserRunsUnderTheMembersUID(t *testing.T) {
	t.Parallel()
	e := slurmtest.New(t)
	m := e.NewMember()
	u, acct, c := m.User, m.Account, m.Runtime
	id, err := c.Submit(ctx(t), slurmtest.Job{
		Name: "whoami", Account: acct, Comment: "metallo-attempt-1",
		CurrentWorkingDirectory: u.WorkDir, StandardOutput: filepath.Join(u.WorkDir, "out.txt"),
		Environment: map[string]string{"PATH": "/usr/bin:/bin"},
	}, "#!/bin/sh\nid -u\nid -un\n")
	if err != nil {
		t.Fatalf("submit as the SlurmUser for %s: %v", u.Name, err)
	}
	j := e.WaitForJob(c, id, jobWait, "ended", slurmtest.Terminal)
	if j.State != "COMPLETED" {
		t.Fatalf("job %d ended %s (%s), want COMPLETED", id, j.State, j.StateReason)
	}
	if j.UserID != u.UID || j.UserName != u.Name || j.GroupID != u.GID {
		t.Errorf("the controller records user %s (uid %d, gid %d), want %s (uid %d, gid %d)", j.UserName, j.UserID, j.GroupID, u.Name, u.UID, u.GID)
	}
	out, err := os.ReadFile(filepath.Join(u.WorkDir, "out.txt"))
	if err != nil {
		t.Fatalf("the job's output: %v", err)
	}
	if got, want := strings.Fields(string(out)), []string{strconv.Itoa(u.UID), u.Name}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the job printed %q, want its uid and name %q", got, want)
	}
	fi, err := os.Stat(filepath.Join(u.WorkDir, "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := fi.Sys().(interface{ Uid() uint32 }); ok && int(st.Uid()) != u.UID {
		t.Errorf("the output file belongs to uid %d, want %d", st.Uid(), u.UID)
	}
	a := e.WaitForAccounting(c, id, jobWait, "completed", func(a slurmtest.AccountingJob) bool { return a.State.Current == "COMPLETED" })
	if a.User != u.Name || a.Account != acct || a.Comment.Job != "metallo-attempt-1" {
		t.Errorf("accounting records user %q account %q comment %q, want %q %q %q", a.User, a.Account, a.Comment.Job, u.Name, acct, "metallo-attempt-1")
	}
}

// PrivateData=jobs: a second member, even of the same account, sees nothing of the first
// member's job, neither in the controller (while it runs and after it ended) nor in
// accounting, and cannot name the first member with its own token; the owner sees it in both.
func TestASecondMemberCannotSeeTheJob(t *testing.T) {
	t.Parallel()
	e := slurmtest.New(t)
	owner, other := e.NewUser(), e.NewUser()
	acct := e.NewAccount()
	e.Associate(owner, acct)
	e.Associate(other, acct)
	runtime := e.SlurmUserClient(owner.Name)
	id, err := runtime.Submit(ctx(t), slurmtest.Job{Name: "private", Account: acct, CurrentWorkingDirectory: owner.WorkDir}, gated("done"))
	if err != nil {
		t.Fatal(err)
	}
	e.WaitForJob(runtime, id, jobWait, "running", slurmtest.InState("RUNNING"))
	ownerC, otherC := e.UserClient(owner.Name), e.UserClient(other.Name)
	hidden := func(when string) {
		t.Helper()
		_, err := otherC.Job(ctx(t), id)
		var apiErr *slurmtest.APIError
		if !errors.As(err, &apiErr) || !apiErr.Has(2017) {
			t.Errorf("%s: %s reading %s's job %d: %v, want error 2017 (invalid job id)", when, other.Name, owner.Name, id, err)
		}
		jobs, err := otherC.Jobs(ctx(t))
		if err != nil {
			t.Fatalf("%s: %s lists jobs: %v", when, other.Name, err)
		}
		for _, j := range jobs {
			if j.JobID == id || j.UserName == owner.Name {
				t.Errorf("%s: %s's job list shows job %d of %s", when, other.Name, j.JobID, j.UserName)
			}
		}
	}
	hidden("running")
	impostor := slurmtest.NewClient(e.RESTURL, owner.Name, otherC.Token)
	if _, err := impostor.Job(ctx(t), id); err == nil {
		t.Errorf("%s's own token with X-SLURM-USER-NAME %s read the job", other.Name, owner.Name)
	}
	if _, err := impostor.Submit(ctx(t), slurmtest.Job{Name: "impostor", Account: acct, CurrentWorkingDirectory: owner.WorkDir}, "#!/bin/sh\ntrue\n"); err == nil {
		t.Errorf("%s's own token with X-SLURM-USER-NAME %s submitted a job", other.Name, owner.Name)
	}

	release(t, owner, "done")
	e.WaitForJob(ownerC, id, jobWait, "completed", slurmtest.InState("COMPLETED"))
	hidden("ended")
	e.WaitForAccounting(ownerC, id, jobWait, "completed", func(a slurmtest.AccountingJob) bool { return a.State.Current == "COMPLETED" })
	_, err = otherC.AccountingJob(ctx(t), id)
	var apiErr *slurmtest.APIError
	if !errors.As(err, &apiErr) || !apiErr.Has(9003) {
		t.Errorf("%s reading %s's job %d from accounting: %v, want error 9003 (nothing found)", other.Name, owner.Name, id, err)
	}
	all, err := otherC.AccountingJobs(ctx(t))
	if err != nil && (!errors.As(err, &apiErr) || !apiErr.Has(9003)) {
		t.Fatalf("%s lists jobs in accounting: %v", other.Name, err)
	}
	for _, j := range all {
		if j.JobID == id || j.User == owner.Name {
			t.Errorf("%s's accounting list shows job %d of %s", other.Name, j.JobID, j.User)
		}
	}
}

// DisableRootJobs=YES: a job as root is refused at submission, whether the SlurmUser names root
// or root's own token does, and no job is created.
func TestAJobAsRootIsRefused(t *testing.T) {
	t.Parallel()
	e := slurmtest.New(t)
	name := fmt.Sprintf("as-root-%d", time.Now().UnixNano())
	for through, c := range map[string]*slurmtest.Client{"the SlurmUser's token": e.SlurmUserClient("root"), "root's own token": e.UserClient("root")} {
		id, err := c.Submit(ctx(t), slurmtest.Job{Name: name, CurrentWorkingDirectory: "/tmp"}, "#!/bin/sh\nid -u\n")
		if err == nil {
			_ = c.Cancel(ctx(t), id)
			t.Fatalf("a job as root through %s was accepted (job %d)", through, id)
		}
		var apiErr *slurmtest.APIError
		if !errors.As(err, &apiErr) || !apiErr.Has(2010) {
			t.Errorf("submitting as root through %s: %v, want error 2010 (invalid user id)", through, err)
		}
	}
	jobs, err := e.SlurmUserClient(e.SlurmUser).Jobs(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Name == name {
			t.Errorf("the refused submission left job %d (%s)", j.JobID, j.State)
		}
	}
}

// An account limited to one CPU (GrpTRES=cpu=1) runs one 1-CPU job at a time: the second pends
// with the reason AssocGrpCpuLimit while the first runs, and starts once the first has ended.
func TestTheSecondJobPendsOnTheAccountsCPULimitThenRuns(t *testing.T) {
	t.Parallel()
	e := slurmtest.New(t)
	m := e.NewMember("GrpTRES=cpu=1")
	u, acct, c := m.User, m.Account, m.Runtime
	job := func(name string) slurmtest.Job {
		return slurmtest.Job{Name: name, Account: acct, CPUsPerTask: 1, CurrentWorkingDirectory: u.WorkDir}
	}
	first, err := c.Submit(ctx(t), job("first"), gated("release-first"))
	if err != nil {
		t.Fatal(err)
	}
	e.WaitForJob(c, first, jobWait, "running", slurmtest.InState("RUNNING"))
	second, err := c.Submit(ctx(t), job("second"), gated("release-second"))
	if err != nil {
		t.Fatal(err)
	}
	e.WaitForJob(c, second, jobWait, "pending on AssocGrpCpuLimit", func(j slurmtest.JobInfo) bool {
		return j.State == "PENDING" && j.StateReason == "AssocGrpCpuLimit"
	})
	if j, err := c.Job(ctx(t), first); err != nil || j.State != "RUNNING" {
		t.Fatalf("the first job while the second pends: %+v %v, want RUNNING", j, err)
	}
	release(t, u, "release-first")
	done := e.WaitForJob(c, first, jobWait, "completed", slurmtest.InState("COMPLETED"))
	started := e.WaitForJob(c, second, jobWait, "running", slurmtest.InState("RUNNING"))
	if started.StartTime < done.EndTime {
		t.Errorf("the second job started at %d, before the first ended at %d", started.StartTime, done.EndTime)
	}
	release(t, u, "release-second")
	e.WaitForJob(c, second, jobWait, "completed", slurmtest.InState("COMPLETED"))
}

// Memory is enforced: a job that touches more memory than it asked for ends OUT_OF_MEMORY, in
// the controller and in accounting, while one within its memory completes.
func TestAJobOverItsMemoryEndsOutOfMemory(t *testing.T) {
	t.Parallel()
	e := slurmtest.New(t)
	m := e.NewMember()
	u, acct, c := m.User, m.Account, m.Runtime
	// dd reads /dev/zero into one buffer of bs bytes, touching every page of it.
	submit := func(name, bs string) int {
		id, err := c.Submit(ctx(t), slurmtest.Job{Name: name, Account: acct, MemoryPerNode: 64, CurrentWorkingDirectory: u.WorkDir},
			"#!/bin/sh\ndd if=/dev/zero of=/dev/null bs="+bs+" count=1\n")
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	within, over := submit("within", "16M"), submit("over", "256M")
	if j := e.WaitForJob(c, within, jobWait, "ended", slurmtest.Terminal); j.State != "COMPLETED" {
		t.Errorf("the job within its 64 MB ended %s (%s), want COMPLETED", j.State, j.StateReason)
	}
	j := e.WaitForJob(c, over, jobWait, "ended", slurmtest.Terminal)
	if j.State != "OUT_OF_MEMORY" {
		t.Fatalf("the job touching 256 MB with 64 MB ended %s (%s), want OUT_OF_MEMORY", j.State, j.StateReason)
	}
	e.WaitForAccounting(c, over, jobWait, "OUT_OF_MEMORY", func(a slurmtest.AccountingJob) bool { return a.State.Current == "OUT_OF_MEMORY" })
}

// One Slurm cluster per machine: another state directory (another worktree) finds Slurm's
// ports held, and make slurm-status there says by which cluster, naming its state directory.
// (make slurm-up there fails with the same sentence; the test asks status, which starts nothing.)
func TestAnotherWorktreeIsToldWhichClusterHoldsThePorts(t *testing.T) {
	t.Parallel()
	e := slurmtest.New(t)
	root, err := testsetup.ModuleRoot(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx(t), "bash", filepath.Join(root, "deploy", "slurm", "slurm.sh"), "status")
	cmd.Env = append(os.Environ(), "METALLO_SLURM_DIR="+filepath.Join(t.TempDir(), "other"))
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("status of another state directory exited 0 while %s holds the ports:\n%s", e.Dir, out)
	}
	if want := "held by the Slurm cluster in " + e.Dir + " "; !strings.Contains(string(out), want) {
		t.Errorf("status of another state directory says %q, want it to name the holder (%q)", out, want)
	}
}

package slurmtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What a test makes is gone when it ends: its running job is cancelled, its association,
// account, Slurm user, Unix user, group and work directory removed.
func TestTheHelpersRemoveWhatTheyMade(t *testing.T) {
	t.Parallel()
	var (
		u    *User
		acct string
		job  int
	)
	made := t.Run("make", func(t *testing.T) {
		e := New(t)
		u = e.NewUser()
		acct = e.NewAccount("GrpTRES=cpu=2")
		e.Associate(u, acct, "MaxJobs=3")
		c := e.SlurmUserClient(u.Name)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var err error
		job, err = c.Submit(ctx, Job{Name: "left-running", Account: acct, CurrentWorkingDirectory: u.WorkDir},
			"#!/bin/sh\nwhile :; do sleep 1; done\n")
		if err != nil {
			t.Fatal(err)
		}
		e.WaitForJob(c, job, 3*time.Minute, "running", InState("RUNNING"))
	})
	if !made {
		t.Fatal("the subtest that makes a user, an account and a job failed")
	}
	e := New(t)
	c := e.SlurmUserClient(e.SlurmUser)
	if j := e.WaitForJob(c, job, 3*time.Minute, "ended", Terminal); j.State != "CANCELLED" {
		t.Errorf("the test's running job ended %s, want CANCELLED by its cleanup", j.State)
	}
	assertGone(t, e, u, acct)
}

// A user or account whose making process no longer runs (a test killed before its cleanup) is
// removed by the next NewUser or NewAccount on the machine.
func TestALeftoverOfAKilledTestIsRemovedByTheNext(t *testing.T) {
	t.Parallel()
	e := New(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	owner := fmt.Sprintf("%s %s %d %s", e.marker, e.dirHash, dead.Process.Pid, "1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Made as this process's (so that no sweep of a concurrent test takes them half made), then
	// handed to the dead process.
	u, err := e.addUnixUser(ctx)
	if err != nil {
		t.Fatal(err)
	}
	acct := "sla-left" + strconv.Itoa(dead.Process.Pid)
	t.Cleanup(func() { // what the sweep did not remove, when the test failed before it ran
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = e.removeAccount(ctx, acct)
		_ = e.removeSlurmUser(ctx, u.Name)
		_ = removeUnixUser(ctx, u.Name)
		_ = os.RemoveAll(u.WorkDir)
	})
	if _, err := e.changeAccounting(ctx, "add", "account", acct, "cluster="+e.Name, "description="+e.owner()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.changeAccounting(ctx, "add", "user", u.Name, "account="+acct, "cluster="+e.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := e.changeAccounting(ctx, "modify", "account", "where", "name="+acct, "set", "description="+owner); err != nil {
		t.Fatal(err)
	}
	if _, err := retryLocked(ctx, "usermod", "-c", owner, u.Name); err != nil {
		t.Fatal(err)
	}
	e.NewUser()
	assertGone(t, e, u, acct)
}

func assertGone(t *testing.T, e *Env, u *User, acct string) {
	t.Helper()
	for _, f := range []string{"/etc/passwd", "/etc/group"} {
		for _, fields := range colonFile(f) {
			if fields[0] == u.Name {
				t.Errorf("%s still has %s", f, strings.Join(fields, ":"))
			}
		}
	}
	if _, err := os.Stat(u.WorkDir); !os.IsNotExist(err) {
		t.Errorf("the work directory %s: %v, want it removed", u.WorkDir, err)
	}
	if out := e.Command("sacctmgr", "-n", "-P", "show", "association", "where", "user="+u.Name); strings.TrimSpace(out) != "" {
		t.Errorf("slurmdbd still has %s's associations: %s", u.Name, out)
	}
	if out := e.Command("sacctmgr", "-n", "-P", "show", "user", u.Name); strings.TrimSpace(out) != "" {
		t.Errorf("slurmdbd still has the user %s: %s", u.Name, out)
	}
	if out := e.Command("sacctmgr", "-n", "-P", "show", "account", acct); strings.TrimSpace(out) != "" {
		t.Errorf("slurmdbd still has the account %s: %s", acct, out)
	}
	if _, err := os.Stat(filepath.Join(e.WorkDir, u.Name)); !os.IsNotExist(err) {
		t.Errorf("%s left its work directory", u.Name)
	}
}

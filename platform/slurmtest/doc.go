// Package slurmtest gives tests a real Slurm cluster: the one-node Slurm 22.05 cluster of
// Debian's packages that `make slurm-up` starts (deploy/slurm: munged, slurmdbd on the machine's
// MariaDB, slurmctld, slurmd and slurmrestd with JWT authentication on 127.0.0.1:6820).
//
// New attaches to the cluster running in the state directory (METALLO_SLURM_DIR, else var/slurm
// at the module's root) and logs the line "metallo-lane: slurm", which the CI lane check counts.
// It never starts a cluster and never skips: a test without a healthy cluster FAILS, naming why
// (make slurm-up starts one; make test does first).
//
// A test:
//
//	// Doc comment: what the test proves.
//	func TestMemberJobRuns(t *testing.T) {
//		e := slurmtest.New(t)                  // logs "metallo-lane: slurm"
//		u := e.NewUser()                       // a Unix user in the test range, with a work directory
//		acct := e.NewAccount("GrpTRES=cpu=1")  // a Slurm account with an association limit
//		e.Associate(u, acct)                   // u may charge jobs to acct (NewMember does all three)
//		c := e.SlurmUserClient(u.Name)         // REST as the SlurmUser acting as u
//		id, err := c.Submit(ctx, slurmtest.Job{Name: "j", Account: acct, CurrentWorkingDirectory: u.WorkDir}, "#!/bin/sh\nid -u\n")
//		job := e.WaitForJob(c, id, 3*time.Minute, "ended", slurmtest.Terminal)
//	}
//
// Everything a test makes is removed when it ends (t.Cleanup, last made first): the user's jobs
// are cancelled and waited for, then its associations, the Slurm user, the account, the Unix
// user and group and the work directory go. A test process killed before its cleanup leaves
// them behind; the next NewUser or NewAccount on the machine removes what a process that no
// longer runs made (its pid and start time are in the user's GECOS field and the account's
// description), and make slurm-down removes every test user of its state directory.
//
// What is real: everything. munge authentication, the controller's scheduling and its
// association limits, accounting in slurmdbd on MariaDB, PrivateData, jobs run by slurmd as
// their users' uids in cgroups that enforce memory (cgroup v1 here), slurmrestd's v0.0.38 API
// with JWT tokens. The node's CPU count (8) and memory (8 GiB) are configured, not measured
// (SlurmdParameters=config_overrides), so a two-core machine runs eight 1-CPU jobs at once.
// docs/testing.md#the-slurm-lane has the details.
package slurmtest

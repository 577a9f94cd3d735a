package slurmtest

import (
	"context"
	"errors"
	"time"
)

// pollEvery is how often the waits read the controller: slurmrestd has no watch, so a wait
// polls until the condition holds (a bound on a hang, never a duration a test asserts).
const pollEvery = 200 * time.Millisecond

// TerminalStates are the states a job ends in (Slurm's base states after completion).
var TerminalStates = map[string]bool{
	"COMPLETED": true, "FAILED": true, "CANCELLED": true, "TIMEOUT": true, "OUT_OF_MEMORY": true,
	"NODE_FAIL": true, "PREEMPTED": true, "BOOT_FAIL": true, "DEADLINE": true,
}

// Terminal is a WaitForJob condition: the job has ended, in any terminal state.
func Terminal(j JobInfo) bool { return TerminalStates[j.State] }

// InState is a WaitForJob condition: the job is in state.
func InState(state string) func(JobInfo) bool {
	return func(j JobInfo) bool { return j.State == state }
}

// WaitForJob reads the job through c until cond holds and returns it; it fails the test after
// timeout, logging the last state read. A read that fails (an answer the controller gives while
// it is busy) is retried until the timeout.
func (e *Env) WaitForJob(c *Client, id int, timeout time.Duration, what string, cond func(JobInfo) bool) JobInfo {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last JobInfo
	var lastErr error
	for {
		j, err := c.Job(ctx, id)
		if err == nil {
			last, lastErr = j, nil
			if cond(j) {
				return j
			}
		} else {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			e.T.Fatalf("slurmtest: job %d not %s within %s: last read state=%s reason=%s (error %v)", id, what, timeout, last.State, last.StateReason, lastErr)
		case <-time.After(pollEvery):
		}
	}
}

// WaitForAccounting reads the job from slurmdbd through c until it is there (a job reaches
// accounting shortly after the controller has it) and cond holds, and returns it; it fails the
// test after timeout.
func (e *Env) WaitForAccounting(c *Client, id int, timeout time.Duration, what string, cond func(AccountingJob) bool) AccountingJob {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var lastErr error
	for {
		j, err := c.AccountingJob(ctx, id)
		if err == nil && cond(j) {
			return j
		}
		lastErr = err
		var apiErr *APIError
		if err != nil && !errors.As(err, &apiErr) && ctx.Err() == nil {
			e.T.Logf("slurmtest: reading job %d from accounting: %v", id, err)
		}
		select {
		case <-ctx.Done():
			e.T.Fatalf("slurmtest: job %d not %s in accounting within %s (last error %v)", id, what, timeout, lastErr)
		case <-time.After(pollEvery):
		}
	}
}

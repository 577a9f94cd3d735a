package slurmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Client is the tests' client of slurmrestd's v0.0.38 API: the routes the lane's tests use,
// authenticated with a JWT (X-SLURM-USER-TOKEN) for the user named in X-SLURM-USER-NAME. It is
// test support, not the Runtime's Slurm adaptor.
type Client struct {
	// BaseURL is slurmrestd's URL (http://127.0.0.1:6820).
	BaseURL string
	// UserName is sent as X-SLURM-USER-NAME: the user the request acts as.
	UserName string
	// Token is sent as X-SLURM-USER-TOKEN: the JWT of UserName, or of the SlurmUser (or root),
	// which may act as any user.
	Token string
	// HTTP is the client requests go through.
	HTTP *http.Client
}

// NewClient returns a Client of slurmrestd at baseURL acting as user with token.
func NewClient(baseURL, user, token string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), UserName: user, Token: token, HTTP: &http.Client{Timeout: time.Minute}}
}

// Error is one entry of a response's errors list.
type Error struct {
	// Number is Slurm's error number (error_number, or error_code on job submission): 2017
	// "Invalid job id specified", 2010 "Invalid user id", 9003 "Nothing found with query", ...
	Number      int    `json:"error_number"`
	Code        int    `json:"error_code"`
	Error       string `json:"error"`
	Description string `json:"description"`
}

// APIError is an answer that carries errors (slurmrestd answers most failures with HTTP 500 and
// an errors list).
type APIError struct {
	// Status is the HTTP status.
	Status int
	// Errors are the response's errors.
	Errors []Error
	// Body is the raw answer, for a test's log.
	Body string
}

func (e *APIError) Error() string {
	var parts []string
	for _, x := range e.Errors {
		parts = append(parts, fmt.Sprintf("%d %s: %s", x.Num(), x.Error, x.Description))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("slurmrestd answered HTTP %d: %s", e.Status, e.Body)
	}
	return fmt.Sprintf("slurmrestd answered HTTP %d: %s", e.Status, strings.Join(parts, "; "))
}

// Num is the error's number, whichever field carries it.
func (x Error) Num() int {
	if x.Number != 0 {
		return x.Number
	}
	return x.Code
}

// Has tells whether the answer carries the error number n.
func (e *APIError) Has(n int) bool {
	for _, x := range e.Errors {
		if x.Num() == n {
			return true
		}
	}
	return false
}

// Job is a job submission's properties (v0.0.38 job_properties; the fields the tests use).
type Job struct {
	Name                    string            `json:"name,omitempty"`
	Account                 string            `json:"account,omitempty"`
	Partition               string            `json:"partition,omitempty"`
	Comment                 string            `json:"comment,omitempty"`
	CurrentWorkingDirectory string            `json:"current_working_directory,omitempty"`
	StandardOutput          string            `json:"standard_output,omitempty"`
	StandardError           string            `json:"standard_error,omitempty"`
	Environment             map[string]string `json:"environment"`
	CPUsPerTask             int               `json:"cpus_per_task,omitempty"`
	// MemoryPerNode is in MB.
	MemoryPerNode int `json:"memory_per_node,omitempty"`
	// TimeLimit is in minutes.
	TimeLimit int  `json:"time_limit,omitempty"`
	Hold      bool `json:"hold,omitempty"`
}

// JobInfo is the controller's view of a job (v0.0.38 job_info; the fields the tests use).
type JobInfo struct {
	JobID       int    `json:"job_id"`
	Name        string `json:"name"`
	UserID      int    `json:"user_id"`
	UserName    string `json:"user_name"`
	GroupID     int    `json:"group_id"`
	Account     string `json:"account"`
	Comment     string `json:"comment"`
	Partition   string `json:"partition"`
	State       string `json:"job_state"`
	StateReason string `json:"state_reason"`
	ExitCode    int    `json:"exit_code"`
	CPUs        int    `json:"cpus"`
	// StartTime and EndTime are Unix seconds (0: not yet).
	StartTime int64 `json:"start_time"`
	EndTime   int64 `json:"end_time"`
	// MemoryPerNode is in MB, when the job asked per node.
	MemoryPerNode  *int   `json:"memory_per_node"`
	StandardOutput string `json:"standard_output"`
}

// AccountingJob is slurmdbd's record of a job (dbv0.0.38 job; the fields the tests use).
type AccountingJob struct {
	JobID   int    `json:"job_id"`
	Name    string `json:"name"`
	User    string `json:"user"`
	Account string `json:"account"`
	Comment struct {
		Job string `json:"job"`
	} `json:"comment"`
	State struct {
		Current string `json:"current"`
		Reason  string `json:"reason"`
	} `json:"state"`
}

// Ping asks the controller through slurmrestd (GET /slurm/v0.0.38/ping) and fails unless it
// answers UP.
func (c *Client) Ping(ctx context.Context) error {
	var out struct {
		Pings []struct {
			Hostname string `json:"hostname"`
			Ping     string `json:"ping"`
		} `json:"pings"`
	}
	if err := c.do(ctx, http.MethodGet, "/slurm/"+APIVersion+"/ping", nil, &out); err != nil {
		return err
	}
	for _, p := range out.Pings {
		if p.Ping == "UP" {
			return nil
		}
	}
	return fmt.Errorf("no controller answers UP: %+v", out.Pings)
}

// DefaultEnvironment is what Submit sends when a Job has no Environment: slurmrestd refuses a
// submission without one.
var DefaultEnvironment = map[string]string{"PATH": "/usr/bin:/bin"}

// Submit submits a batch job (POST /slurm/v0.0.38/job/submit) and returns its ID; an empty
// Environment is sent as DefaultEnvironment.
func (c *Client) Submit(ctx context.Context, job Job, script string) (int, error) {
	if len(job.Environment) == 0 {
		job.Environment = DefaultEnvironment
	}
	body := struct {
		Script string `json:"script"`
		Job    Job    `json:"job"`
	}{script, job}
	var out struct {
		JobID int `json:"job_id"`
	}
	if err := c.do(ctx, http.MethodPost, "/slurm/"+APIVersion+"/job/submit", body, &out); err != nil {
		return 0, err
	}
	if out.JobID == 0 {
		return 0, fmt.Errorf("slurmrestd accepted the submission but named no job")
	}
	return out.JobID, nil
}

// Job reads a job from the controller (GET /slurm/v0.0.38/job/{id}). A job the caller may not
// see, or that the controller no longer holds, is an *APIError with 2017; a controller that is
// down answers the same after a long wait (never read that as "the job is gone").
func (c *Client) Job(ctx context.Context, id int) (JobInfo, error) {
	var out struct {
		Jobs []JobInfo `json:"jobs"`
	}
	if err := c.do(ctx, http.MethodGet, "/slurm/"+APIVersion+"/job/"+strconv.Itoa(id), nil, &out); err != nil {
		return JobInfo{}, err
	}
	for _, j := range out.Jobs {
		if j.JobID == id {
			return j, nil
		}
	}
	return JobInfo{}, fmt.Errorf("slurmrestd answered without job %d", id)
}

// Jobs lists the jobs the controller holds that the caller may see (GET /slurm/v0.0.38/jobs).
func (c *Client) Jobs(ctx context.Context) ([]JobInfo, error) {
	var out struct {
		Jobs []JobInfo `json:"jobs"`
	}
	err := c.do(ctx, http.MethodGet, "/slurm/"+APIVersion+"/jobs", nil, &out)
	return out.Jobs, err
}

// Cancel cancels a job (DELETE /slurm/v0.0.38/job/{id}).
func (c *Client) Cancel(ctx context.Context, id int) error {
	return c.do(ctx, http.MethodDelete, "/slurm/"+APIVersion+"/job/"+strconv.Itoa(id), nil, nil)
}

// AccountingJob reads a job from slurmdbd (GET /slurmdb/v0.0.38/job/{id}). A job not (yet) in
// accounting, or one the caller may not see, is an *APIError with 9003.
func (c *Client) AccountingJob(ctx context.Context, id int) (AccountingJob, error) {
	var out struct {
		Jobs []AccountingJob `json:"jobs"`
	}
	if err := c.do(ctx, http.MethodGet, "/slurmdb/"+APIVersion+"/job/"+strconv.Itoa(id), nil, &out); err != nil {
		return AccountingJob{}, err
	}
	for _, j := range out.Jobs {
		if j.JobID == id {
			return j, nil
		}
	}
	return AccountingJob{}, fmt.Errorf("slurmrestd answered without job %d in accounting", id)
}

// AccountingJobs lists the jobs in accounting the caller may see (GET /slurmdb/v0.0.38/jobs).
// An empty answer is an *APIError with 9003.
func (c *Client) AccountingJobs(ctx context.Context) ([]AccountingJob, error) {
	var out struct {
		Jobs []AccountingJob `json:"jobs"`
	}
	err := c.do(ctx, http.MethodGet, "/slurmdb/"+APIVersion+"/jobs", nil, &out)
	return out.Jobs, err
}

// do sends one request and decodes the answer into out; an answer that is not 2xx or carries
// errors is an *APIError.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("X-SLURM-USER-NAME", c.UserName)
	req.Header.Set("X-SLURM-USER-TOKEN", c.Token)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	var env struct {
		Errors []Error `json:"errors"`
	}
	_ = json.Unmarshal(raw, &env)
	if resp.StatusCode/100 != 2 || len(env.Errors) > 0 {
		return &APIError{Status: resp.StatusCode, Errors: env.Errors, Body: strings.TrimSpace(string(raw))}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
	}
	return nil
}

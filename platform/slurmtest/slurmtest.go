package slurmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/platform/testsetup"
)

// LaneMarker is logged by every test that uses the Slurm cluster; the CI lane check counts it.
const LaneMarker = "metallo-lane: slurm"

// APIVersion is the slurmrestd API version the lane speaks (Slurm 22.05 serves v0.0.36-v0.0.38).
const APIVersion = "v0.0.38"

// Cluster is the running Slurm cluster, as deploy/slurm/slurm.sh records it in slurm.json.
type Cluster struct {
	// Dir is the state directory.
	Dir string `json:"dir"`
	// Conf is the cluster's slurm.conf: the SLURM_CONF of every command the helpers run.
	Conf string `json:"conf"`
	// RESTURL is slurmrestd's base URL (http://127.0.0.1:6820).
	RESTURL string `json:"rest_url"`
	// SlurmUser is the controller's SlurmUser, the identity a Runtime submits through.
	SlurmUser string `json:"slurm_user"`
	// TokenFile holds the SlurmUser's JWT (mode 0600), renewed by every make slurm-up.
	TokenFile string `json:"token_file"`
	// Name is the ClusterName; Partition the one partition; Node the one node's name.
	Name      string `json:"cluster"`
	Partition string `json:"partition"`
	Node      string `json:"node"`
	// WorkDir holds the test users' work directories.
	WorkDir string `json:"work_dir"`
	// Database is slurmdbd's database on the machine's MariaDB.
	Database string `json:"database"`
	// TestUIDMin and TestUIDMax bound the uids (and gids) of test users.
	TestUIDMin int `json:"test_uid_min"`
	TestUIDMax int `json:"test_uid_max"`

	dirHash string
	marker  string
}

// Env is one test's view of the cluster.
type Env struct {
	*Cluster
	// T is the test the Env belongs to.
	T testing.TB
}

// New attaches to the running cluster and logs LaneMarker. It fails the test, naming why, when
// no healthy cluster runs in the state directory.
func New(tb testing.TB) *Env {
	tb.Helper()
	tb.Log(LaneMarker)
	c, err := shared()
	if err != nil {
		tb.Fatalf("Slurm lane cannot start: %v", err)
	}
	return &Env{Cluster: c, T: tb}
}

var (
	once      sync.Once
	sharedC   *Cluster
	sharedErr error
)

func shared() (*Cluster, error) {
	once.Do(func() { sharedC, sharedErr = attach() })
	return sharedC, sharedErr
}

// StateDir is the cluster's state directory: METALLO_SLURM_DIR, else var/slurm at the module's
// root.
func StateDir() (string, error) {
	if d := os.Getenv("METALLO_SLURM_DIR"); d != "" {
		return filepath.Abs(d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root, err := testsetup.ModuleRoot(ctx)
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "var", "slurm"), nil
}

func attach() (*Cluster, error) {
	dir, err := StateDir()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "slurm.json"))
	if err != nil {
		return nil, fmt.Errorf("no Slurm cluster in %s (%w): run make slurm-up", dir, err)
	}
	var c struct {
		Cluster
		DirHash string `json:"dir_hash"`
		Marker  string `json:"test_marker"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s/slurm.json: %w", dir, err)
	}
	cl := c.Cluster
	cl.dirHash, cl.marker = c.DirHash, c.Marker
	if cl.Conf == "" || cl.RESTURL == "" || cl.SlurmUser == "" || cl.dirHash == "" || cl.marker == "" || cl.TestUIDMin <= 0 || cl.TestUIDMax < cl.TestUIDMin {
		return nil, fmt.Errorf("%s/slurm.json lacks a field the lane needs (written by another version of deploy/slurm/slurm.sh?): run make slurm-up", dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	token, err := cl.slurmUserToken()
	if err != nil {
		return nil, err
	}
	c2 := NewClient(cl.RESTURL, cl.SlurmUser, token)
	if err := c2.Ping(ctx); err != nil {
		return nil, fmt.Errorf("the Slurm cluster in %s does not answer through slurmrestd (%w): make slurm-status says why, make slurm-up restarts it", dir, err)
	}
	if _, err := cl.command(ctx, "scontrol", "ping"); err != nil {
		return nil, fmt.Errorf("the Slurm cluster in %s: %w: make slurm-status says why, make slurm-up restarts it", dir, err)
	}
	return &cl, nil
}

// slurmUserToken reads the SlurmUser's token from TokenFile.
func (c *Cluster) slurmUserToken() (string, error) {
	b, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return "", fmt.Errorf("the SlurmUser's token: %w (make slurm-up writes it)", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("the SlurmUser's token file %s is empty: run make slurm-up", c.TokenFile)
	}
	return tok, nil
}

// command runs a Slurm command-line tool (sacctmgr, scontrol, scancel, squeue) as this process's
// user with the cluster's SLURM_CONF and returns its standard output; the error carries its
// standard error.
func (c *Cluster) command(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+c.Conf)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()+" "+out.String()))
	}
	return out.String(), nil
}

// Command runs a Slurm command-line tool as root with the cluster's SLURM_CONF (for one, the
// sacctmgr or scontrol a test needs beyond the helpers), failing the test on error.
func (e *Env) Command(name string, args ...string) string {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := e.command(ctx, name, args...)
	if err != nil {
		e.T.Fatalf("slurmtest: %v", err)
	}
	return out
}

// SlurmUserClient returns a REST client that authenticates with the SlurmUser's token and acts
// as user (X-SLURM-USER-NAME): how a Runtime submits a member's work.
func (e *Env) SlurmUserClient(user string) *Client {
	e.T.Helper()
	tok, err := e.slurmUserToken()
	if err != nil {
		e.T.Fatalf("slurmtest: %v", err)
	}
	return NewClient(e.RESTURL, user, tok)
}

// Token returns a fresh JWT for user (scontrol token, one hour), made as root.
func (e *Env) Token(user string) string {
	e.T.Helper()
	out := e.Command("scontrol", "token", "username="+user, "lifespan=3600")
	tok, ok := strings.CutPrefix(strings.TrimSpace(out), "SLURM_JWT=")
	if !ok || tok == "" {
		e.T.Fatalf("slurmtest: scontrol token username=%s printed no token: %q", user, out)
	}
	return tok
}

// UserClient returns a REST client that authenticates as user with the user's own token.
func (e *Env) UserClient(user string) *Client {
	e.T.Helper()
	return NewClient(e.RESTURL, user, e.Token(user))
}

// errNotRoot is what the helpers that change the machine's users say when the test is not root.
var errNotRoot = errors.New("the Slurm lane creates Unix users: run the tests as root (make test does)")

package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// NewPostgres sweeps the test databases whose creating process on this
// host has ended (a killed test binary's), and only those: a database of a
// running process, of another host, or without an owner comment stays.
// Real: the PostgreSQL server; the dead owner is a process that ran here.
func TestNewPostgresDropsOnlyTheDatabasesOfEndedProcessesOfThisHost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		t.Fatalf("PostgreSQL lane cannot start: %v", err)
	}
	defer conn.Close(ctx)
	t.Log(LaneMarker)

	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	mine := ownerComment(os.Getpid())
	if mine == "" {
		t.Fatal("no owner comment for this process")
	}
	comments := map[string]string{
		"dead":        fmt.Sprintf("%shost=%s pid=%d start=1", ownerPrefix, host, ended.Process.Pid),
		"live":        mine,
		"recycled":    fmt.Sprintf("%shost=%s pid=%d start=1", ownerPrefix, host, os.Getpid()),
		"elsewhere":   fmt.Sprintf("%shost=%s-elsewhere pid=%d start=1", ownerPrefix, host, ended.Process.Pid),
		"uncommented": "",
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	names := map[string]string{}
	for k, c := range comments {
		name := "metallo_test_sweep_" + k + "_" + hex.EncodeToString(b[:])
		names[k] = name
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
		if c != "" {
			if _, err := conn.Exec(ctx, "COMMENT ON DATABASE "+name+" IS "+quoteLiteral(c)); err != nil {
				t.Fatal(err)
			}
		}
	}

	NewPostgres(t)

	for k, gone := range map[string]bool{"dead": true, "recycled": true, "live": false, "elsewhere": false, "uncommented": false} {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", names[k]).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if gone != (n == 0) {
			t.Errorf("the database of a %s owner: present %v, want swept %v", k, n == 1, gone)
		}
	}
}

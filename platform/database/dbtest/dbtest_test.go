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
// running process, of another host, or without an owner in its name
// stays. Real: the PostgreSQL server; the dead owner is a process that ran
// here.
func TestNewPostgresDropsOnlyTheDatabasesOfEndedProcessesOfThisHost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		t.Fatalf("PostgreSQL lane cannot start: %v", err)
	}
	t.Log(LaneMarker)
	// Closed after the cleanups below, which drop what the sweep left.
	t.Cleanup(func() { _ = conn.Close(context.Background()) })

	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	mine := ownerSuffix(os.Getpid())
	if mine == "" {
		t.Fatal("no owner suffix for this process")
	}
	host := hostTag()
	var b [6]byte
	_, _ = rand.Read(b[:])
	random := hex.EncodeToString(b[:])
	other := "00000000"
	if host == other {
		other = "ffffffff"
	}
	names := map[string]string{
		"dead":        fmt.Sprintf("metallo_test_%s_%s_%d_1", random, host, ended.Process.Pid),
		"recycled":    fmt.Sprintf("metallo_test_%s_%s_%d_1", random, host, os.Getpid()),
		"live":        "metallo_test_" + random + mine,
		"elsewhere":   fmt.Sprintf("metallo_test_%s_%s_%d_1", random, other, ended.Process.Pid),
		"without one": "metallo_test_" + random,
	}
	for _, name := range names {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
				t.Errorf("drop %s: %v", name, err)
			}
		})
	}

	NewPostgres(t)

	for k, gone := range map[string]bool{"dead": true, "recycled": true, "live": false, "elsewhere": false, "without one": false} {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", names[k]).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if gone != (n == 0) {
			t.Errorf("the database of an owner %s (%s): present %v, want swept %v", k, names[k], n == 1, gone)
		}
	}
}

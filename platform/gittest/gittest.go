// Package gittest gives tests the Git host of standins/githost (Gitea, a
// stand-in for a Git host outside Metallo) on a fresh database of the
// local PostgreSQL server (dbtest.NewPostgres), removed with everything
// else when the test ends.
//
// A test that asks for the host and cannot have it FAILS with the reason;
// it never skips. Every such test logs LaneMarker, which the CI lane check
// counts (docs/testing.md#the-git-host-lane).
package gittest

import (
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
	"github.com/pharos-metallo/metallo/standins/githost"
)

// LaneMarker is logged by every test that uses the Git host.
const LaneMarker = "metallo-lane: githost"

// TB is what a host needs of its test (testing.TB has every method).
type TB interface {
	dbtest.TB
	githost.Owner
}

// Start starts the Git host on loopback for tb (githost.Start) and logs
// LaneMarker; tb fails when the host cannot start.
func Start(tb TB) *githost.Host {
	tb.Helper()
	tb.Log(LaneMarker)
	return githost.Start(tb, githost.Options{DatabaseURL: dbtest.NewPostgres(tb)})
}

// StartReachableAt is Start listening on ip, an address of this machine
// (githost.Options.ReachableAt).
func StartReachableAt(tb TB, ip string) *githost.Host {
	tb.Helper()
	tb.Log(LaneMarker)
	return githost.Start(tb, githost.Options{DatabaseURL: dbtest.NewPostgres(tb), ReachableAt: ip})
}

package buildinfo_test

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/platform/buildinfo"
)

// The order of sources: what the linker set wins, then the toolchain's
// build information, then (devel) and unknown.
func TestTheBuildComesFromTheLinkerThenTheToolchainThenTheFallbacks(t *testing.T) {
	vcs := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/pharos-metallo/metallo", Version: "v0.0.0-20261207192130-0f41f17e8bbd+dirty"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0f41f17e8bbd0b6015f85fdd717b54e23982f464"}, {Key: "vcs.time", Value: "2026-12-07T19:21:30Z"},
			{Key: "vcs.modified", Value: "true"}, {Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"}}}
	got := buildinfo.From(vcs, buildinfo.Linked{})
	if got.Version != vcs.Main.Version || got.Revision != "0f41f17e8bbd0b6015f85fdd717b54e23982f464" || got.Time != time.Date(2026, 12, 7, 19, 21, 30, 0, time.UTC) ||
		got.Modified == nil || !*got.Modified || got.GoVersion != "go1.26.8" || got.Platform != "linux/arm64" {
		t.Errorf("from the toolchain: %+v", got)
	}
	linked := buildinfo.From(vcs, buildinfo.Linked{Version: "v1.4.0", Revision: "abc", Time: "2026-01-02T03:04:05Z", Modified: "false"})
	if linked.Version != "v1.4.0" || linked.Revision != "abc" || linked.Time != time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) || linked.Modified == nil || *linked.Modified {
		t.Errorf("linked: %+v", linked)
	}
	// A linked value that does not parse counts as not set.
	if bad := buildinfo.From(vcs, buildinfo.Linked{Time: "yesterday", Modified: "yes"}); !bad.Time.Equal(got.Time) || bad.Modified == nil || !*bad.Modified {
		t.Errorf("unparsable linked values: %+v", bad)
	}
	for name, bi := range map[string]*debug.BuildInfo{
		"no build information": nil,
		"a test binary":        {Main: debug.Module{Version: ""}},
		"a build outside VCS":  {Main: debug.Module{Path: "github.com/pharos-metallo/metallo", Version: "(devel)"}},
	} {
		none := buildinfo.From(bi, buildinfo.Linked{})
		if none.Version != buildinfo.DevelVersion || none.Revision != buildinfo.Unknown || !none.Time.IsZero() || none.Modified != nil ||
			none.GoVersion != runtime.Version() || none.Platform != runtime.GOOS+"/"+runtime.GOARCH {
			t.Errorf("%s: %+v", name, none)
		}
	}
	// A module version from a release (go install …@v1.4.0) is the version.
	if r := buildinfo.From(&debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, buildinfo.Linked{}); r.Version != "v1.4.0" || r.Revision != buildinfo.Unknown {
		t.Errorf("a module release: %+v", r)
	}
}

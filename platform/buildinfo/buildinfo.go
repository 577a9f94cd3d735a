// Package buildinfo says which Metallo a binary is: its version, the VCS
// revision and commit time it was built from, whether the tree had
// uncommitted changes, and the Go toolchain (docs/operations.md#versions).
// `metallo version`, the metric metallo_build_info, the served OpenAPI
// document's x-metallo-build and the Runtime's Metallo-Runtime-Version
// header all read it from Read.
//
// Each field comes from the first source that has it:
//
//  1. the linker: go build -ldflags "-X <Package>.version=… -X
//     <Package>.revision=… -X <Package>.vcsTime=… -X <Package>.modified=true|false"
//     (make build sets all four from git; any build without VCS data, such
//     as one from a source archive, may set them);
//  2. the Go toolchain's build information (runtime/debug.ReadBuildInfo):
//     the main module's version (a release tag such as v1.4.0, or a
//     pseudo-version naming the commit) and the vcs.revision, vcs.time and
//     vcs.modified settings that go build stamps in a Git clone;
//  3. the fallbacks: version DevelVersion, revision Unknown, time and
//     modified unknown.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"time"
)

// Package is this package's import path, the prefix of the linker's -X
// names.
const Package = "github.com/pharos-metallo/metallo/platform/buildinfo"

// Fallbacks of a build that says nothing.
const (
	// DevelVersion is the version of a build with neither a linked version
	// nor a module version (Go's own word for it).
	DevelVersion = "(devel)"
	// Unknown is the revision of a build with neither a linked revision nor
	// VCS data.
	Unknown = "unknown"
)

// Set by the linker only (-ldflags -X, see the package comment): Go can
// stamp a string only into a package-level variable. Nothing assigns them.
var (
	version  string
	revision string
	vcsTime  string
	modified string
)

// Info is one binary's build.
type Info struct {
	// Version is the binary's version: a release tag (v1.4.0), a
	// pseudo-version or `git describe` output naming the commit, or
	// DevelVersion.
	Version string `json:"version"`
	// Revision is the full VCS revision (a Git commit hash), or Unknown.
	Revision string `json:"revision"`
	// Time is the revision's commit time; zero when unknown.
	Time time.Time `json:"time,omitzero"`
	// Modified says whether the tree had uncommitted changes (untracked
	// files included, as go build counts them); nil when unknown.
	Modified *bool `json:"modified,omitempty"`
	// GoVersion is the Go toolchain that built the binary, e.g. go1.26.8.
	GoVersion string `json:"go_version"`
	// Platform is GOOS/GOARCH, e.g. linux/amd64.
	Platform string `json:"platform"`
}

// Linked is what the linker set (-ldflags -X); empty fields were not set.
type Linked struct {
	Version, Revision, Time, Modified string
}

// Read returns this binary's build.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return From(bi, Linked{Version: version, Revision: revision, Time: vcsTime, Modified: modified})
}

// From combines linked and the toolchain's bi (nil when the binary has
// none) by the package's order of sources. A linked time that is not RFC
// 3339, or a linked modified that is neither "true" nor "false", counts as
// not set.
func From(bi *debug.BuildInfo, linked Linked) Info {
	settings := map[string]string{}
	var moduleVersion string
	info := Info{GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		moduleVersion = bi.Main.Version
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		if os, arch := settings["GOOS"], settings["GOARCH"]; os != "" && arch != "" {
			info.Platform = os + "/" + arch
		}
	}
	info.Version = first(linked.Version, realVersion(moduleVersion), DevelVersion)
	info.Revision = first(linked.Revision, settings["vcs.revision"], Unknown)
	for _, t := range []string{linked.Time, settings["vcs.time"]} {
		if parsed, err := time.Parse(time.RFC3339, t); err == nil {
			info.Time = parsed.UTC()
			break
		}
	}
	for _, m := range []string{linked.Modified, settings["vcs.modified"]} {
		if m == "true" || m == "false" {
			b := m == "true"
			info.Modified = &b
			break
		}
	}
	return info
}

// realVersion is v unless it says nothing: "" (a test binary) or
// DevelVersion (a build outside a module version and VCS).
func realVersion(v string) string {
	if v == DevelVersion {
		return ""
	}
	return v
}

func first(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

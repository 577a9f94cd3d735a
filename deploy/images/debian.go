package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// debianPackages are installed on top of debootstrap's minbase variant (which brings dash,
// coreutils, apt and dpkg): what batch Jobs and the workspace helper run besides metallo.
func debianPackages() []string { return []string{"ca-certificates", "git", "git-lfs"} }

// sklearnPackages are the model server's (sklearnserver): Python 3 with Debian's scikit-learn
// and joblib (and what they depend on: NumPy, SciPy).
func sklearnPackages() []string {
	return []string{"ca-certificates", "python3-sklearn", "python3-joblib"}
}

// debianRootfs is a Debian root file system layer: debianPackages' is shared by the platform
// image (whole) and the Runtime image (its CA bundle), sklearnPackages' is the sklearnserver
// image's base.
type debianRootfs struct {
	suite, mirror, key string
	packages           []string
	dir                string
}

// debian is the root file system with debianPackages.
func (b *Builder) debian() debianRootfs { return b.debianWith(debianPackages()) }

// debianWith is a root file system of debootstrap's minbase with packages.
func (b *Builder) debianWith(packages []string) debianRootfs {
	suite := osRelease("VERSION_CODENAME")
	if suite == "" {
		suite = "bookworm"
	}
	mirror := b.Mirror
	if mirror == "" {
		mirror = aptMirror()
	}
	k := key(recipeVersion, "debian", suite, mirror, strings.Join(packages, ","), fmt.Sprint(userID, userName, userHome))
	return debianRootfs{suite: suite, mirror: mirror, key: k, packages: packages, dir: filepath.Join(b.Cache, "debian-"+k)}
}

func (d debianRootfs) layerFile() string { return filepath.Join(d.dir, "rootfs.tar.gz") }
func (d debianRootfs) caFile() string    { return filepath.Join(d.dir, "ca-certificates.crt") }

// layer returns the root file system as a layer, made with debootstrap when the cache does
// not have it.
func (d debianRootfs) layer(ctx context.Context, b *Builder) (v1.Layer, error) {
	if err := d.ensure(ctx, b); err != nil {
		return nil, err
	}
	return tarball.LayerFromFile(d.layerFile(), tarball.WithMediaType(types.OCILayer))
}

// caBundle returns the path of the root file system's CA bundle (Debian's ca-certificates).
func (d debianRootfs) caBundle(ctx context.Context, b *Builder) (string, error) {
	if err := d.ensure(ctx, b); err != nil {
		return "", err
	}
	return d.caFile(), nil
}

func (d debianRootfs) ensure(ctx context.Context, b *Builder) error {
	if _, err := os.Stat(d.layerFile()); err == nil {
		if _, err := os.Stat(d.caFile()); err == nil {
			return nil
		}
	}
	if os.Geteuid() != 0 {
		return errNotRoot
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return fmt.Errorf("debootstrap is not installed (apt-get install debootstrap; make image installs it): %w", err)
	}
	began := time.Now()
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return err
	}
	target, err := os.MkdirTemp(d.dir, ".rootfs-")
	if err != nil {
		return err
	}
	defer func() {
		unmountBelow(target)
		_ = os.RemoveAll(target)
	}()
	log := filepath.Join(d.dir, "debootstrap.log")
	b.Log("debootstrap %s (minbase, with %s) from %s: a few minutes; log %s", d.suite, strings.Join(d.packages, ", "), d.mirror, log)
	out, err := os.Create(log)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "debootstrap", "--variant=minbase", "--include="+strings.Join(d.packages, ","), d.suite, target, d.mirror)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
	err = cmd.Run()
	out.Close()
	if err != nil {
		return fmt.Errorf("debootstrap: %w; last lines of %s:\n%s", err, log, tailFile(log, 15))
	}
	unmountBelow(target)
	if err := finishRootfs(target); err != nil {
		return err
	}
	ca, err := os.ReadFile(filepath.Join(target, "etc/ssl/certs/ca-certificates.crt"))
	if err != nil || len(ca) == 0 {
		return fmt.Errorf("the root file system has no CA bundle (ca-certificates): %v", err)
	}
	tmp := d.layerFile() + ".tmp"
	if err := dirTar(target, tmp, []string{"proc", "sys", "dev", "run", "tmp", "var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale"}); err != nil {
		return fmt.Errorf("tar the root file system: %w", err)
	}
	if err := os.WriteFile(d.caFile(), ca, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, d.layerFile()); err != nil {
		return err
	}
	b.Log("Debian root file system built in %s", time.Since(began).Round(time.Second))
	return nil
}

// finishRootfs adds the images' non-root user and its home, and empties apt's caches.
func finishRootfs(root string) error {
	appendLine := func(file, line string) error {
		f, err := os.OpenFile(filepath.Join(root, file), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteString(line + "\n")
		return err
	}
	if err := appendLine("etc/passwd", fmt.Sprintf("%s:x:%d:%d:Metallo:%s:/bin/sh", userName, userID, userID, userHome)); err != nil {
		return err
	}
	if err := appendLine("etc/group", fmt.Sprintf("%s:x:%d:", userName, userID)); err != nil {
		return err
	}
	home := filepath.Join(root, userHome)
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	if err := os.Chown(home, userID, userID); err != nil {
		return err
	}
	for _, dir := range []string{"var/cache/apt/archives", "var/lib/apt/lists"} {
		entries, _ := os.ReadDir(filepath.Join(root, dir))
		for _, e := range entries {
			if !e.IsDir() {
				_ = os.Remove(filepath.Join(root, dir, e.Name()))
			}
		}
	}
	return nil
}

// unmountBelow detaches every mount under dir (debootstrap mounts /proc and /sys in its target
// and leaves them when it fails), deepest first.
func unmountBelow(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			mounts = append(mounts, fields[4])
		}
	}
	slices.SortFunc(mounts, func(a, b string) int { return len(b) - len(a) })
	for _, m := range mounts {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
}

// aptMirror is the first Debian archive URI of /etc/apt's sources (deb822 or one-line),
// else deb.debian.org.
func aptMirror() string {
	files, _ := filepath.Glob("/etc/apt/sources.list.d/*.sources")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "URIs:"); ok {
				for _, u := range strings.Fields(v) {
					if strings.HasSuffix(strings.TrimRight(u, "/"), "/debian") {
						return strings.TrimRight(u, "/")
					}
				}
			}
		}
	}
	if b, err := os.ReadFile("/etc/apt/sources.list"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) >= 3 && f[0] == "deb" && strings.HasSuffix(strings.TrimRight(f[1], "/"), "/debian") {
				return strings.TrimRight(f[1], "/")
			}
		}
	}
	return "http://deb.debian.org/debian"
}

func osRelease(field string) string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+"="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

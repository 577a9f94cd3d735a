// Command images builds the container images of the local cluster's real node without a
// registry or a Docker engine (deploy/images/README.md): OCI images written with
// go-containerregistry from binaries built by the go tool and a Debian root file system made
// by debootstrap, each kept as an OCI layout archive under ~/.cache/metallo/images keyed by
// its inputs, and a manifest (JSON) naming each image's archive and its reference by digest.
// `make image` and `make cluster-up` run it; the local cluster imports the archives into the
// real node's containerd.
//
// Usage: go run ./deploy/images [--cache DIR] [--manifest FILE] [--only NAME,...]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	var (
		cache    = flag.String("cache", defaultCache(), "cache directory of built images (METALLO_IMAGES_CACHE)")
		manifest = flag.String("manifest", "", "write the manifest (JSON) here as well as printing a summary")
		only     = flag.String("only", "", "build only these images (comma-separated; default all: "+strings.Join(Names(), ",")+")")
		mirror   = flag.String("debian-mirror", os.Getenv("METALLO_DEBIAN_MIRROR"), "Debian mirror for debootstrap (default: the first of /etc/apt's sources, else http://deb.debian.org/debian)")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *cache, *manifest, *only, *mirror); err != nil {
		fmt.Fprintf(os.Stderr, "images: %v\n", err)
		stop()
		os.Exit(1)
	}
}

func defaultCache() string {
	if d := os.Getenv("METALLO_IMAGES_CACHE"); d != "" {
		return d
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "metallo", "images")
}

func run(ctx context.Context, cache, manifestPath, only, mirror string) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	want := Names()
	if only != "" {
		want = nil
		for _, n := range strings.Split(only, ",") {
			if n = strings.TrimSpace(n); n != "" {
				if !slices.Contains(Names(), n) {
					return fmt.Errorf("--only %s: no such image (known: %s)", n, strings.Join(Names(), ", "))
				}
				want = append(want, n)
			}
		}
	}
	b := &Builder{Cache: cache, Root: root, Mirror: mirror, Log: func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "images: "+format+"\n", args...)
	}}
	began := time.Now()
	m, err := b.Build(ctx, want)
	if err != nil {
		return err
	}
	for _, n := range want {
		im := m.Images[n]
		fmt.Printf("%-12s %s  (%s)\n", n, im.Ref, im.Built)
	}
	fmt.Fprintf(os.Stderr, "images: %d images ready in %s (cache %s)\n", len(want), time.Since(began).Round(100*time.Millisecond), cache)
	if manifestPath != "" {
		return writeManifest(manifestPath, m)
	}
	return nil
}

func writeManifest(path string, m Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// repoRoot walks up from the working directory to the main module's go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/pharos-metallo/metallo\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run inside the metallo repository: no github.com/pharos-metallo/metallo go.mod above the working directory")
		}
		dir = parent
	}
}

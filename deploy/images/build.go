package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/gofrs/flock"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Repository is the name under which every image is imported into the node's containerd
// (never pulled: the node has every image it runs, and no registry is reachable).
const Repository = "localcluster.metallo.dev"

// recipeVersion is part of every key: bump it when a recipe changes in a way its inputs do not
// show (a layer's layout, a config field).
const recipeVersion = "1"

// Image names.
const (
	ImagePause       = "pause"
	ImagePlatform    = "platform"
	ImageRuntime     = "runtime"
	ImageHTTPService = "httpservice"
	// ImageSKLearnServer is the local cluster's scikit-learn model server (a test fixture:
	// sklearnserver/sklearnserver.py).
	ImageSKLearnServer = "sklearnserver"
)

// Names lists the images in build order.
func Names() []string {
	return []string{ImagePause, ImagePlatform, ImageRuntime, ImageHTTPService, ImageSKLearnServer}
}

// The non-root user of the platform, Runtime and HTTP service images (the Runtime's Deployment
// runs as this uid; deploy/runtime/deployment.yaml).
const (
	userID   = 65532
	userName = "metallo"
	userHome = "/home/metallo"
)

// Where the sklearnserver image holds its server and the iris training script.
const (
	sklearnServerPath = "/usr/local/bin/sklearnserver"
	trainIrisPath     = "/usr/local/bin/train-iris"
)

const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Manifest is what a build produced: each image's OCI layout archive and references.
type Manifest struct {
	Images map[string]Image `json:"images"`
}

// Image is one built image.
type Image struct {
	// Name is the image's name with its key as the tag (repository:key), the name the
	// archive's index gives it (annotation io.containerd.image.name).
	Name string `json:"name"`
	// Ref is the image by digest (repository@sha256:<manifest digest>): what Pods and the
	// Runtime's flags use.
	Ref string `json:"ref"`
	// Digest is the manifest's digest (sha256:<64 hex>).
	Digest string `json:"digest"`
	// Archive is the OCI image layout as a tar file (ctr images import takes it).
	Archive string `json:"archive"`
	// Key is the hash of the image's inputs.
	Key string `json:"key"`
	// Bytes is the archive's size.
	Bytes int64 `json:"bytes"`
	// Built says "cached" or how long the build took.
	Built string `json:"built"`
}

// Builder builds the images into Cache.
type Builder struct {
	// Cache holds <name>-<key>/ per image and the Debian root file system layers.
	Cache string
	// Root is the repository (the main module's directory).
	Root string
	// Mirror is the Debian mirror debootstrap fetches from ("" : from /etc/apt, else
	// deb.debian.org).
	Mirror string
	// Go is the go command ("go" when empty).
	Go  string
	Log func(format string, args ...any)
}

func (b *Builder) goCmd() string {
	if b.Go != "" {
		return b.Go
	}
	return "go"
}

// Build builds (or finds in the cache) the named images, one builder at a time per cache (a
// file lock: other worktrees share the cache).
func (b *Builder) Build(ctx context.Context, names []string) (Manifest, error) {
	if err := os.MkdirAll(b.Cache, 0o755); err != nil {
		return Manifest{}, err
	}
	lock := flock.New(filepath.Join(b.Cache, ".lock"))
	if ok, err := lock.TryLock(); err != nil {
		return Manifest{}, fmt.Errorf("lock %s: %w", b.Cache, err)
	} else if !ok {
		b.Log("another build holds %s: waiting for it", lock.Path())
		if err := lock.Lock(); err != nil {
			return Manifest{}, fmt.Errorf("lock %s: %w", b.Cache, err)
		}
	}
	defer func() { _ = lock.Unlock() }()
	m := Manifest{Images: map[string]Image{}}
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return m, err
		}
		im, err := b.image(ctx, n)
		if err != nil {
			return m, fmt.Errorf("image %s: %w", n, err)
		}
		m.Images[n] = im
	}
	return m, nil
}

// recipe is one image: the hash of its inputs and how to make its layers and config.
type recipe struct {
	key    string
	layers func(ctx context.Context, work string) ([]v1.Layer, error)
	config v1.Config
}

func (b *Builder) recipe(ctx context.Context, name string) (recipe, error) {
	goVersion := runtime.Version()
	if out, err := exec.CommandContext(ctx, b.goCmd(), "env", "GOVERSION").Output(); err == nil {
		goVersion = strings.TrimSpace(string(out))
	}
	staticBinary := func(pkg, path string) func(ctx context.Context, work string) (v1.Layer, error) {
		return func(ctx context.Context, work string) (v1.Layer, error) {
			bin := filepath.Join(work, filepath.Base(path))
			if err := b.goBuild(ctx, pkg, bin); err != nil {
				return nil, err
			}
			return fileLayer(filepath.Join(work, filepath.Base(path)+".layer.tar"), []entry{{path: path, source: bin, mode: 0o755}})
		}
	}
	switch name {
	case ImagePause:
		src, err := hashTree(b.Root, []string{"deploy/images/pause"}, false)
		if err != nil {
			return recipe{}, err
		}
		pause := staticBinary("./deploy/images/pause", "/pause")
		return recipe{
			key: key(recipeVersion, name, goVersion, src),
			layers: func(ctx context.Context, work string) ([]v1.Layer, error) {
				l, err := pause(ctx, work)
				return []v1.Layer{l}, err
			},
			config: v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535", Env: []string{defaultPath}},
		}, nil
	case ImageHTTPService:
		src, err := hashTree(b.Root, []string{"deploy/images/httpservice"}, false)
		if err != nil {
			return recipe{}, err
		}
		svc := staticBinary("./deploy/images/httpservice", "/httpservice")
		return recipe{
			key: key(recipeVersion, name, goVersion, src),
			layers: func(ctx context.Context, work string) ([]v1.Layer, error) {
				l, err := svc(ctx, work)
				return []v1.Layer{l}, err
			},
			config: v1.Config{
				Entrypoint: []string{"/httpservice"}, User: fmt.Sprintf("%d:%d", userID, userID), Env: []string{defaultPath, "PORT=8080"},
				ExposedPorts: map[string]struct{}{"8080/tcp": {}},
			},
		}, nil
	case ImageSKLearnServer:
		src, err := hashTree(b.Root, []string{"deploy/images/sklearnserver"}, false)
		if err != nil {
			return recipe{}, err
		}
		deb := b.debianWith(sklearnPackages())
		return recipe{
			key: key(recipeVersion, name, src, deb.key),
			layers: func(ctx context.Context, work string) ([]v1.Layer, error) {
				base, err := deb.layer(ctx, b)
				if err != nil {
					return nil, err
				}
				server, err := os.ReadFile(filepath.Join(b.Root, "deploy/images/sklearnserver/sklearnserver.py"))
				if err != nil {
					return nil, err
				}
				train, err := os.ReadFile(filepath.Join(b.Root, "deploy/images/sklearnserver/train_iris.py"))
				if err != nil {
					return nil, err
				}
				files, err := fileLayer(filepath.Join(work, "sklearnserver.layer.tar"), []entry{
					{path: sklearnServerPath, data: server, mode: 0o755},
					{path: trainIrisPath, data: train, mode: 0o755},
				})
				return []v1.Layer{base, files}, err
			},
			config: v1.Config{
				Entrypoint: []string{sklearnServerPath}, User: fmt.Sprintf("%d:%d", userID, userID),
				Env:          []string{defaultPath, "HOME=" + userHome, "PORT=8080", "PYTHONDONTWRITEBYTECODE=1"},
				ExposedPorts: map[string]struct{}{"8080/tcp": {}}, WorkingDir: "/",
			},
		}, nil
	case ImagePlatform, ImageRuntime:
		src, err := hashTree(b.Root, []string{"go.mod", "go.sum", "app", "contexts", "platform", "sql"}, false)
		if err != nil {
			return recipe{}, err
		}
		deb := b.debian()
		metallo := staticBinary("./app/cmd/metallo", "/usr/local/bin/metallo")
		if name == ImagePlatform {
			return recipe{
				key: key(recipeVersion, name, goVersion, src, deb.key),
				layers: func(ctx context.Context, work string) ([]v1.Layer, error) {
					base, err := deb.layer(ctx, b)
					if err != nil {
						return nil, err
					}
					bin, err := metallo(ctx, work)
					return []v1.Layer{base, bin}, err
				},
				// No entrypoint: a batch Job's argv is the container's args, so argv[0] is the
				// program (docs/site-runtime.md#batch-on-kubernetes: the platform image runs what the Run asks).
				config: v1.Config{
					Cmd: []string{"metallo", "--help"}, User: fmt.Sprintf("%d:%d", userID, userID),
					Env: []string{defaultPath, "HOME=" + userHome}, WorkingDir: "/",
				},
			}, nil
		}
		return recipe{
			key: key(recipeVersion, name, goVersion, src, deb.key),
			layers: func(ctx context.Context, work string) ([]v1.Layer, error) {
				ca, err := deb.caBundle(ctx, b)
				if err != nil {
					return nil, err
				}
				base, err := fileLayer(filepath.Join(work, "base.layer.tar"), []entry{
					{path: "/etc/passwd", data: []byte(passwd), mode: 0o644},
					{path: "/etc/group", data: []byte(group), mode: 0o644},
					{path: "/etc/ssl/certs/ca-certificates.crt", source: ca, mode: 0o644},
					{path: "/tmp", dir: true, mode: 0o1777},
					{path: userHome, dir: true, mode: 0o755, uid: userID, gid: userID},
				})
				if err != nil {
					return nil, err
				}
				bin, err := metallo(ctx, work)
				return []v1.Layer{base, bin}, err
			},
			config: v1.Config{
				Entrypoint: []string{"/usr/local/bin/metallo"}, User: fmt.Sprintf("%d:%d", userID, userID),
				Env: []string{defaultPath, "HOME=" + userHome, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
			},
		}, nil
	}
	return recipe{}, fmt.Errorf("no recipe for %q", name)
}

// passwd and group of the images without a Debian root file system.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"metallo:x:65532:65532:Metallo:/home/metallo:/sbin/nologin\n"
	group = "root:x:0:\nnogroup:x:65534:\nmetallo:x:65532:\n"
)

// image returns the named image from the cache, building it when its key is not there.
func (b *Builder) image(ctx context.Context, name string) (Image, error) {
	r, err := b.recipe(ctx, name)
	if err != nil {
		return Image{}, err
	}
	dir := filepath.Join(b.Cache, name+"-"+r.key)
	var im Image
	if raw, err := os.ReadFile(filepath.Join(dir, "image.json")); err == nil && json.Unmarshal(raw, &im) == nil {
		if fi, err := os.Stat(im.Archive); err == nil && fi.Size() == im.Bytes {
			im.Built = "cached"
			return im, nil
		}
	}
	began := time.Now()
	b.Log("building %s (key %s)", name, r.key)
	work, err := os.MkdirTemp(b.Cache, "."+name+"-work-")
	if err != nil {
		return Image{}, err
	}
	defer os.RemoveAll(work)
	layers, err := r.layers(ctx, work)
	if err != nil {
		return Image{}, err
	}
	img, err := assemble(layers, r.config, map[string]string{
		"org.opencontainers.image.title": "metallo " + name, "dev.metallo.localcluster.key": r.key,
	})
	if err != nil {
		return Image{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Image{}, err
	}
	archive := filepath.Join(dir, "image.oci.tar")
	im = Image{Name: Repository + "/" + name + ":" + r.key, Archive: archive, Key: r.key}
	digest, size, err := writeArchive(img, im.Name, r.key, archive, filepath.Join(work, "layout"))
	if err != nil {
		return Image{}, err
	}
	im.Digest, im.Bytes = digest, size
	im.Ref = Repository + "/" + name + "@" + digest
	raw, err := json.MarshalIndent(im, "", "  ")
	if err != nil {
		return Image{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, "image.json"), raw, 0o644); err != nil {
		return Image{}, err
	}
	im.Built = "built in " + time.Since(began).Round(100*time.Millisecond).String()
	b.Log("%s: %s (%d MiB) %s", name, im.Ref, size>>20, im.Built)
	return im, nil
}

// goBuild builds pkg of the repository as a static binary (no cgo, trimmed paths, no VCS
// stamp), so the same sources give the same bytes.
func (b *Builder) goBuild(ctx context.Context, pkg, out string) error {
	cmd := exec.CommandContext(ctx, b.goCmd(), "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = b.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if outb, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, outb)
	}
	return nil
}

func key(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		_, _ = io.WriteString(h, p)
		_, _ = h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// hashTree hashes the files under paths (relative to root): their names and contents, in
// lexical order. withTests false leaves out _test.go files (they are not in a binary).
func hashTree(root string, paths []string, withTests bool) (string, error) {
	h := sha256.New()
	for _, p := range paths {
		err := filepath.WalkDir(filepath.Join(root, p), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || (!withTests && strings.HasSuffix(path, "_test.go")) || strings.Contains(path, string(filepath.Separator)+"testdata"+string(filepath.Separator)) {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			_, _ = io.WriteString(h, rel)
			_, _ = h.Write([]byte{0})
			_, err = io.Copy(h, f)
			return err
		})
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

var errNotRoot = errors.New("building the Debian root file system needs root (debootstrap mounts /proc in its target and runs packages' scripts there)")

package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// entries reads a tar (gzip-compressed when gz) into name → header, in order.
func entries(t *testing.T, path string, gz bool) ([]string, map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if gz {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	tr := tar.NewReader(r)
	var names []string
	hs, data := map[string]*tar.Header{}, map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names, hs, data
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		names, hs[h.Name], data[h.Name] = append(names, h.Name), h, b
	}
}

// A layer of files is the same bytes (and digest) from the same inputs, whatever order they
// are given in; parents are made, owners and modes kept.
func TestAFileLayerIsDeterministicWithItsParentsOwnersAndModes(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "bin")
	if err := os.WriteFile(src, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	files := []entry{
		{path: "/usr/local/bin/tool", source: src, mode: 0o755},
		{path: "/etc/passwd", data: []byte("root:x:0:0::/:/bin/sh\n"), mode: 0o644},
		{path: "/home/metallo", dir: true, mode: 0o750, uid: 65532, gid: 65532},
	}
	a, err := fileLayer(filepath.Join(dir, "a.tar"), files)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fileLayer(filepath.Join(dir, "b.tar"), []entry{files[2], files[0], files[1]})
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Fatalf("the same files gave two digests: %s, %s", da, db)
	}
	names, hs, data := entries(t, filepath.Join(dir, "a.tar"), false)
	want := []string{"etc/", "etc/passwd", "home/", "home/metallo/", "usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/tool"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("entries %v, want %v", names, want)
	}
	if h := hs["usr/local/bin/tool"]; h.Mode != 0o755 || string(data[h.Name]) != "#!/bin/sh\n" || !h.ModTime.Equal(epoch) {
		t.Fatalf("tool: mode %o, %q, %s", h.Mode, data[h.Name], h.ModTime)
	}
	if h := hs["home/metallo/"]; h.Uid != 65532 || h.Gid != 65532 || h.Mode != 0o750 {
		t.Fatalf("home: %d:%d %o", h.Uid, h.Gid, h.Mode)
	}
}

// A root file system's tree is kept as it is on disk: symbolic links as links, hard links as
// links to the first name, modes; below the skipped directories nothing (the runtime mounts
// them), device nodes never.
func TestADirectoryTarKeepsLinksAndModesAndSkipsWhatTheRuntimeMounts(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	for _, d := range []string{"bin", "proc/1", "etc", "var/cache/apt/archives"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(root, p), []byte(s), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("bin/dash", "ELF", 0o755)
	write("proc/1/status", "x", 0o444)
	write("var/cache/apt/archives/git.deb", "deb", 0o644)
	write("etc/hostname", "h\n", 0o644)
	if err := os.Symlink("dash", filepath.Join(root, "bin/sh")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(root, "bin/dash"), filepath.Join(root, "bin/zdash")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "rootfs.tar.gz")
	if err := dirTar(root, out, []string{"proc", "var/cache/apt/archives"}); err != nil {
		t.Fatal(err)
	}
	names, hs, _ := entries(t, out, true)
	got := strings.Join(names, " ")
	if want := "bin/ bin/dash bin/sh bin/zdash etc/ etc/hostname proc/ var/ var/cache/ var/cache/apt/ var/cache/apt/archives/"; got != want {
		t.Fatalf("entries %q\nwant    %q", got, want)
	}
	if h := hs["bin/sh"]; h.Typeflag != tar.TypeSymlink || h.Linkname != "dash" {
		t.Fatalf("bin/sh: %+v", h)
	}
	if h := hs["bin/zdash"]; h.Typeflag != tar.TypeLink || h.Linkname != "bin/dash" {
		t.Fatalf("bin/zdash: %+v", h)
	}
	if h := hs["bin/dash"]; h.Mode&0o777 != 0o755 {
		t.Fatalf("bin/dash mode %o", h.Mode)
	}
}

// The archive is an OCI image layout whose index names the image for containerd's import
// (io.containerd.image.name) and points at the manifest whose digest the build reports; every
// blob is there under its digest; the config says linux, the user and the command.
func TestTheArchiveIsAnOCILayoutNamingTheImageForContainerdByItsManifestDigest(t *testing.T) {
	dir := t.TempDir()
	layer, err := fileLayer(filepath.Join(dir, "l.tar"), []entry{{path: "/pause", data: []byte("ELF"), mode: 0o755}})
	if err != nil {
		t.Fatal(err)
	}
	img, err := assemble([]v1.Layer{layer}, v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"}, map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "image.oci.tar")
	digest, size, err := writeArchive(img, Repository+"/pause:key", "key", archive, filepath.Join(dir, "layout"))
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(archive); fi == nil || fi.Size() != size {
		t.Fatalf("size %d", size)
	}
	_, _, data := entries(t, archive, false)
	var index struct {
		Manifests []struct {
			Digest      string            `json:"digest"`
			MediaType   string            `json:"mediaType"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(data["index.json"], &index); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if len(index.Manifests) != 1 || index.Manifests[0].Digest != digest || index.Manifests[0].MediaType != "application/vnd.oci.image.manifest.v1+json" ||
		index.Manifests[0].Annotations["io.containerd.image.name"] != Repository+"/pause:key" {
		t.Fatalf("index %+v; want the manifest %s named for containerd", index, digest)
	}
	if _, ok := data["oci-layout"]; !ok {
		t.Fatal("no oci-layout file")
	}
	for name, b := range data {
		if hexDigest, ok := strings.CutPrefix(name, "blobs/sha256/"); ok && hexDigest != "" {
			if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != hexDigest {
				t.Fatalf("blob %s does not hash to its name", name)
			}
		}
	}
	var manifest v1.Manifest
	if err := json.Unmarshal(data["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")], &manifest); err != nil {
		t.Fatal(err)
	}
	var cfg v1.ConfigFile
	if err := json.Unmarshal(data["blobs/sha256/"+manifest.Config.Digest.Hex], &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Config.User != "65535:65535" || cfg.Config.Entrypoint[0] != "/pause" || cfg.Config.Labels["k"] != "v" ||
		len(manifest.Layers) != 1 || manifest.Layers[0].MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
		t.Fatalf("config %+v manifest %+v", cfg.Config, manifest)
	}
}

// Keys change with every input and only with them.
func TestAnImagesKeyChangesWithItsInputs(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "src", "main.go"), []byte("package main"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "src", "main_test.go"), []byte("package main"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := hashTree(root, []string{"src"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "src", "main_test.go"), []byte("package main // changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := hashTree(root, []string{"src"}, false); b != a {
		t.Fatal("a test file changed the binary's key")
	}
	if err := os.WriteFile(filepath.Join(root, "src", "main.go"), []byte("package main // changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := hashTree(root, []string{"src"}, false); b == a {
		t.Fatal("a source change kept the key")
	}
	if key("1", "x") == key("1", "y") || key("1x") == key("1", "x") {
		t.Fatal("keys collide")
	}
}

package main

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// epoch is the modification time of every file of a layer made from entries (so the same
// inputs give the same layer digest).
var epoch = time.Unix(0, 0).UTC()

// entry is one file or directory of a layer made by fileLayer: data or the contents of
// source, at path (absolute in the image).
type entry struct {
	path     string
	data     []byte
	source   string
	dir      bool
	mode     int64
	uid, gid int
}

// fileLayer writes the entries (and their parent directories, 0755 root) to a tar file at out
// and returns it as a gzip-compressed OCI layer.
func fileLayer(out string, entries []entry) (v1.Layer, error) {
	f, err := os.Create(out)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(f)
	written := map[string]bool{}
	var parents func(p string) error
	parents = func(p string) error {
		d := filepath.Dir(p)
		if d == "/" || d == "." || written[d] {
			return nil
		}
		if err := parents(d); err != nil {
			return err
		}
		written[d] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX})
	}
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b entry) int { return strings.Compare(a.path, b.path) })
	for _, e := range sorted {
		if err := parents(e.path); err != nil {
			f.Close()
			return nil, err
		}
		name := strings.TrimPrefix(e.path, "/")
		h := &tar.Header{Name: name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: epoch, Format: tar.FormatPAX}
		if e.dir {
			written[e.path] = true
			h.Typeflag, h.Name = tar.TypeDir, name+"/"
			if err := tw.WriteHeader(h); err != nil {
				f.Close()
				return nil, err
			}
			continue
		}
		data := e.data
		if e.source != "" {
			if data, err = os.ReadFile(e.source); err != nil {
				f.Close()
				return nil, err
			}
		}
		h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			f.Close()
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return tarball.LayerFromFile(out, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestSpeed), tarball.WithCompressedCaching)
}

// dirTar writes the tree under dir as a gzip-compressed tar to out: entries in lexical order,
// owners, modes and modification times as on disk, hard links as links, symbolic links as
// they are. Device nodes, sockets and FIFOs are left out, and so is what lies below the
// directories in skipBelow (relative paths such as "proc": the runtime mounts them).
func dirTar(dir, out string, skipBelow []string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	zw, err := gzip.NewWriterLevel(f, gzip.BestSpeed)
	if err != nil {
		f.Close()
		return err
	}
	tw := tar.NewWriter(zw)
	links := map[uint64]string{}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "." {
			return err
		}
		if slices.Contains(skipBelow, filepath.Dir(rel)) || slices.ContainsFunc(skipBelow, func(s string) bool { return strings.HasPrefix(rel, s+"/") }) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		mode := fi.Mode()
		if mode&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeSocket|fs.ModeNamedPipe) != 0 {
			return nil
		}
		link := ""
		if mode&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(path); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		h.Name, h.Uname, h.Gname, h.Format = rel, "", "", tar.FormatPAX
		h.AccessTime, h.ChangeTime = time.Time{}, time.Time{}
		if fi.IsDir() {
			h.Name += "/"
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && mode.IsRegular() && st.Nlink > 1 {
			if first, seen := links[st.Ino]; seen {
				h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
			} else {
				links[st.Ino] = rel
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	for _, c := range []io.Closer{tw, zw, f} {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// assemble makes a linux/<arch> OCI image of the layers with config.
func assemble(layers []v1.Layer, config v1.Config, labels map[string]string) (v1.Image, error) {
	config.Labels = labels
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layers...)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Config = runtime.GOARCH, "linux", config
	cf.Created = v1.Time{Time: epoch}
	return mutate.ConfigFile(img, cf)
}

// writeArchive writes img as an OCI image layout (in work) whose index names it name (the
// annotations containerd's import and OCI tools read) and tars the layout to archive. It
// returns the manifest's digest and the archive's size.
func writeArchive(img v1.Image, name, tag, archive, work string) (string, int64, error) {
	p, err := layout.Write(work, empty.Index)
	if err != nil {
		return "", 0, err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          name,
		"org.opencontainers.image.ref.name": tag,
	})); err != nil {
		return "", 0, err
	}
	d, err := img.Digest()
	if err != nil {
		return "", 0, err
	}
	tmp := archive + ".tmp"
	if err := plainTar(work, tmp); err != nil {
		return "", 0, err
	}
	if err := os.Rename(tmp, archive); err != nil {
		return "", 0, err
	}
	fi, err := os.Stat(archive)
	if err != nil {
		return "", 0, err
	}
	return d.String(), fi.Size(), nil
}

// plainTar writes the regular files and directories under dir to an uncompressed tar.
func plainTar(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		h := &tar.Header{Name: rel, Mode: 0o644, ModTime: epoch, Format: tar.FormatPAX}
		if d.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, rel+"/", 0o755
			return tw.WriteHeader(h)
		}
		h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	for _, c := range []io.Closer{tw, f} {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

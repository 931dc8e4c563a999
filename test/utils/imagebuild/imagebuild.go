package imagebuild

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/nodelet/nodelet/internal/atomicfile"
)

// Layer collects the entries of one image layer, in the order they are
// added. Paths are relative to the image's root.
type Layer struct {
	entries []entry
}

type entry struct {
	hdr  tar.Header
	data []byte
}

// Dir adds the directory path with mode.
func (l *Layer) Dir(path string, mode int64) {
	l.entries = append(l.entries, entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: path + "/", Mode: mode}})
}

// File adds the regular file path with mode and content data.
func (l *Layer) File(path string, mode int64, data []byte) {
	l.entries = append(l.entries, entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: path, Mode: mode, Size: int64(len(data))}, data: data})
}

// Symlink adds the symbolic link path pointing at target.
func (l *Layer) Symlink(path, target string) {
	l.entries = append(l.entries, entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: path, Linkname: target, Mode: 0o777}})
}

// Tar returns the layer as a tar stream, every entry owned by root and
// stamped with epoch.
func (l *Layer) Tar(epoch time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range l.entries {
		hdr := e.hdr
		hdr.ModTime = epoch
		if err := tw.WriteHeader(&hdr); err != nil {
			return nil, fmt.Errorf("writing layer entry %s: %w", hdr.Name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("writing layer entry %s: %w", hdr.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing layer: %w", err)
	}
	return buf.Bytes(), nil
}

// Append returns base with l, stamped with epoch, as its top layer.
func Append(base v1.Image, l *Layer, epoch time.Time) (v1.Image, error) {
	data, err := l.Tar(epoch)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("making layer: %w", err)
	}
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, fmt.Errorf("appending layer: %w", err)
	}
	return img, nil
}

// Single returns the linux/arch image whose only layer is l and whose
// config is cfg, created at epoch.
func Single(l *Layer, arch string, epoch time.Time, cfg v1.Config) (v1.Image, error) {
	img, err := Append(empty.Image, l, epoch)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: epoch}
	cf.Config = cfg
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("setting image config: %w", err)
	}
	return img, nil
}

// EditConfig returns img with edit applied to a copy of its config.
func EditConfig(img v1.Image, edit func(*v1.Config)) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading image config: %w", err)
	}
	cfg := *cf.Config.DeepCopy()
	edit(&cfg)
	out, err := mutate.Config(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("setting image config: %w", err)
	}
	return out, nil
}

// archiveMode is the mode of the archives WriteArchive writes.
const archiveMode = 0o644

// WriteArchive writes img, tagged tag, as a docker-archive tarball to
// path, atomically: path holds the old archive, if any, until the new one
// is complete.
func WriteArchive(path string, tag name.Tag, img v1.Image) error {
	return atomicfile.WriteFunc(path, archiveMode, func(w io.Writer) error {
		return tarball.Write(tag, img, w)
	})
}

// ReadArchive returns the image tagged tag in the docker-archive at path.
func ReadArchive(path string, tag name.Tag) (v1.Image, error) {
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		return nil, fmt.Errorf("reading %s from %s: %w", tag, path, err)
	}
	return img, nil
}

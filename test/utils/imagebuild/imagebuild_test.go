package imagebuild

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
)

var epoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

func testLayer() *Layer {
	var l Layer
	l.Dir("tmp", 0o1777)
	l.File("bin/tool", 0o755, []byte("binary"))
	l.Symlink("bin/sh", "tool")
	return &l
}

func TestLayerTar(t *testing.T) {
	data, err := testLayer().Tar(epoch)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		typ           byte
		mode          int64
		link, content string
	}
	wants := map[string]want{
		"tmp/":     {tar.TypeDir, 0o1777, "", ""},
		"bin/tool": {tar.TypeReg, 0o755, "", "binary"},
		"bin/sh":   {tar.TypeSymlink, 0o777, "tool", ""},
	}
	var order []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, hdr.Name)
		content, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		w, ok := wants[hdr.Name]
		got := want{hdr.Typeflag, hdr.Mode, hdr.Linkname, string(content)}
		if !ok || got != w {
			t.Errorf("entry %s = %+v, want %+v", hdr.Name, got, w)
		}
		if !hdr.ModTime.Equal(epoch) || hdr.Uid != 0 || hdr.Gid != 0 {
			t.Errorf("entry %s stamped %v, owned by %d:%d; want %v, root", hdr.Name, hdr.ModTime, hdr.Uid, hdr.Gid, epoch)
		}
	}
	if len(order) != 3 || order[0] != "tmp/" || order[1] != "bin/tool" || order[2] != "bin/sh" {
		t.Errorf("entries %v, want them in the order added", order)
	}
	again, err := testLayer().Tar(epoch)
	if err != nil || !bytes.Equal(again, data) {
		t.Errorf("a second Tar of the same entries differs (%v)", err)
	}
}

func TestSingleAndEditConfig(t *testing.T) {
	img, err := Single(testLayer(), "arm64", epoch, v1.Config{Entrypoint: []string{"/bin/tool"}})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "arm64" || !cf.Created.Equal(epoch) || cf.Config.Entrypoint[0] != "/bin/tool" {
		t.Errorf("config file = %+v", cf)
	}
	same, err := Single(testLayer(), "arm64", epoch, v1.Config{Entrypoint: []string{"/bin/tool"}})
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := same.Digest()
	if d1 != d2 {
		t.Errorf("the same inputs gave digests %s and %s", d1, d2)
	}

	edited, err := EditConfig(img, func(c *v1.Config) { c.User = "1000" })
	if err != nil {
		t.Fatal(err)
	}
	ecf, err := edited.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if ecf.Config.User != "1000" || ecf.Config.Entrypoint[0] != "/bin/tool" {
		t.Errorf("edited config = %+v", ecf.Config)
	}
	if cf, _ := img.ConfigFile(); cf.Config.User != "" {
		t.Errorf("EditConfig changed the original image's config: %+v", cf.Config)
	}

	var top Layer
	top.File("etc/motd", 0o644, []byte("hi"))
	stacked, err := Append(img, &top, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if layers, err := stacked.Layers(); err != nil || len(layers) != 2 {
		t.Errorf("Append gave %d layers (%v), want 2", len(layers), err)
	}
}

func TestWriteAndReadArchive(t *testing.T) {
	img, err := Append(empty.Image, testLayer(), epoch)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag("nodelet.test/tool:1.0")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "tool.tar")
	if err := WriteArchive(path, tag, img); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d entries, want the archive only", len(entries))
	}
	back, err := ReadArchive(path, tag)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	if got, err := back.Digest(); err != nil || got != want {
		t.Errorf("read back digest %s (%v), want %s", got, err, want)
	}
}

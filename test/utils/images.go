package utils

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The test images. They are built on this machine and never pulled from a
// registry on the internet: nodelet.test is not a registry anyone serves.
const (
	// PauseImage is the sandbox image of every containerd the harness starts:
	// a static program of our own (test/images/pause) that sleeps until
	// SIGTERM and reaps its children.
	PauseImage = "nodelet.test/pause:1.0"
	// BusyboxImage holds Debian's busybox-static with a symlink per applet in
	// /bin (sh, sleep, echo, cat, wget, …), /etc/passwd and /etc/group with
	// root, app (uid 1000) and nobody, and a /tmp with mode 1777. Its default command is sh.
	BusyboxImage = "nodelet.test/busybox:1.35"
	// BusyboxUID1000Image is BusyboxImage whose config runs as user "1000".
	BusyboxUID1000Image = "nodelet.test/busybox-uid1000:1.35"
	// BusyboxNamedUserImage is BusyboxImage whose config runs as user
	// "app" (uid 1000 in its /etc/passwd), a name the runtime cannot vouch
	// for without reading the image.
	BusyboxNamedUserImage = "nodelet.test/busybox-named-user:1.35"
)

// TestImages are the images StartContainerd imports unless told otherwise.
var TestImages = []string{PauseImage, BusyboxImage, BusyboxUID1000Image, BusyboxNamedUserImage}

// imageFormat changes whenever the way the images are assembled changes, so
// that archives cached by an older harness are not reused.
const imageFormat = "nodelet-test-image-v2"

// busyboxPath is where Debian's busybox-static installs its binary.
const busyboxPath = "/bin/busybox"

// imageEpoch is the time stamp of every file and of the image config, so that
// the same inputs always give the same digests.
var imageEpoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

type imageRecipe struct {
	// key returns a digest of everything the image is made of.
	key func() (string, error)
	// build assembles the image.
	build func(ctx context.Context) (v1.Image, error)
}

var recipes = map[string]imageRecipe{
	PauseImage:   {key: pauseKey, build: buildPause},
	BusyboxImage: {key: busyboxKey, build: buildBusybox},
	BusyboxUID1000Image: {
		key:   func() (string, error) { return userImageKey("1000") },
		build: func(ctx context.Context) (v1.Image, error) { return buildBusyboxAs(ctx, "1000") },
	},
	BusyboxNamedUserImage: {
		key:   func() (string, error) { return userImageKey("app") },
		build: func(ctx context.Context) (v1.Image, error) { return buildBusyboxAs(ctx, "app") },
	},
}

var imageMu sync.Mutex

// ImageArchive returns the path of a docker-archive tarball of one of the
// TestImages, building it on first use. Archives are cached under
// <cache>/images/ (see cacheDir) under a name that includes a
// hash of their inputs (the pause source and Go version, the busybox binary),
// so a second run reuses them and a changed input rebuilds them.
func ImageArchive(ctx context.Context, image string) (string, error) {
	recipe, ok := recipes[image]
	if !ok {
		return "", fmt.Errorf("%q is not a test image (want one of %v)", image, TestImages)
	}
	imageMu.Lock()
	defer imageMu.Unlock()

	key, err := recipe.key()
	if err != nil {
		return "", fmt.Errorf("hashing the inputs of %s: %w", image, err)
	}
	dir, err := cacheDir("images")
	if err != nil {
		return "", err
	}
	repo := image[strings.LastIndex(image, "/")+1:]
	repo = strings.ReplaceAll(repo, ":", "-")
	path := filepath.Join(dir, fmt.Sprintf("%s-%s.tar", repo, key[:16]))
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}

	img, err := recipe.build(ctx)
	if err != nil {
		return "", fmt.Errorf("building %s: %w", image, err)
	}
	tag, err := name.NewTag(image)
	if err != nil {
		return "", fmt.Errorf("parsing image name %s: %w", image, err)
	}
	// Another test process may be writing the same archive: write to a name
	// of our own and rename, which is atomic.
	tmp, err := os.CreateTemp(dir, ".tmp-"+repo+"-")
	if err != nil {
		return "", fmt.Errorf("creating archive for %s: %w", image, err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	if err := tarball.WriteToFile(tmp.Name(), tag, img); err != nil {
		return "", fmt.Errorf("writing archive of %s: %w", image, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("moving archive of %s into the cache: %w", image, err)
	}
	return path, nil
}

// loadImage reads a test image back from its cached archive.
func loadImage(ctx context.Context, image string) (v1.Image, error) {
	path, err := ImageArchive(ctx, image)
	if err != nil {
		return nil, err
	}
	tag, err := name.NewTag(image)
	if err != nil {
		return nil, fmt.Errorf("parsing image name %s: %w", image, err)
	}
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		return nil, fmt.Errorf("reading %s from %s: %w", image, path, err)
	}
	return img, nil
}

func hashOf(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// pauseSource returns the source of test/images/pause.
func pauseSource() ([]byte, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	src, err := os.ReadFile(filepath.Join(root, "test", "images", "pause", "main.go"))
	if err != nil {
		return nil, fmt.Errorf("reading the pause source: %w", err)
	}
	return src, nil
}

func pauseKey() (string, error) {
	src, err := pauseSource()
	if err != nil {
		return "", err
	}
	return hashOf([]byte(imageFormat), []byte(runtime.Version()), []byte(runtime.GOARCH), src), nil
}

// buildPause compiles test/images/pause statically in a module of its own
// (so a go.mod being edited in the work tree cannot break it) and makes it
// the only file of the image.
func buildPause(ctx context.Context) (v1.Image, error) {
	src, err := pauseSource()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "nodelet-pause-build-")
	if err != nil {
		return nil, fmt.Errorf("creating pause build directory: %w", err)
	}
	defer os.RemoveAll(dir)
	goMod := "module nodelet.test/pause\n\ngo 1.22\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(goMod), 0o644); err != nil {
		return nil, fmt.Errorf("writing pause go.mod: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
		return nil, fmt.Errorf("writing pause source: %w", err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("building the pause image needs the go command: %w", err)
	}
	cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-ldflags=-s -w", "-o", "pause", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH,
		"GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("compiling pause: %w\n%s", err, out)
	}
	bin, err := os.ReadFile(filepath.Join(dir, "pause"))
	if err != nil {
		return nil, fmt.Errorf("reading the pause binary: %w", err)
	}
	var layer tarLayer
	layer.file("pause", 0o755, bin)
	return assemble(layer, v1.Config{
		Entrypoint: []string{"/pause"},
		Env:        []string{"PATH=/"},
	})
}

func busyboxKey() (string, error) {
	bin, err := os.ReadFile(busyboxPath)
	if err != nil {
		return "", fmt.Errorf("reading %s (Debian package busybox-static): %w", busyboxPath, err)
	}
	return hashOf([]byte(imageFormat), bin), nil
}

func userImageKey(user string) (string, error) {
	key, err := busyboxKey()
	if err != nil {
		return "", err
	}
	return hashOf([]byte(key), []byte("user="+user)), nil
}

// buildBusyboxAs is BusyboxImage with User set in its config.
func buildBusyboxAs(ctx context.Context, user string) (v1.Image, error) {
	img, err := buildBusybox(ctx)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the busybox config: %w", err)
	}
	cfg := cf.Config
	cfg.User = user
	return mutate.Config(img, cfg)
}

// buildBusybox makes a one-layer image of Debian's static busybox with a
// symlink in /bin for each applet it lists.
func buildBusybox(ctx context.Context) (v1.Image, error) {
	bin, err := os.ReadFile(busyboxPath)
	if err != nil {
		return nil, fmt.Errorf("reading %s (Debian package busybox-static): %w", busyboxPath, err)
	}
	out, err := exec.CommandContext(ctx, busyboxPath, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("listing busybox applets: %w", err)
	}
	var layer tarLayer
	for _, d := range []string{"bin", "dev", "etc", "home", "proc", "sbin", "sys", "usr", "usr/bin", "usr/sbin", "var"} {
		layer.dir(d, 0o755)
	}
	layer.dir("root", 0o700)
	layer.dir("tmp", 0o1777)
	layer.dir("var/tmp", 0o1777)
	layer.file("bin/busybox", 0o755, bin)
	for _, applet := range strings.Fields(string(out)) {
		if applet == "busybox" || strings.Contains(applet, "/") {
			continue
		}
		layer.symlink("bin/"+applet, "busybox")
	}
	layer.file("etc/passwd", 0o644, []byte(
		"root:x:0:0:root:/root:/bin/sh\n"+
			"app:x:1000:1000:app:/tmp:/bin/sh\n"+
			"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"))
	layer.file("etc/group", 0o644, []byte("root:x:0:\napp:x:1000:\nnobody:x:65534:\n"))
	return assemble(layer, v1.Config{
		Cmd: []string{"sh"},
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	})
}

// assemble makes a single-layer linux image of the given layer and config.
func assemble(layer tarLayer, cfg v1.Config) (v1.Image, error) {
	data, err := layer.bytes()
	if err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("making layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return nil, fmt.Errorf("appending layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = runtime.GOARCH
	cf.Created = v1.Time{Time: imageEpoch}
	cf.Config = cfg
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("setting image config: %w", err)
	}
	return img, nil
}

// tarLayer collects the entries of a layer in order.
type tarLayer struct {
	entries []tarEntry
}

type tarEntry struct {
	hdr  tar.Header
	data []byte
}

func (l *tarLayer) dir(path string, mode int64) {
	l.entries = append(l.entries, tarEntry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: path + "/", Mode: mode}})
}

func (l *tarLayer) file(path string, mode int64, data []byte) {
	l.entries = append(l.entries, tarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: path, Mode: mode, Size: int64(len(data))}, data: data})
}

func (l *tarLayer) symlink(path, target string) {
	l.entries = append(l.entries, tarEntry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: path, Linkname: target, Mode: 0o777}})
}

func (l *tarLayer) bytes() ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range l.entries {
		hdr := e.hdr
		hdr.ModTime = imageEpoch
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

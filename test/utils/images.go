package utils

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodelet/nodelet/test/utils/imagebuild"
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

// ImageEpoch is the time stamp of every file and of the config of the
// harness's images, so that the same inputs always give the same digests.
var ImageEpoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

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
// <cache>/images/ (see CacheDir) under a name that includes a
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
	dir, err := CacheDir("images")
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
	return writeImageArchive(path, image, img)
}

// writeImageArchive writes img, tagged image, as the archive at path, and
// returns path. Another test process may be writing the same archive: each
// writes a temporary file of its own and renames it, which is atomic.
func writeImageArchive(path, image string, img v1.Image) (string, error) {
	tag, err := name.NewTag(image)
	if err != nil {
		return "", fmt.Errorf("parsing image name %s: %w", image, err)
	}
	if err := imagebuild.WriteArchive(path, tag, img); err != nil {
		return "", fmt.Errorf("writing archive of %s: %w", image, err)
	}
	return path, nil
}

// LoadImage returns one of the TestImages (or WebImage), read back from
// its cached archive, built first when there is none.
func LoadImage(ctx context.Context, image string) (v1.Image, error) {
	path, err := ImageArchive(ctx, image)
	if err != nil {
		return nil, err
	}
	tag, err := name.NewTag(image)
	if err != nil {
		return nil, fmt.Errorf("parsing image name %s: %w", image, err)
	}
	return imagebuild.ReadArchive(path, tag)
}

func hashOf(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// pauseProgram is the directory of the pause program under test/images.
const pauseProgram = "pause"

func pauseKey() (string, error) {
	src, err := ProgramSource(pauseProgram)
	if err != nil {
		return "", err
	}
	return hashOf([]byte(imageFormat), []byte(runtime.Version()), []byte(runtime.GOARCH), src), nil
}

// buildPause makes test/images/pause the only file of the image.
func buildPause(ctx context.Context) (v1.Image, error) {
	bin, err := CompileProgram(ctx, pauseProgram)
	if err != nil {
		return nil, err
	}
	var layer imagebuild.Layer
	layer.File("pause", 0o755, bin)
	return imagebuild.Single(&layer, runtime.GOARCH, ImageEpoch, v1.Config{
		Entrypoint: []string{"/pause"},
		Env:        []string{"PATH=/"},
	})
}

// ProgramSource returns the source of test/images/<program>/main.go.
func ProgramSource(program string) ([]byte, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	src, err := os.ReadFile(filepath.Join(root, "test", "images", program, "main.go"))
	if err != nil {
		return nil, fmt.Errorf("reading the %s source: %w", program, err)
	}
	return src, nil
}

// CompileProgram builds test/images/<program> statically for linux on
// this machine's architecture, in a module of its own (so a go.mod being
// edited in the work tree cannot break it), and returns the binary.
func CompileProgram(ctx context.Context, program string) ([]byte, error) {
	src, err := ProgramSource(program)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "nodelet-"+program+"-build-")
	if err != nil {
		return nil, fmt.Errorf("creating the %s build directory: %w", program, err)
	}
	defer os.RemoveAll(dir)
	goMod := "module nodelet.test/" + program + "\n\ngo 1.22\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(goMod), 0o644); err != nil {
		return nil, fmt.Errorf("writing the %s go.mod: %w", program, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
		return nil, fmt.Errorf("writing the %s source: %w", program, err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("building %s needs the go command: %w", program, err)
	}
	cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-ldflags=-s -w", "-o", program, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH,
		"GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("compiling %s: %w\n%s", program, err, out)
	}
	bin, err := os.ReadFile(filepath.Join(dir, program))
	if err != nil {
		return nil, fmt.Errorf("reading the %s binary: %w", program, err)
	}
	return bin, nil
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
	return imagebuild.EditConfig(img, func(cfg *v1.Config) { cfg.User = user })
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
	var layer imagebuild.Layer
	for _, d := range []string{"bin", "dev", "etc", "home", "proc", "sbin", "sys", "usr", "usr/bin", "usr/sbin", "var"} {
		layer.Dir(d, 0o755)
	}
	layer.Dir("root", 0o700)
	layer.Dir("tmp", 0o1777)
	layer.Dir("var/tmp", 0o1777)
	layer.File("bin/busybox", 0o755, bin)
	for _, applet := range strings.Fields(string(out)) {
		if applet == "busybox" || strings.Contains(applet, "/") {
			continue
		}
		layer.Symlink("bin/"+applet, "busybox")
	}
	layer.File("etc/passwd", 0o644, []byte(
		"root:x:0:0:root:/root:/bin/sh\n"+
			"app:x:1000:1000:app:/tmp:/bin/sh\n"+
			"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"))
	layer.File("etc/group", 0o644, []byte("root:x:0:\napp:x:1000:\nnobody:x:65534:\n"))
	return imagebuild.Single(&layer, runtime.GOARCH, ImageEpoch, v1.Config{
		Cmd: []string{"sh"},
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	})
}

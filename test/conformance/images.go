package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodelet/nodelet/test/utils"
	"github.com/nodelet/nodelet/test/utils/imagebuild"
)

// The names the e2e suite of Kubernetes 1.37.0 gives its images
// (k8s.io/kubernetes/test/utils/image/manifest.go). None is pulled: they are
// built here and imported into the node's containerd, and the suite's pods
// ask for them with imagePullPolicy IfNotPresent.
const (
	// AgnhostImage is the suite's multi-purpose test binary, built from
	// k8s.io/kubernetes/test/images/agnhost, on top of BusyboxImage's
	// files (the real one is Alpine: a shell and the usual tools), with a
	// curl stand-in, test/images/netcat as nc (the real image has
	// netcat-openbsd, whose flags the Service specs use: busybox nc has
	// no -v, -u or -w), and the DNS tools layer (bind's dig, host and
	// nslookup, which the real image has from Alpine's bind-tools, and a
	// getent, which busybox lacks).
	AgnhostImage = "registry.k8s.io/e2e-test-images/agnhost:2.66.1"
	// AgnhostPrevImage is the previous agnhost some specs switch a pod's
	// image to and from; here the same binary under its name.
	AgnhostPrevImage = "registry.k8s.io/e2e-test-images/agnhost:2.55"
	// BusyboxImage is the test harness's Debian busybox-static image with
	// Debian's bash-static as /bin/sh: the ash of Debian's busybox 1.35
	// drops environment variables whose names are not shell identifiers
	// (envFrom keys such as data-1) before it runs a command, where the
	// suite's busybox 1.37 passes them on, and the suite's `sh -c env` specs
	// read them back.
	BusyboxImage = "registry.k8s.io/e2e-test-images/busybox:1.37.0-2"
	// PauseImage is the test harness's pause image.
	PauseImage = "registry.k8s.io/pause:3.10.2"
	// NginxImage stands in for nginx: agnhost serving HTTP on port 80
	// (test-webserver), which is what the suite's pods use nginx for.
	NginxImage = "registry.k8s.io/e2e-test-images/nginx:1.27.0-2"
	// NginxNewImage is NginxImage under the newer tag.
	NginxNewImage = "registry.k8s.io/e2e-test-images/nginx:1.28.0-2"
	// NonRootImage is BusyboxImage running as uid 1234, like the suite's
	// nonroot image.
	NonRootImage = "registry.k8s.io/e2e-test-images/nonroot:1.5"
	// NonewprivsImage is BusyboxImage with test/images/nonewprivs installed
	// set-user-ID root as /usr/local/bin/nnp, its default command.
	NonewprivsImage = "registry.k8s.io/e2e-test-images/nonewprivs:1.4"
	// GlibcDNSTestingImage stands in for the suite's glibc-based DNS probe
	// image (Debian bookworm-slim with dnsutils; JessieDnsutils before):
	// this machine's Debian shell and tools with their shared libraries
	// (glibc, so that getent goes through glibc's resolver and NSS) and
	// the DNS tools layer.
	GlibcDNSTestingImage = "registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1"
	// KittenImage is what the ImageVolume spec mounts, with pull policy
	// Always: the harness's artifact image (a data.json naming kitten.jpg,
	// an os-release of Alpine Linux), served by a registry on this machine
	// that the node's containerd mirrors registry.k8s.io to (MirroredImages).
	KittenImage = "registry.k8s.io/e2e-test-images/kitten:1.8"
)

// MirroredImages are the e2e images the suite pulls with policy Always:
// a pull must reach a registry, so the harness serves them from one of
// its own in registry.k8s.io's place.
var MirroredImages = []string{KittenImage}

// mirroredRegistry is the registry the MirroredImages are named after.
const mirroredRegistry = "registry.k8s.io"

// curlShim stands in for the curl of the real agnhost image (Alpine's), which
// the suite's hooks run as `curl <url>`: busybox wget fetching the last
// argument that is not an option and printing the body.
const curlShim = `#!/bin/sh
url=""
for a in "$@"; do
	case "$a" in
	-*) ;;
	*) url="$a" ;;
	esac
done
exec wget -q -O - "$url"
`

// agnhostUser and agnhostGroup are the user and group the real agnhost image
// defines (uid 1000, gid 50000), which some specs refer to by name.
const (
	agnhostPasswd = "root:x:0:0:root:/root:/bin/sh\n" +
		"user-defined-in-image:x:1000:1000:Linux User:/home/user-defined-in-image:/bin/sh\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
	agnhostGroup = "root:x:0:root\n" +
		"user-defined-in-image:x:1000:\n" +
		"group-defined-in-image:x:50000:user-defined-in-image\n" +
		"nobody:x:65534:\n"
)

// imageBuild makes one image from the harness's images and agnhost.
type imageBuild func(ctx context.Context, agnhost string) (v1.Image, error)

var e2eImages = map[string]imageBuild{
	AgnhostImage:     buildAgnhost,
	AgnhostPrevImage: buildAgnhost,
	BusyboxImage:     buildBusybox,
	PauseImage:       harnessImage(utils.PauseImage),
	NginxImage:       buildNginx,
	NginxNewImage:    buildNginx,
	NonRootImage:     buildNonRoot,
	NonewprivsImage:  buildNonewprivs,

	GlibcDNSTestingImage: buildGlibcDNSTesting,
	KittenImage:          harnessImage(utils.ArtifactImage),
}

// E2EImages are the names of the images ImageArchives builds.
func E2EImages() []string {
	names := make([]string, 0, len(e2eImages))
	for n := range e2eImages {
		names = append(names, n)
	}
	return names
}

// ImageArchives builds a docker-archive of every E2EImages image into
// <cache>/conformance-images (keyed by the agnhost binary and the harness's
// archives, so a second run reuses them) and returns image name → path.
func ImageArchives(ctx context.Context, agnhost string) (map[string]string, error) {
	key, err := imagesKey(ctx, agnhost)
	if err != nil {
		return nil, err
	}
	dir, err := utils.CacheDir(filepath.Join("conformance-images", key[:16]))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for image, build := range e2eImages {
		path := filepath.Join(dir, fileName(image)+".tar")
		if _, err := os.Stat(path); err != nil {
			if err := writeArchive(ctx, image, path, build, agnhost); err != nil {
				return nil, err
			}
		}
		out[image] = path
	}
	return out, nil
}

func writeArchive(ctx context.Context, image, path string, build imageBuild, agnhost string) error {
	img, err := build(ctx, agnhost)
	if err != nil {
		return fmt.Errorf("building %s: %w", image, err)
	}
	tag, err := name.NewTag(image)
	if err != nil {
		return fmt.Errorf("parsing image name %s: %w", image, err)
	}
	if err := imagebuild.WriteArchive(path, tag, img); err != nil {
		return fmt.Errorf("writing archive of %s: %w", image, err)
	}
	return nil
}

// StartMirror starts a registry on loopback serving the MirroredImages
// from their archives (ImageArchives), under their names without the
// domain; a containerd pulls them from it after
// Containerd.AddMirror("registry.k8s.io", registry.Host()).
func StartMirror(ctx context.Context, archives map[string]string) (_ *utils.Registry, err error) {
	reg, err := utils.StartRegistry(ctx, utils.RegistryOptions{})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, reg.Stop())
		}
	}()
	for _, image := range MirroredImages {
		path, ok := archives[image]
		if !ok {
			return nil, fmt.Errorf("no archive of %s to mirror", image)
		}
		tag, err := name.NewTag(image)
		if err != nil {
			return nil, fmt.Errorf("parsing image name %s: %w", image, err)
		}
		img, err := imagebuild.ReadArchive(path, tag)
		if err != nil {
			return nil, fmt.Errorf("reading archive of %s: %w", image, err)
		}
		if _, err := reg.PushImage(ctx, image, img); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// ImportImages imports the archives into the containerd's k8s.io namespace,
// where the CRI finds them.
func ImportImages(ctx context.Context, c *utils.Containerd, archives map[string]string) error {
	for image, path := range archives {
		cmd := c.Ctr(ctx, "images", "import", "--all-platforms", "--snapshotter", "overlayfs", path)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("importing %s: %w\n%s", image, err, out)
		}
	}
	return nil
}

// imagesKey digests the inputs of every image: the agnhost binary and the
// harness's archives, which are themselves named by their inputs.
func imagesKey(ctx context.Context, agnhost string) (string, error) {
	h := sha256.New()
	fmt.Fprintln(h, "conformance-images-v6")
	shell, err := os.ReadFile(bashPath)
	if err != nil {
		return "", fmt.Errorf("reading %s (Debian package bash-static): %w", bashPath, err)
	}
	h.Write(shell)
	f, err := os.Open(agnhost)
	if err != nil {
		return "", fmt.Errorf("reading agnhost: %w", err)
	}
	defer f.Close()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading agnhost: %w", err)
	}
	nnp, err := utils.ProgramSource(nonewprivsProgram)
	if err != nil {
		return "", err
	}
	h.Write(nnp)
	nc, err := utils.ProgramSource(netcatProgram)
	if err != nil {
		return "", err
	}
	h.Write(nc)
	crt, key, err := porterCertificate(ctx)
	if err != nil {
		return "", err
	}
	h.Write(crt)
	h.Write(key)
	// The host files the DNS tools layer and the glibc image copy.
	for _, layer := range []func(context.Context) (*imagebuild.Layer, string, error){dnsToolsLayer, glibcBaseLayer} {
		_, sum, err := layer(ctx)
		if err != nil {
			return "", err
		}
		fmt.Fprintln(h, sum)
	}
	for _, image := range []string{utils.BusyboxImage, utils.PauseImage} {
		path, err := utils.ImageArchive(ctx, image)
		if err != nil {
			return "", err
		}
		fmt.Fprintln(h, filepath.Base(path))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// harnessImage returns the harness's image of that name as it is.
func harnessImage(image string) imageBuild {
	return func(ctx context.Context, _ string) (v1.Image, error) {
		return utils.LoadImage(ctx, image)
	}
}

// buildAgnhost is busybox plus /agnhost (and the agnhost-2 link), the users
// and groups of the real image, and its entrypoint and default command.
func buildAgnhost(ctx context.Context, agnhost string) (v1.Image, error) {
	bin, err := os.ReadFile(agnhost)
	if err != nil {
		return nil, fmt.Errorf("reading agnhost: %w", err)
	}
	nc, err := utils.CompileProgram(ctx, netcatProgram)
	if err != nil {
		return nil, err
	}
	crt, key, err := porterCertificate(ctx)
	if err != nil {
		return nil, err
	}
	files := func(l *imagebuild.Layer) {
		// porter's TLS ports serve these, from its working directory /.
		l.File("localhost.crt", 0o644, crt)
		l.File("localhost.key", 0o644, key)
		// Over busybox's nc applet link.
		l.File("bin/nc", 0o755, nc)
		l.Dir("uploads", 0o755)
		l.Dir("home/user-defined-in-image", 0o755)
		l.File("agnhost", 0o755, bin)
		l.Symlink("agnhost-2", "agnhost")
		l.File("usr/bin/curl", 0o755, []byte(curlShim))
		l.File("etc/passwd", 0o644, []byte(agnhostPasswd))
		l.File("etc/group", 0o644, []byte(agnhostGroup))
	}
	img, err := onBusybox(ctx, files, func(cfg *v1.Config) {
		cfg.Entrypoint = []string{"/agnhost"}
		cfg.Cmd = []string{"pause"}
		cfg.ExposedPorts = map[string]struct{}{"80/tcp": {}, "8080/tcp": {}, "8081/tcp": {}, "9376/tcp": {}, "5000/tcp": {}}
	})
	if err != nil {
		return nil, err
	}
	dns, _, err := dnsToolsLayer(ctx)
	if err != nil {
		return nil, err
	}
	return imagebuild.Append(img, dns, utils.ImageEpoch)
}

// buildNginx is agnhost serving HTTP on port 80.
func buildNginx(ctx context.Context, agnhost string) (v1.Image, error) {
	img, err := buildAgnhost(ctx, agnhost)
	if err != nil {
		return nil, err
	}
	return imagebuild.EditConfig(img, func(cfg *v1.Config) {
		cfg.Entrypoint = []string{"/agnhost", "test-webserver", "--port=80"}
		cfg.Cmd = nil
		cfg.ExposedPorts = map[string]struct{}{"80/tcp": {}}
	})
}

// buildNonRoot is busybox running as uid 1234 and gid 1234.
func buildNonRoot(ctx context.Context, _ string) (v1.Image, error) {
	return onBusybox(ctx, nil, func(cfg *v1.Config) { cfg.User = "1234:1234" })
}

// kubernetesModule is the module whose e2e.test and agnhost the harness
// builds (hack/conformance.sh's K8S_VERSION).
const kubernetesModule = "k8s.io/kubernetes@v1.37.0"

// porterCertificate returns the certificate and key the real agnhost image
// holds in its working directory for porter's TLS ports
// (test/images/agnhost/porter/localhost.{crt,key} of kubernetesModule).
func porterCertificate(ctx context.Context) (crt, key []byte, err error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", kubernetesModule)
	// Outside any module, so that no go.sum changes.
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("locating %s: %w", kubernetesModule, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return nil, nil, fmt.Errorf("locating %s: no directory in %q", kubernetesModule, out)
	}
	dir := filepath.Join(mod.Dir, "test", "images", "agnhost", "porter")
	if crt, err = os.ReadFile(filepath.Join(dir, "localhost.crt")); err != nil {
		return nil, nil, fmt.Errorf("reading porter's certificate: %w", err)
	}
	if key, err = os.ReadFile(filepath.Join(dir, "localhost.key")); err != nil {
		return nil, nil, fmt.Errorf("reading porter's key: %w", err)
	}
	return crt, key, nil
}

// netcatProgram is the directory of the nc program under test/images.
const netcatProgram = "netcat"

// nonewprivsProgram is the directory of the nonewprivs program under
// test/images.
const nonewprivsProgram = "nonewprivs"

// buildNonewprivs installs test/images/nonewprivs set-user-ID root on
// busybox.
func buildNonewprivs(ctx context.Context, _ string) (v1.Image, error) {
	bin, err := utils.CompileProgram(ctx, nonewprivsProgram)
	if err != nil {
		return nil, err
	}
	files := func(l *imagebuild.Layer) {
		l.Dir("usr/local", 0o755)
		l.Dir("usr/local/bin", 0o755)
		l.File("usr/local/bin/nnp", 0o4755, bin)
	}
	return onBusybox(ctx, files, func(cfg *v1.Config) {
		cfg.Cmd = []string{"nnp"}
		cfg.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	})
}

// dnsToolPrograms are the DNS tools of the real images: bind's dig (the
// probes' `dig +notcp|+tcp +noall +answer +search NAME TYPE` and
// `dig +short NAME TYPE`), host and nslookup (Debian's bind9-dnsutils and
// bind9-host; Alpine's bind-tools in the real agnhost), and glibc's
// getent (Debian's libc-bin), which the probes run as `getent hosts NAME`.
// All live under /usr/bin, where they shadow no busybox applet link (those
// are in /bin) but nslookup's, as bind's does in the real agnhost.
var dnsToolPrograms = []string{"/usr/bin/dig", "/usr/bin/host", "/usr/bin/nslookup", "/usr/bin/getent"}

// dnsNSSwitch is the NSS configuration of a Debian image: glibc looks
// hosts up in /etc/hosts, then in DNS (the order glibc 2.36 also takes
// when the file is missing; written down so the images do not lean on
// that default, which older glibc had as DNS first). Both services are
// built into glibc 2.36, so the image needs no NSS module.
const dnsNSSwitch = "passwd: files\ngroup: files\nshadow: files\ngshadow: files\n" +
	"hosts: files dns\nnetworks: files\n" +
	"protocols: files\nservices: files\nethers: files\nrpc: files\n"

// dnsToolsLayer is the layer agnhost and the glibc image share: the DNS
// tools with their shared libraries at their host paths, and the NSS
// configuration. It returns the digest of the host files too.
func dnsToolsLayer(ctx context.Context) (*imagebuild.Layer, string, error) {
	l, sum, err := utils.HostProgramsLayer(ctx, dnsToolPrograms, nil)
	if err != nil {
		return nil, "", fmt.Errorf("copying the DNS tools (Debian packages bind9-dnsutils, libc-bin): %w", err)
	}
	l.File("etc/nsswitch.conf", 0o644, []byte(dnsNSSwitch))
	return l, sum, nil
}

// glibcPrograms are the host's shell and tools the glibc image holds: a
// POSIX sh (dash, Debian's /bin/sh) and the commands the DNS probe scripts
// and a debugging session call (seq, sleep, test, echo; cat, grep, awk,
// hostname), as in Debian's bookworm-slim, the real image's base.
var glibcPrograms = []string{
	"/usr/bin/dash", "/usr/bin/bash",
	"/usr/bin/awk", "/usr/bin/cat", "/usr/bin/echo", "/usr/bin/env", "/usr/bin/grep",
	"/usr/bin/head", "/usr/bin/hostname", "/usr/bin/ls", "/usr/bin/mkdir", "/usr/bin/rm",
	"/usr/bin/seq", "/usr/bin/sleep", "/usr/bin/tail", "/usr/bin/test",
}

// glibcFiles are host paths the glibc image holds as on Debian: /bin/sh
// (through Debian's /bin -> usr/bin link and usr/bin/sh -> dash), and the
// /etc directory (alone; awk brings /etc/alternatives/awk into it).
var glibcFiles = []string{"/bin/sh", "/etc"}

// glibcBaseLayer is the glibc image's own layer: glibcPrograms and
// glibcFiles with their shared libraries, the directories a root file
// system has, and root and nobody as users. It returns the digest of the
// host files too.
func glibcBaseLayer(ctx context.Context) (*imagebuild.Layer, string, error) {
	l, sum, err := utils.HostProgramsLayer(ctx, glibcPrograms, glibcFiles)
	if err != nil {
		return nil, "", fmt.Errorf("copying the glibc image's tools: %w", err)
	}
	for _, d := range []string{"dev", "home", "proc", "run", "sys", "var"} {
		l.Dir(d, 0o755)
	}
	l.Dir("root", 0o700)
	l.Dir("tmp", 0o1777)
	l.Dir("var/tmp", 0o1777)
	l.File("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"))
	l.File("etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n"))
	return l, sum, nil
}

// buildGlibcDNSTesting is glibcBaseLayer with the DNS tools layer on top,
// and bookworm-slim's command and path.
func buildGlibcDNSTesting(ctx context.Context, _ string) (v1.Image, error) {
	base, _, err := glibcBaseLayer(ctx)
	if err != nil {
		return nil, err
	}
	img, err := imagebuild.Single(base, runtime.GOARCH, utils.ImageEpoch, v1.Config{
		Cmd: []string{"bash"},
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	})
	if err != nil {
		return nil, err
	}
	dns, _, err := dnsToolsLayer(ctx)
	if err != nil {
		return nil, err
	}
	return imagebuild.Append(img, dns, utils.ImageEpoch)
}

// bashPath is where Debian's bash-static installs its binary.
const bashPath = "/bin/bash-static"

// buildBusybox is the harness's busybox with bash-static as /bin/sh.
func buildBusybox(ctx context.Context, _ string) (v1.Image, error) {
	return onBusybox(ctx, nil, func(*v1.Config) {})
}

// onBusybox appends to the harness's busybox image a layer that makes
// bash-static its /bin/sh and holds the files add adds, if any, and edits
// the config.
func onBusybox(ctx context.Context, add func(*imagebuild.Layer), edit func(*v1.Config)) (v1.Image, error) {
	base, err := utils.LoadImage(ctx, utils.BusyboxImage)
	if err != nil {
		return nil, err
	}
	shell, err := os.ReadFile(bashPath)
	if err != nil {
		return nil, fmt.Errorf("reading %s (Debian package bash-static): %w", bashPath, err)
	}
	var layer imagebuild.Layer
	layer.File("bin/bash", 0o755, shell)
	layer.Symlink("bin/sh", "bash")
	if add != nil {
		add(&layer)
	}
	img, err := imagebuild.Append(base, &layer, utils.ImageEpoch)
	if err != nil {
		return nil, err
	}
	return imagebuild.EditConfig(img, edit)
}

// fileName turns an image name into a file name.
func fileName(image string) string {
	b := []byte(image)
	for i, c := range b {
		if c == '/' || c == ':' {
			b[i] = '_'
		}
	}
	return string(b)
}

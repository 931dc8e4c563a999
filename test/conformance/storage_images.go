package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodelet/nodelet/test/utils"
	"github.com/nodelet/nodelet/test/utils/imagebuild"
)

// The images of the CSI mock specs' manifests
// (test/e2e/testing-manifests/storage-csi/mock of kubernetesModule) that
// the storage suite builds besides the E2EImages.
const (
	// CSIProvisionerImage and CSIAttacherImage are the kubernetes-csi
	// sidecars, built from their modules at the images' versions by
	// hack/csi.sh. (csi-snapshotter:v8.6.0 is not built: its module
	// replaces its client module by a directory the module's zip lacks,
	// and the proxy's client needs newer Kubernetes libraries than the
	// module pins; only [Feature:VolumeSnapshotDataSource] specs use it.)
	CSIProvisionerImage = "registry.k8s.io/sig-storage/csi-provisioner:v6.3.0"
	CSIAttacherImage    = "registry.k8s.io/sig-storage/csi-attacher:v4.12.0"
	// CSIRegistrarImage stands in for node-driver-registrar (not on the
	// module proxy): test/csi/cmd/csi-registrar, which takes its flags.
	CSIRegistrarImage = "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.17.0"
	// HostpathPluginImage stands in for csi-driver-host-path's
	// hostpathplugin (not on the module proxy) in the two modes the mock
	// specs run it in: with --proxy-endpoint test/csi/cmd/csi-mock-proxy
	// forwards the CSI socket to the mock driver in e2e.test; without, it
	// runs test/csi/cmd/csi-mock-driver, Kubernetes' e2e mock CSI service
	// logging its calls for e2e.test to read.
	HostpathPluginImage = "registry.k8s.io/sig-storage/hostpathplugin:v1.17.1"
	// BusyboxPrevImage is the busybox the mock driver's pod execs its
	// directory checks in (test -d, mkdir, base64, mv, rm): BusyboxImage's
	// build under the older tag.
	BusyboxPrevImage = "registry.k8s.io/e2e-test-images/busybox:1.36.1-1"
)

// hostBinaryImage is an image of one host binary with its shared
// libraries, reached at /<Entrypoint> as in the real image.
type hostBinaryImage struct {
	Image string
	// Binary is the file name in the directory the recipe's source
	// builds into; Entrypoint the image's command (a link to it).
	Binary, Entrypoint string
	// StandIn marks an image built from this repository's stand-in.
	StandIn bool
	// Extra are more stand-ins the image holds at /<name>.
	Extra []string
	// OnBusybox builds the image on the harness's busybox (BusyboxImage,
	// bash as /bin/sh): for images whose pods run shell commands, as
	// the real image's base allows.
	OnBusybox bool
}

// storageRecipes are the storage suite's images of host binaries: the
// sidecars from hack/csi.sh, the stand-ins from test/csi/cmd.
var storageRecipes = []hostBinaryImage{
	{Image: CSIProvisionerImage, Binary: "csi-provisioner", Entrypoint: "csi-provisioner"},
	{Image: CSIAttacherImage, Binary: "csi-attacher", Entrypoint: "csi-attacher"},
	{Image: CSIRegistrarImage, Binary: "csi-registrar", Entrypoint: "csi-node-driver-registrar", StandIn: true},
	hostpathPluginRecipe,
}

// hostpathPluginRecipe is hostpathplugin's stand-in. The real image's base
// has a shell, and the DRA specs' driver pod (dra-test-driver-proxy.yaml)
// runs in it: its command is a shell loop of sleep, and e2e.test execs the
// proxy mode, then rm, mkdir, base64 -d, mv in it to write the driver's
// CDI specs.
var hostpathPluginRecipe = hostBinaryImage{
	Image: HostpathPluginImage, Binary: "csi-mock-proxy", Entrypoint: "hostpathplugin",
	StandIn: true, Extra: []string{"csi-mock-driver"}, OnBusybox: true,
}

// draRecipes are the DRA suite's images of host binaries: only the
// hostpathplugin stand-in, whose proxy mode forwards the driver's
// registration and DRA sockets to e2e.test.
var draRecipes = []hostBinaryImage{hostpathPluginRecipe}

// standInCommands are the stand-ins' packages by binary name.
var standInCommands = map[string]string{
	"csi-registrar":  "./test/csi/cmd/csi-registrar",
	"csi-mock-proxy": "./test/csi/cmd/csi-mock-proxy",
}

// sidecarVersions returns the CSI_*_VERSION settings of hack/csi.sh that
// build the versions the sidecar images name.
func sidecarVersions(recipes []hostBinaryImage) ([]string, error) {
	vars := map[string]string{
		"csi-provisioner": "CSI_PROVISIONER_VERSION",
		"csi-attacher":    "CSI_ATTACHER_VERSION",
	}
	var env []string
	for _, r := range recipes {
		if r.StandIn {
			continue
		}
		v, ok := vars[r.Binary]
		if !ok {
			return nil, fmt.Errorf("%s: hack/csi.sh does not build %s", r.Image, r.Binary)
		}
		i := strings.LastIndex(r.Image, ":")
		if i < 0 || !strings.HasPrefix(r.Image[i+1:], "v") {
			return nil, fmt.Errorf("%s: no version tag", r.Image)
		}
		env = append(env, v+"="+r.Image[i+1:])
	}
	return env, nil
}

// StorageImageArchives builds the storage suite's images (storageRecipes
// and BusyboxPrevImage) into <cache>/conformance-storage-images/<key> and
// returns image name → archive path. The sidecars' first build takes
// several minutes; progress, when not nil, gets its lines.
func StorageImageArchives(ctx context.Context, progress io.Writer) (map[string]string, error) {
	return hostBinaryArchives(ctx, progress, storageRecipes, true)
}

// DRAImageArchives builds the DRA suite's images (draRecipes) like
// StorageImageArchives, without the sidecars.
func DRAImageArchives(ctx context.Context, progress io.Writer) (map[string]string, error) {
	return hostBinaryArchives(ctx, progress, draRecipes, false)
}

// hostBinaryArchives builds the images of recipes, and BusyboxPrevImage
// when withBusyboxPrev, into <cache>/conformance-storage-images/<key>
// (the key covers every image's content) and returns image name →
// archive path.
func hostBinaryArchives(ctx context.Context, progress io.Writer, recipes []hostBinaryImage, withBusyboxPrev bool) (map[string]string, error) {
	sidecars := ""
	if slices.ContainsFunc(recipes, func(r hostBinaryImage) bool { return !r.StandIn }) {
		var err error
		if sidecars, err = buildSidecars(ctx, progress, recipes); err != nil {
			return nil, err
		}
	}
	// A fixed directory: the binaries' paths are in the images, and in
	// their cache key.
	standIns, err := utils.CacheDir("conformance-csi-standins")
	if err != nil {
		return nil, err
	}
	if err := buildStandIns(ctx, standIns); err != nil {
		return nil, err
	}
	h := sha256.New()
	fmt.Fprintln(h, "conformance-storage-images-v2")
	layers := map[string]*imagebuild.Layer{}
	for _, r := range recipes {
		dir := sidecars
		if r.StandIn {
			dir = standIns
		}
		programs := []string{filepath.Join(dir, r.Binary)}
		for _, e := range r.Extra {
			programs = append(programs, filepath.Join(dir, e))
		}
		l, sum, err := utils.HostProgramsLayer(ctx, programs, nil)
		if err != nil {
			return nil, fmt.Errorf("copying %s for %s: %w", r.Binary, r.Image, err)
		}
		l.Symlink(r.Entrypoint, filepath.Join(dir, r.Binary))
		for _, e := range r.Extra {
			l.Symlink(e, filepath.Join(dir, e))
		}
		layers[r.Image] = l
		fmt.Fprintln(h, r.Image, r.Entrypoint, r.OnBusybox, sum)
	}
	busybox, err := utils.ImageArchive(ctx, utils.BusyboxImage)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(h, filepath.Base(busybox))
	shell, err := os.ReadFile(bashPath)
	if err != nil {
		return nil, fmt.Errorf("reading %s (Debian package bash-static): %w", bashPath, err)
	}
	h.Write(shell)
	key := hex.EncodeToString(h.Sum(nil))
	dir, err := utils.CacheDir(filepath.Join("conformance-storage-images", key[:16]))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	add := func(image string, build imageBuild) error {
		path := filepath.Join(dir, fileName(image)+".tar")
		if _, err := os.Stat(path); err != nil {
			if err := writeArchive(ctx, image, path, build, ""); err != nil {
				return err
			}
		}
		out[image] = path
		return nil
	}
	for _, r := range recipes {
		layer, entrypoint, withShell := layers[r.Image], r.Entrypoint, r.OnBusybox
		build := func(ctx context.Context, _ string) (v1.Image, error) {
			if withShell {
				base, err := onBusybox(ctx, nil, func(*v1.Config) {})
				if err != nil {
					return nil, err
				}
				img, err := imagebuild.Append(base, layer, utils.ImageEpoch)
				if err != nil {
					return nil, err
				}
				return imagebuild.EditConfig(img, func(c *v1.Config) {
					c.Entrypoint, c.Cmd = []string{"/" + entrypoint}, nil
				})
			}
			return imagebuild.Single(layer, runtime.GOARCH, utils.ImageEpoch, v1.Config{
				Entrypoint: []string{"/" + entrypoint},
				Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			})
		}
		if err := add(r.Image, build); err != nil {
			return nil, err
		}
	}
	if withBusyboxPrev {
		if err := add(BusyboxPrevImage, buildBusybox); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// buildSidecars runs hack/csi.sh for the sidecar images' versions and
// returns the directory of the binaries.
func buildSidecars(ctx context.Context, progress io.Writer, recipes []hostBinaryImage) (string, error) {
	env, err := sidecarVersions(recipes)
	if err != nil {
		return "", err
	}
	root, err := utils.RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "hack", "csi.sh"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	if progress != nil {
		cmd.Stderr = progress
	}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building the CSI sidecars (%s): %w", strings.Join(env, " "), err)
	}
	var names []string
	for _, r := range recipes {
		if !r.StandIn {
			names = append(names, r.Binary)
		}
	}
	return utils.BinDirOf(strings.TrimSpace(string(out)), names...)
}

// buildStandIns builds the stand-ins statically into dir (a no-op for go
// build when they are up to date).
func buildStandIns(ctx context.Context, dir string) error {
	root, err := utils.RepoRoot()
	if err != nil {
		return err
	}
	for bin, pkg := range standInCommands {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, bin), pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building the %s stand-in: %w\n%s", bin, err, out)
		}
	}
	return buildMockDriver(ctx, root, dir)
}

// mockDriverSource is the mock driver stand-in, which imports
// k8s.io/kubernetes and is built outside this module.
const mockDriverSource = "test/csi/cmd/csi-mock-driver/main.go"

// buildMockDriver builds csi-mock-driver into dir in a module of its own
// with the requirements of hack/conformance.sh's module (k8s.io/kubernetes
// with its staging modules), which built e2e.test before.
func buildMockDriver(ctx context.Context, root, dir string) error {
	k8s, err := utils.CacheDir(filepath.Join("build", "conformance-k8s-1.37.0"))
	if err != nil {
		return err
	}
	build, err := utils.CacheDir(filepath.Join("build", "csi-mock-driver"))
	if err != nil {
		return err
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(k8s, f))
		if err != nil {
			return fmt.Errorf("preparing the mock driver's module (hack/conformance.sh makes it): %w", err)
		}
		if err := os.WriteFile(filepath.Join(build, f), data, 0o644); err != nil {
			return fmt.Errorf("preparing the mock driver's module: %w", err)
		}
	}
	src, err := os.ReadFile(filepath.Join(root, mockDriverSource))
	if err != nil {
		return fmt.Errorf("reading the mock driver: %w", err)
	}
	if err := os.WriteFile(filepath.Join(build, "main.go"), src, 0o644); err != nil {
		return fmt.Errorf("writing the mock driver: %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, "csi-mock-driver"), "main.go")
	cmd.Dir = build
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the csi-mock-driver stand-in: %w\n%s", err, out)
	}
	return nil
}

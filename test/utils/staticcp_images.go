package utils

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/nodelet/nodelet/test/utils/imagebuild"
)

// The control plane's images, named as kubeadm names them for the
// versions hack/envtest.sh pins. They hold the pinned binaries of
// KUBEBUILDER_ASSETS, not the upstream images: nothing is pulled.
const (
	EtcdImage                  = "registry.k8s.io/etcd:3.6.16-0"
	KubeAPIServerImage         = "registry.k8s.io/kube-apiserver:v1.37.0"
	KubeControllerManagerImage = "registry.k8s.io/kube-controller-manager:v1.37.0"
	KubeSchedulerImage         = "registry.k8s.io/kube-scheduler:v1.37.0"
)

// ControlPlaneImages maps each control-plane component (its binary's
// name in KUBEBUILDER_ASSETS) to its image.
var ControlPlaneImages = map[string]string{
	"etcd":                    EtcdImage,
	"kube-apiserver":          KubeAPIServerImage,
	"kube-controller-manager": KubeControllerManagerImage,
	"kube-scheduler":          KubeSchedulerImage,
}

// controlPlaneImageFormat changes whenever the way the control-plane
// images are assembled changes.
const controlPlaneImageFormat = "nodelet-control-plane-image-v1"

// controlPlaneBinDir is where the images hold their binary, as the
// upstream images do.
const controlPlaneBinDir = "usr/local/bin"

// ControlPlaneImageArchive returns the docker-archive of component's
// image (see ControlPlaneImages), built from assetsDir/<component> and
// the shared libraries ldd names for it, and cached under
// <cache>/images/ by a hash of those files.
func ControlPlaneImageArchive(ctx context.Context, assetsDir, component string) (string, error) {
	image, ok := ControlPlaneImages[component]
	if !ok {
		return "", fmt.Errorf("%q is not a control-plane component", component)
	}
	bin := filepath.Join(assetsDir, component)
	libs, err := sharedLibraries(ctx, bin)
	if err != nil {
		return "", err
	}
	files := map[string][]byte{}
	parts := [][]byte{[]byte(controlPlaneImageFormat), []byte(image)}
	for _, p := range append([]string{bin}, libs...) {
		data, err := os.ReadFile(p)
		if err != nil {
			return "", fmt.Errorf("reading %s for the %s image: %w", p, component, err)
		}
		files[p] = data
		parts = append(parts, []byte(p), data)
	}
	key := hashOf(parts...)

	imageMu.Lock()
	defer imageMu.Unlock()
	dir, err := CacheDir("images")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%s.tar", component, key[:16]))
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	var layer imagebuild.Layer
	made := map[string]bool{}
	mkdirs := func(p string) {
		d := filepath.Dir(p)
		var chain []string
		for d != "." && d != "/" && !made[d] {
			chain = append(chain, d)
			made[d] = true
			d = filepath.Dir(d)
		}
		for i := len(chain) - 1; i >= 0; i-- {
			layer.Dir(chain[i], 0o755)
		}
	}
	for _, d := range []string{"etc", "var/lib"} {
		mkdirs(d + "/x")
	}
	layer.Dir("tmp", 0o1777)
	layer.File("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"))
	layer.File("etc/group", 0o644, []byte("root:x:0:\nnobody:x:65534:\n"))
	target := filepath.Join(controlPlaneBinDir, component)
	mkdirs(target)
	layer.File(target, 0o755, files[bin])
	for _, lib := range libs {
		rel := strings.TrimPrefix(lib, "/")
		mkdirs(rel)
		layer.File(rel, 0o755, files[lib])
	}
	img, err := fastLayerImage(&layer, v1.Config{
		Entrypoint: []string{"/" + target},
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
	})
	if err != nil {
		return "", fmt.Errorf("building %s: %w", image, err)
	}
	return writeImageArchive(path, image, img)
}

// fastLayerImage is imagebuild.Single with the layer compressed at gzip's
// fastest level: the control-plane binaries are hundreds of megabytes,
// and the archive is only ever read on this machine.
func fastLayerImage(l *imagebuild.Layer, cfg v1.Config) (v1.Image, error) {
	data, err := l.Tar(ImageEpoch)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return nil, fmt.Errorf("making layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, fmt.Errorf("appending layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: ImageEpoch}
	cf.Config = cfg
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("setting image config: %w", err)
	}
	return img, nil
}

// sharedLibraries returns the absolute paths ldd names for bin (the
// dynamic loader included), none for a static binary.
func sharedLibraries(ctx context.Context, bin string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ldd", bin).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "not a dynamic executable") {
			return nil, nil
		}
		return nil, fmt.Errorf("listing the shared libraries of %s: %w: %s", bin, err, out)
	}
	return parseLdd(string(out)), nil
}

// parseLdd returns the absolute paths in ldd's output: the target of
// "name => /path (addr)" and the loader's "/path (addr)"; the vDSO has no
// file.
func parseLdd(out string) []string {
	var libs []string
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		for i, f := range fields {
			if strings.HasPrefix(f, "/") && (i == 0 || fields[i-1] == "=>") {
				libs = append(libs, f)
				break
			}
		}
	}
	return libs
}

// ImportControlPlaneImages builds (or takes from the cache) the image of
// every control-plane component from the binaries in assetsDir and
// imports it into c, and returns how long that took.
func (c *Containerd) ImportControlPlaneImages(ctx context.Context, assetsDir string) (time.Duration, error) {
	start := time.Now()
	for _, component := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		archive, err := ControlPlaneImageArchive(ctx, assetsDir, component)
		if err != nil {
			return 0, err
		}
		if err := c.ImportArchive(ctx, ControlPlaneImages[component], archive); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

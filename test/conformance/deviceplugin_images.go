package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodelet/nodelet/test/utils"
	"github.com/nodelet/nodelet/test/utils/imagebuild"
)

// SampleDevicePluginImage is the node suite's sample device plugin image
// under the name its manifest gives it
// (test/e2e/testing-manifests/sample-device-plugin/sample-device-plugin.yaml,
// the version of test/images/sample-device-plugin/VERSION), built here from
// the binary hack/conformance.sh builds: /sampledeviceplugin on the
// harness's busybox (the real image's base is Alpine), with the real
// image's entrypoint.
const SampleDevicePluginImage = "registry.k8s.io/e2e-test-images/sample-device-plugin:1.8.0"

// DevicePluginImageArchives builds the device plugin suite's image
// (SampleDevicePluginImage, from the binary at plugin) into
// <cache>/conformance-deviceplugin-images/<key>, keyed by the binary and
// the base, and returns image name → archive path.
func DevicePluginImageArchives(ctx context.Context, plugin string) (map[string]string, error) {
	bin, err := os.ReadFile(plugin)
	if err != nil {
		return nil, fmt.Errorf("reading the sample device plugin: %w", err)
	}
	busybox, err := utils.ImageArchive(ctx, utils.BusyboxImage)
	if err != nil {
		return nil, err
	}
	shell, err := os.ReadFile(bashPath)
	if err != nil {
		return nil, fmt.Errorf("reading %s (Debian package bash-static): %w", bashPath, err)
	}
	h := sha256.New()
	fmt.Fprintln(h, "conformance-deviceplugin-images-v1", filepath.Base(busybox))
	h.Write(shell)
	h.Write(bin)
	key := hex.EncodeToString(h.Sum(nil))
	dir, err := utils.CacheDir(filepath.Join("conformance-deviceplugin-images", key[:16]))
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, fileName(SampleDevicePluginImage)+".tar")
	if _, err := os.Stat(path); err != nil {
		build := func(ctx context.Context, _ string) (v1.Image, error) {
			return buildSampleDevicePlugin(ctx, bin)
		}
		if err := writeArchive(ctx, SampleDevicePluginImage, path, build, ""); err != nil {
			return nil, err
		}
	}
	return map[string]string{SampleDevicePluginImage: path}, nil
}

// buildSampleDevicePlugin is busybox with the plugin at /sampledeviceplugin
// and the real image's entrypoint (its flag is one the plugin ignores).
func buildSampleDevicePlugin(ctx context.Context, bin []byte) (v1.Image, error) {
	files := func(l *imagebuild.Layer) {
		l.File("sampledeviceplugin", 0o755, bin)
	}
	return onBusybox(ctx, files, func(cfg *v1.Config) {
		cfg.Entrypoint = []string{"/sampledeviceplugin", "-alsologtostderr"}
		cfg.Cmd = nil
	})
}

// devicePluginBinaries are the binaries the device plugin suite needs
// besides the cluster's: the plugin, and the kubelet for its column.
func devicePluginBinaries(agent Agent) []string {
	names := []string{AgnhostBinary, SampleDevicePluginBinary}
	if agent == AgentKubelet {
		names = append(names, KubeletBinary)
	}
	return names
}

// DevicePluginBinaries returns the directory of the binaries the device
// plugin suite needs on agent, building the missing ones.
func DevicePluginBinaries(ctx context.Context, progress io.Writer, agent Agent) (string, error) {
	return Binaries(ctx, progress, devicePluginBinaries(agent)...)
}

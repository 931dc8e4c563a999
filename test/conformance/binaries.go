package conformance

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/nodelet/nodelet/test/utils"
)

// The binaries hack/conformance.sh builds.
const (
	E2ETestBinary = "e2e.test"
	GinkgoBinary  = "ginkgo"
	KubeletBinary = "kubelet"
	AgnhostBinary = "agnhost"
	// SampleDevicePluginBinary is Kubernetes' sample device plugin
	// (test/images/sample-device-plugin), the device plugin suite's.
	SampleDevicePluginBinary = "sample-device-plugin"
)

// Binaries returns the directory holding the named binaries, building the
// missing ones with hack/conformance.sh (a no-op when they are cached; the
// first build takes many minutes). CONFORMANCE_BIN, when set to a directory
// that holds them all, is used as it is. The script's progress goes to
// progress when that is not nil.
func Binaries(ctx context.Context, progress io.Writer, names ...string) (string, error) {
	if dir := os.Getenv("CONFORMANCE_BIN"); dir != "" && utils.HasExecutables(dir, names...) {
		return dir, nil
	}
	out, err := utils.RunHackScript(ctx, progress, "conformance.sh", names...)
	if err != nil {
		return "", fmt.Errorf("building %v: %w", names, err)
	}
	dir, err := utils.BinDirOf(out, names...)
	if err != nil {
		return "", fmt.Errorf("building %v with hack/conformance.sh: %w", names, err)
	}
	return dir, nil
}

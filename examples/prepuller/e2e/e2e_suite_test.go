package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// suiteSetupTimeout covers a cold start: installing the Debian packages,
	// building the envtest binaries (minutes on two cores), the images and
	// the example's binary.
	suiteSetupTimeout = 20 * time.Minute
	// recheckInterval is the pre-puller's PREPULL_INTERVAL here.
	recheckInterval = 2 * time.Second
	// readyTimeout is how long the agent may take to register a Ready Node.
	readyTimeout = 60 * time.Second
	// pullTimeout is how long a pull from the loopback registry may take,
	// from the annotation's change (or the image's removal) on.
	pullTimeout = 30 * time.Second
	// reportTimeout is how long a condition or Event may take to show.
	reportTimeout = 30 * time.Second
	// offWindow is how long an image must stay unpulled while the
	// pre-puller is off: several intervals, and more than an annotation
	// change takes to be acted on when it is on.
	offWindow = 5 * recheckInterval
	// criTimeout bounds one CRI call of the test's own.
	criTimeout = 30 * time.Second
	// pollInterval is how often Eventually looks again.
	pollInterval = 100 * time.Millisecond
)

var (
	ctrd      *utils.Containerd
	apiServer *utils.APIServer
	registry  *utils.Registry
	// binary is the example built from this module.
	binary string
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "prepuller example e2e")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	moduleDir, err := filepath.Abs("..")
	Expect(err).NotTo(HaveOccurred())
	binary = filepath.Join(GinkgoT().TempDir(), "prepuller-nodelet")
	Expect(utils.BuildGoBinary(ctx, moduleDir, ".", binary)).To(Succeed(), "building the example")

	// Only the sandbox image: every other image comes from the registry.
	ctrd = utils.MustStartContainerd(ctx, utils.ContainerdOptions{Images: []string{utils.PauseImage}})
	apiServer = utils.MustStartAPIServer(ctx)
	registry = utils.MustStartRegistry(ctx, utils.RegistryOptions{})
	Expect(ctrd.AddInsecureRegistry(registry.Host())).To(Succeed())
}, NodeTimeout(suiteSetupTimeout))

var _ = JustAfterEach(func() {
	if CurrentSpecReport().Failed() && ctrd != nil {
		GinkgoWriter.Printf("containerd log (last 40 lines of %s):\n%s\n", ctrd.LogPath(), ctrd.LogTail(40))
	}
})

// runBinary runs the example with env added and returns its exit code and
// standard error.
func runBinary(ctx context.Context, env []string, args ...string) (int, string) {
	GinkgoHelper()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil {
		return 0, stderr.String()
	}
	var exit *exec.ExitError
	Expect(errors.As(err, &exit)).To(BeTrue(), "running %s: %v", binary, err)
	return exit.ExitCode(), stderr.String()
}

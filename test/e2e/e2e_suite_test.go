package e2e

import (
	"context"
	"fmt"
	"log"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"
	"k8s.io/klog/v2"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// suiteSetupTimeout covers a cold start: installing the Debian packages,
	// building the envtest binaries (minutes on two cores) and the images.
	suiteSetupTimeout = 20 * time.Minute
	// criTimeout bounds one CRI call.
	criTimeout = 30 * time.Second
	// containerTimeout is how long a short-lived container may take to run.
	containerTimeout = 30 * time.Second
	// apiTimeout bounds API server round trips in a spec.
	apiTimeout = 30 * time.Second
	// pollInterval is how often Eventually looks again.
	pollInterval = 100 * time.Millisecond
)

// runtimeSmokeLabel marks the few specs make test runs once more on the
// runtime that is not the default (RUNTIME=containerd1.6,
// -ginkgo.label-filter=runtime-smoke): the pod lifecycle, adoption after a
// restart, exec and logs, and what the runtime reports.
const runtimeSmokeLabel = "runtime-smoke"

var (
	ctrd      *utils.Containerd
	apiServer *utils.APIServer
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	// The CRI client's klog lines and the standard logger's (the API
	// server proxies) belong to the spec that caused them: shown with a
	// failure, not printed for every passing spec.
	klog.SetLogger(GinkgoLogr)
	log.SetOutput(GinkgoWriter)
	// controller-runtime's too (its clients and envtest): unset, it
	// printed a stack trace of its first use into every run's output.
	crlog.SetLogger(GinkgoLogr)
	RunSpecs(t, "nodelet e2e")
}

// make test runs the suite in two or more ginkgo processes: each has its
// own containerd and API server, and the first starts the builds.
var _ = SynchronizedBeforeSuite(func(ctx SpecContext) []byte {
	// The CSI sidecars, the kubelet and the add-ons build (minutes when
	// the cache is cold) while the specs wait on containers and
	// controllers. A spec in another process that needs one waits for the
	// build's lock.
	prefetch, stopPrefetch := context.WithCancel(context.Background())
	DeferCleanup(stopPrefetch)
	utils.PrefetchBuilds(prefetch)
	return nil
}, func(ctx SpecContext, _ []byte) {
	ctrd = utils.MustStartContainerd(ctx, utils.ContainerdOptions{})
	apiServer = utils.MustStartAPIServer(ctx)
}, NodeTimeout(suiteSetupTimeout))

// The containerd log is removed with its directory when the suite ends:
// show its end next to a failed spec.
var _ = JustAfterEach(func() {
	if CurrentSpecReport().Failed() && ctrd != nil {
		GinkgoWriter.Printf("containerd log (last 80 lines of %s):\n%s\n", ctrd.LogPath(), ctrd.LogTail(80))
	}
})

// With NODELET_E2E_TIMINGS set to a file name, the suite writes there how
// long each spec took, slowest first: where make test's time goes.
var _ = ReportAfterSuite("spec timings", func(r Report) {
	path := os.Getenv("NODELET_E2E_TIMINGS")
	if path == "" {
		return
	}
	specs := r.SpecReports.WithLeafNodeType(types.NodeTypeIt | types.NodeTypeSynchronizedBeforeSuite | types.NodeTypeAfterSuite)
	sort.Slice(specs, func(i, j int) bool { return specs[i].RunTime > specs[j].RunTime })
	var b strings.Builder
	fmt.Fprintf(&b, "suite %.1fs, %d specs\n", r.RunTime.Seconds(), len(specs))
	for _, s := range specs {
		name := s.FullText()
		if name == "" {
			name = s.LeafNodeType.String()
		}
		fmt.Fprintf(&b, "%8.1fs  %-7s %s\n", s.RunTime.Seconds(), s.State, name)
	}
	Expect(os.WriteFile(path, []byte(b.String()), 0o644)).To(Succeed())
})

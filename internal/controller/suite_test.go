package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/agent"
	"github.com/nodelet/nodelet/internal/controller"
	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/test/utils"
)

// Timings of the suite. The agents run with short frequencies so that the
// must-show bounds (twice the status update frequency, the renew interval)
// are seconds, not minutes.
const (
	statusUpdateFrequency = 2 * time.Second
	statusReportFrequency = time.Minute
	leaseDurationSeconds  = 4
	renewInterval         = time.Second // a quarter of leaseDurationSeconds

	// startTimeout bounds the start of an agent until its Node is Ready;
	// not a bound under test.
	startTimeout = 30 * time.Second
	// runtimeRecoveryTimeout bounds Ready coming back after containerd
	// restarts: the CRI connection redials with back-off.
	runtimeRecoveryTimeout = 30 * time.Second
	// apiServerDowntime is how long the API server is kept stopped.
	apiServerDowntime = 5 * time.Second
	// apiServerRecoveryTimeout bounds renewals resuming after the API server
	// is back: the lease back-off is capped at 7s.
	apiServerRecoveryTimeout = 20 * time.Second
	// stopTimeout bounds an agent's manager returning after cancel.
	stopTimeout = 40 * time.Second
	// runtimeCallTimeout bounds each CRI call of the agents under test.
	runtimeCallTimeout = 5 * time.Second
)

var (
	suiteCtx   context.Context
	apiServer  *utils.APIServer
	containerd *utils.Containerd
	admin      client.Client
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controllers Suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	suiteCtx = context.Background()

	apiServer = utils.MustStartAPIServer(ctx)
	var err error
	admin, err = apiServer.AdminClient()
	Expect(err).NotTo(HaveOccurred())
	containerd = utils.MustStartContainerd(ctx, utils.ContainerdOptions{})
}, NodeTimeout(5*time.Minute))

// nodeConfig returns a rest.Config authenticated as system:node:<name>.
func nodeConfig(name string) *rest.Config {
	GinkgoHelper()
	cfg, err := apiServer.NodeUserConfig(name)
	Expect(err).NotTo(HaveOccurred())
	return cfg
}

// restartAPIServer stops the API server (etcd keeps running) for downtime
// and starts it again on the same port with the same serving certificate.
func restartAPIServer(downtime time.Duration) {
	GinkgoHelper()
	Expect(apiServer.Restart(func() { time.Sleep(downtime) })).To(Succeed())
}

// testAgent is one nodelet manager running the node controller in this
// process, authenticated as its node.
type testAgent struct {
	name   string
	cfg    *v1alpha1.NodeletConfiguration
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// startAgent runs a manager for node name with the suite's frequencies,
// changed by mutate, against the suite's containerd.
func startAgent(name string, mutate ...func(*v1alpha1.NodeletConfiguration)) *testAgent {
	GinkgoHelper()
	root := GinkgoT().TempDir()
	links := root + "/containers" // never the machine's /var/log/containers
	cfg := &v1alpha1.NodeletConfiguration{
		NodeName:                  name,
		RootDir:                   root,
		ContainerLogLinksDir:      &links,
		NodeStatusUpdateFrequency: metav1.Duration{Duration: statusUpdateFrequency},
		NodeStatusReportFrequency: metav1.Duration{Duration: statusReportFrequency},
		NodeLeaseDurationSeconds:  leaseDurationSeconds,
		HealthzBindAddress:        "0",
		MetricsBindAddress:        "0",
	}
	for _, m := range mutate {
		m(cfg)
	}
	v1alpha1.SetDefaults(cfg)
	Expect(v1alpha1.Validate(cfg)).To(BeEmpty())

	mgr, err := agent.NewManager(nodeConfig(name), cfg)
	Expect(err).NotTo(HaveOccurred())
	rt, err := cri.Dial(suiteCtx, containerd.Endpoint(), "", cri.Options{NodeName: name, RuntimeRequestTimeout: runtimeCallTimeout})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(rt.Close)
	Expect(controller.Default.Setup(mgr, &controller.Deps{Config: cfg, Runtime: rt}, []string{"node"})).To(Succeed())

	ctx, cancel := context.WithCancel(suiteCtx)
	a := &testAgent{name: name, cfg: cfg, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(a.done)
		a.err = mgr.Start(ctx)
	}()
	DeferCleanup(a.stop)
	return a
}

// running says whether the agent's manager has not returned.
func (a *testAgent) running() bool {
	select {
	case <-a.done:
		return false
	default:
		return true
	}
}

func (a *testAgent) stop() {
	GinkgoHelper()
	a.cancel()
	Eventually(a.done).WithTimeout(stopTimeout).Should(BeClosed())
	Expect(a.err).NotTo(HaveOccurred())
}

// nodeName returns a node name no other spec uses.
func nodeName() string {
	return "node-" + utilrand.String(8)
}

// runManager starts mgr for the rest of the spec and stops it, checking
// that it stopped cleanly, when the spec ends.
func runManager(mgr ctrl.Manager) {
	GinkgoHelper()
	ctx, cancel := context.WithCancel(suiteCtx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	DeferCleanup(func() {
		cancel()
		Eventually(done).WithTimeout(stopTimeout).Should(BeClosed())
	})
}

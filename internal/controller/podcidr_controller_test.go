package controller_test

import (
	"context"
	"errors"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/agent"
	"github.com/nodelet/nodelet/internal/controller"
	"github.com/nodelet/nodelet/internal/cri"
)

// podCIDRTimeout bounds a pod CIDR reaching the runtime after the Node
// has it (an informer event and one CRI call; retries start at 200ms).
const podCIDRTimeout = 10 * time.Second

// podCIDRRuntime records the pod CIDRs it is sent; it fails the first
// failures calls. Only UpdateRuntimeConfig is implemented.
type podCIDRRuntime struct {
	cri.Runtime
	mu       sync.Mutex
	failures int
	calls    int
	sent     []string
}

func (r *podCIDRRuntime) UpdateRuntimeConfig(_ context.Context, c *runtimeapi.RuntimeConfig) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.failures > 0 {
		r.failures--
		return errors.New("runtime is starting")
	}
	r.sent = append(r.sent, c.GetNetworkConfig().GetPodCidr())
	return nil
}

func (r *podCIDRRuntime) Sent() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.sent...)
}

func (r *podCIDRRuntime) Calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// startPodCIDRAgent runs only the podcidr reconciler of node name against
// rt, with configured as the podCIDR.
func startPodCIDRAgent(name, configured string, rt cri.Runtime) {
	GinkgoHelper()
	cfg := &v1alpha1.NodeletConfiguration{
		NodeName:           name,
		RootDir:            GinkgoT().TempDir(),
		PodCIDR:            configured,
		HealthzBindAddress: "0",
		MetricsBindAddress: "0",
	}
	v1alpha1.SetDefaults(cfg)
	Expect(v1alpha1.Validate(cfg)).To(BeEmpty())
	mgr, err := agent.NewManager(nodeConfig(name), cfg)
	Expect(err).NotTo(HaveOccurred())
	Expect(controller.Default.Setup(mgr, &controller.Deps{Config: cfg, Runtime: rt}, []string{"podcidr"})).To(Succeed())
	runManager(mgr)
}

func createNode(ctx context.Context, name string, cidrs ...string) *corev1.Node {
	GinkgoHelper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDRs: cidrs}}
	if len(cidrs) > 0 {
		node.Spec.PodCIDR = cidrs[0]
	}
	Expect(admin.Create(ctx, node)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(admin.Delete(ctx, node))).To(Succeed())
	})
	return node
}

var _ = Describe("Pod CIDR controller", func() {
	It("hands the configured pod CIDR at once, then the Node's, each once", func(ctx SpecContext) {
		name := nodeName()
		rt := &podCIDRRuntime{}
		startPodCIDRAgent(name, "10.1.0.0/24", rt)
		Eventually(rt.Sent).WithTimeout(podCIDRTimeout).Should(Equal([]string{"10.1.0.0/24"}))

		node := createNode(ctx, name)
		Consistently(rt.Sent).WithTimeout(2*time.Second).Should(Equal([]string{"10.1.0.0/24"}),
			"a Node without pod CIDRs keeps the configured one")

		By("setting the Node's pod CIDRs (allowed once while empty)")
		node.Spec.PodCIDR = "10.248.7.0/24"
		node.Spec.PodCIDRs = []string{"10.248.7.0/24", "fd00:7::/64"}
		Expect(admin.Update(ctx, node)).To(Succeed())
		Eventually(rt.Sent).WithTimeout(podCIDRTimeout).Should(Equal([]string{"10.1.0.0/24", "10.248.7.0/24,fd00:7::/64"}))

		By("changing the Node otherwise")
		node.Labels = map[string]string{"example.com/touched": "true"}
		Expect(admin.Update(ctx, node)).To(Succeed())
		Consistently(rt.Sent).WithTimeout(2*time.Second).Should(HaveLen(2), "the same pod CIDRs are not sent again")

		By("re-creating the Node with other pod CIDRs")
		Expect(admin.Delete(ctx, node)).To(Succeed())
		createNode(ctx, name, "10.248.8.0/24")
		Eventually(rt.Sent).WithTimeout(podCIDRTimeout).Should(Equal([]string{"10.1.0.0/24", "10.248.7.0/24,fd00:7::/64", "10.248.8.0/24"}))
	})

	It("hands the configured pod CIDR with no API server configured, retrying until the runtime takes it", func() {
		cfg := &v1alpha1.NodeletConfiguration{
			NodeName:           nodeName(),
			RootDir:            GinkgoT().TempDir(),
			PodCIDR:            "10.1.0.0/24",
			HealthzBindAddress: "0",
			MetricsBindAddress: "0",
		}
		v1alpha1.SetDefaults(cfg)
		Expect(v1alpha1.Validate(cfg)).To(BeEmpty())
		mgr, err := agent.NewStandaloneManager(cfg)
		Expect(err).NotTo(HaveOccurred())
		rt := &podCIDRRuntime{failures: 2}
		local := &agent.Local{}
		Expect(controller.Default.Setup(mgr, &controller.Deps{Config: cfg, Runtime: rt, Local: local}, []string{"podcidr"})).To(Succeed())
		ctx, cancel := context.WithCancel(suiteCtx)
		done := make(chan struct{})
		go func() { defer GinkgoRecover(); _ = agent.Run(ctx, local, mgr, cfg.NodeName); close(done) }()
		DeferCleanup(func() {
			cancel()
			Eventually(done).WithTimeout(stopTimeout).Should(BeClosed())
		})
		Eventually(rt.Sent).WithTimeout(podCIDRTimeout).Should(Equal([]string{"10.1.0.0/24"}))
		Consistently(rt.Calls).WithTimeout(time.Second).Should(Equal(3), "two failures, then one success, then nothing")
	})

	It("retries with back-off until the runtime takes the pod CIDR, and sends it again after a restart", func(ctx SpecContext) {
		name := nodeName()
		createNode(ctx, name, "10.248.9.0/24")
		rt := &podCIDRRuntime{failures: 3}
		startPodCIDRAgent(name, "", rt)
		Eventually(rt.Sent).WithTimeout(podCIDRTimeout).Should(Equal([]string{"10.248.9.0/24"}))
		Expect(rt.Calls()).To(Equal(4), "three failures, then one success")
		Consistently(rt.Calls).WithTimeout(2*time.Second).Should(Equal(4), "nothing is sent once the runtime has it")

		By("starting nodelet again, on a runtime that may have restarted too")
		again := &podCIDRRuntime{}
		startPodCIDRAgent(name, "", again)
		Eventually(again.Sent).WithTimeout(podCIDRTimeout).Should(Equal([]string{"10.248.9.0/24"}))
	})
})

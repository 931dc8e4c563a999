package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/test/utils"
)

// plegNode is the node the relister's specs' nodelet runs.
const plegNode = "e2e-pleg"

var _ = Describe("The relister with containerd's events", Ordered, func() {
	// A containerd of its own: the specs restart it.
	var runtime *utils.Containerd
	BeforeAll(func(ctx SpecContext) {
		var err error
		runtime, err = utils.StartContainerd(ctx, utils.ContainerdOptions{})
		if runtime != nil {
			DeferCleanup(runtime.Stop)
		}
		Expect(err).NotTo(HaveOccurred(), "starting containerd")
	})
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: plegNode, API: apiServer, Containerd: runtime}
	})

	metric := func(ctx SpecContext, g Gomega, name string) float64 {
		metrics, err := env.Nodelet.Metrics(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		return metricValue(metrics, name)
	}
	// exitsSoon runs a pod whose container exits with 3 about 3 s after it
	// runs and checks that the pod fails well within the 10 s the relister
	// waits between relists when no change is reported: containerd's event
	// of the exit was seen.
	exitsSoon := func(ctx SpecContext, name string) {
		GinkgoHelper()
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, name, plegNode, "sh", "-c", "sleep 3; exit 3")
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(utils.GetPod(ctx, env.Admin, ns, name)(g).Status.Phase).To(Equal(corev1.PodRunning))
		}).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		Eventually(func(g Gomega) {
			p := utils.GetPod(ctx, env.Admin, ns, name)(g)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			t := p.Status.ContainerStatuses[0].State.Terminated
			g.Expect(t).NotTo(BeNil())
			g.Expect(t.ExitCode).To(Equal(int32(3)))
			g.Expect(t.Reason).To(Equal("Error"))
		}).WithTimeout(7 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	}

	It("subscribes to containerd's events and reports a container's exit without waiting for a periodic relist", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			g.Expect(metric(ctx, g, "kubelet_evented_pleg_connection_success_count")).To(BeNumerically(">=", 1))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		exitsSoon(ctx, "exits")
		Expect(metric(ctx, Default, "kubelet_evented_pleg_connection_error_count")).To(Equal(0.0), "the subscription held")
	})

	It("subscribes again after containerd restarts", func(ctx SpecContext) {
		Expect(runtime.StopProcess()).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(metric(ctx, g, "kubelet_evented_pleg_connection_error_count")).To(BeNumerically(">=", 1))
		}).WithTimeout(30*time.Second).Should(Succeed(), "the stream's end counted")
		Expect(runtime.StartProcess(ctx)).To(Succeed())
		// Subscribing again backs off up to 30 s.
		Eventually(func(g Gomega) {
			g.Expect(metric(ctx, g, "kubelet_evented_pleg_connection_success_count")).To(BeNumerically(">=", 2))
		}).WithTimeout(60 * time.Second).Should(Succeed())
		exitsSoon(ctx, "exits-after-restart")
	})
})

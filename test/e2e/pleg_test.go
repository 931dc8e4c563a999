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
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: plegNode, API: apiServer, Containerd: ctrd}
	})

	It("subscribes to containerd's events and reports a container's exit without waiting for a periodic relist", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			metrics, err := env.Nodelet.Metrics(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(metricValue(metrics, "kubelet_evented_pleg_connection_success_count")).To(BeNumerically(">=", 1))
		}).WithTimeout(30 * time.Second).Should(Succeed())

		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "exits", plegNode, "sh", "-c", "sleep 3; exit 3")
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(utils.GetPod(ctx, env.Admin, ns, "exits")(g).Status.Phase).To(Equal(corev1.PodRunning))
		}).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

		// The container exits within 3 s of running. At rest the relister
		// lists the runtime every 10 s only: a pod that fails well before
		// that was reported by containerd's event.
		Eventually(func(g Gomega) {
			p := utils.GetPod(ctx, env.Admin, ns, "exits")(g)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			t := p.Status.ContainerStatuses[0].State.Terminated
			g.Expect(t).NotTo(BeNil())
			g.Expect(t.ExitCode).To(Equal(int32(3)))
			g.Expect(t.Reason).To(Equal("Error"))
		}).WithTimeout(7 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

		metrics, err := env.Nodelet.Metrics(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(metricValue(metrics, "kubelet_evented_pleg_connection_error_count")).To(Equal(0.0), "the subscription held")
	})
})

package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// podStartTimeout bounds a pod going Running from creation.
	podStartTimeout = 60 * time.Second
	// podNode is the node the pod specs' nodelet runs.
	podNode = "e2e-pods"
)

var _ = Describe("Pod lifecycle", Ordered, func() {
	var (
		admin   client.Client
		nodelet *utils.Nodelet
	)
	BeforeAll(func(ctx SpecContext) {
		var err error
		admin, err = apiServer.AdminClient()
		Expect(err).NotTo(HaveOccurred())
		nodelet, err = utils.StartNodelet(ctx, utils.NodeletOptions{NodeName: podNode, API: apiServer, Containerd: ctrd})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(nodelet.Cleanup)
	})
	JustAfterEach(func() {
		if CurrentSpecReport().Failed() && nodelet != nil {
			GinkgoWriter.Printf("nodelet log:\n%s\n", nodelet.LogTail(120))
		}
	})

	It("runs a busybox pod to Running and Ready", func(ctx SpecContext) {
		ns := newNamespace(ctx, admin)
		pod := busyboxPod(ns, "sleeper", podNode, "sleep", "3600")
		Expect(admin.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			p := getPod(ctx, admin, ns, "sleeper")(g)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(isReady(p)).To(BeTrue())
			g.Expect(p.Status.PodIP).NotTo(BeEmpty())
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(p.Status.ContainerStatuses[0].ContainerID).To(HavePrefix("containerd://"))
		}).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(Succeed())
	})
})

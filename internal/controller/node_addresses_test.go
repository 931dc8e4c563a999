package controller_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/api/v1alpha1"
)

var _ = Describe("Node addresses", func() {
	It("keeps an address another client added across nodelet's status writes", func(ctx SpecContext) {
		name := nodeName()
		startAgent(name, func(c *v1alpha1.NodeletConfiguration) {
			c.NodeStatusReportFrequency.Duration = statusUpdateFrequency
		})
		node := waitReady(name, startTimeout)
		internal := address(node, corev1.NodeInternalIP)
		Expect(internal).NotTo(BeEmpty())

		By("adding an ExternalIP to the status as a cloud controller would")
		external := corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.7"}
		patch := client.MergeFrom(node.DeepCopy())
		node.Status.Addresses = append(node.Status.Addresses, external)
		Expect(admin.Status().Patch(ctx, node, patch)).To(Succeed())

		waitStatusWrites(name, 2, func(g Gomega, n *corev1.Node) {
			g.Expect(n.Status.Addresses).To(ContainElement(external), "the other client's address survives")
			g.Expect(n.Status.Addresses).To(ContainElement(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: internal}))
			g.Expect(n.Status.Addresses).To(ContainElement(corev1.NodeAddress{Type: corev1.NodeHostName, Address: name}))
		})
	})
})

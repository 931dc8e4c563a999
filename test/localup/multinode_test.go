package localup

import (
	"fmt"
	"net/netip"
	"strings"
	"syscall"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

var _ = Describe("make run NODES=2", Ordered, func() {
	var (
		bin   string
		run   *localupRun
		admin client.Client
	)

	BeforeAll(func(ctx SpecContext) {
		bin = buildLocalup(ctx, GinkgoT().TempDir())
		run = startLocalup(ctx, bin, GinkgoT().TempDir(), "NODES=2")
		admin = run.adminClient()
	}, NodeTimeout(readyTimeout))

	It("runs two Ready nodes, each in a network namespace of its own, and prints how to reach them", func(ctx SpecContext) {
		nodes := &corev1.NodeList{}
		Expect(admin.List(ctx, nodes)).To(Succeed())
		Expect(nodes.Items).To(HaveLen(2))
		st := run.state()
		Expect(st.Networks).To(HaveLen(1))
		for _, node := range nodes.Items {
			Expect(utils.NodeReady(&node)).To(BeTrue(), "node %s is not Ready", node.Name)
			Expect(node.Spec.PodCIDR).NotTo(BeEmpty(), "node %s has no pod subnet", node.Name)
		}
		for i := 1; i <= 2; i++ {
			Expect(run.out.String()).To(ContainSubstring(fmt.Sprintf("nsenter --net=/run/netns/nlnet%d-node%d", st.Networks[0], i)))
		}
		Expect(run.out.String()).To(ContainSubstring("export KUBECONFIG=" + run.kubeconfig()))
	})

	It("runs the demo's pods on the nodes' pod subnets and serves their logs", func(ctx SpecContext) {
		pods := &corev1.PodList{}
		Expect(admin.List(ctx, pods, client.InNamespace("demo"))).To(Succeed())
		Expect(pods.Items).NotTo(BeEmpty())
		for _, p := range pods.Items {
			node := &corev1.Node{}
			Expect(admin.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node)).To(Succeed())
			subnet, err := netip.ParsePrefix(node.Spec.PodCIDR)
			Expect(err).NotTo(HaveOccurred(), "pod subnet of node %s", node.Name)
			ip, err := netip.ParseAddr(p.Status.PodIP)
			Expect(err).NotTo(HaveOccurred(), "IP of pod %s", p.Name)
			Expect(subnet.Contains(ip)).To(BeTrue(), "pod %s has IP %s, outside its node %s's pod subnet %s", p.Name, ip, node.Name, subnet)
		}
		// The API server reaches every node's API on the node network.
		for _, p := range pods.Items {
			out, err := run.kubectl(ctx, "-n", "demo", "logs", p.Name)
			Expect(err).NotTo(HaveOccurred(), "kubectl logs of %s on %s: %s", p.Name, p.Spec.NodeName, out)
		}
	})

	It("runs kube-proxy on every node and CoreDNS", func(ctx SpecContext) {
		pods := &corev1.PodList{}
		Expect(admin.List(ctx, pods, client.InNamespace("kube-system"))).To(Succeed())
		proxies := map[string]bool{}
		coreDNS := 0
		for _, p := range pods.Items {
			Expect(utils.PodReady(&p)).To(BeTrue(), "pod %s is not Ready", p.Name)
			switch {
			case strings.HasPrefix(p.Name, "kube-proxy-"):
				proxies[p.Spec.NodeName] = true
			case strings.HasPrefix(p.Name, "coredns-"):
				coreDNS++
			}
		}
		Expect(proxies).To(HaveLen(2))
		Expect(coreDNS).To(BeNumerically(">", 0))
	})

	It("cleans up with run-down after a run that was SIGKILLed, network namespaces and bridge included", func(ctx SpecContext) {
		st := run.state()
		Expect(run.cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
		Eventually(run.done).WithContext(ctx).WithTimeout(stopTimeout).Should(BeClosed())
		out := run.down(ctx)
		Expect(lines(out, "==>")).To(ContainElement(ContainSubstring("cleaning up after the run of pid")))
		expectNothingLeft(st, run.stateDir)
	}, SpecTimeout(stopTimeout))
})

package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// podCIDRNode is the node the pod CIDR specs' nodelet runs.
	podCIDRNode = "e2e-podcidr"
	// podCIDRReadyTimeout bounds the Node turning Ready once it has its
	// pod CIDR: one CRI call, containerd loading the CNI config it wrote,
	// and a node status write (asked for a second after the call).
	podCIDRReadyTimeout = 30 * time.Second
	// podCIDRPodTimeout covers a sandbox and a container start.
	podCIDRPodTimeout = 60 * time.Second
	// podCIDRHostPortBase plus the instance's number is the host port of
	// the hostPort spec: apart from other specs' and other runs' ports.
	podCIDRHostPortBase = 18200
	// updatingPodCIDR is the message nodelet logs when the runtime took a
	// pod CIDR, the kubelet's.
	updatingPodCIDR = "Updating Pod CIDR"
	// networkNotReadyHeld is how the NetworkNotReady Event of a pod held
	// for the network starts (the kubelet's message, containerd's reason).
	networkNotReadyHeld = "network is not ready: container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:"
	// podCIDRHoldPeriod is how long a held pod is watched staying held:
	// a few of its retries, each a second apart at most.
	podCIDRHoldPeriod = 3 * time.Second
)

var _ = Describe("Pod CIDR from the Node", Ordered, func() {
	// A containerd of its own: the suite's has a fixed CNI config, this one
	// writes its CNI config only once it is sent the pod CIDR.
	var podCtrd *utils.Containerd
	BeforeAll(func(ctx SpecContext) {
		podCtrd = utils.MustStartContainerd(ctx, utils.ContainerdOptions{PodCIDRFromRuntime: true})
	}, NodeTimeout(suiteSetupTimeout))
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: podCIDRNode, API: apiServer, Containerd: podCtrd}
	})
	JustAfterEach(func() {
		if CurrentSpecReport().Failed() && podCtrd != nil {
			GinkgoWriter.Printf("containerd log (last 60 lines of %s):\n%s\n", podCtrd.LogPath(), podCtrd.LogTail(60))
		}
	})

	var ns string
	var hostIP net.IP
	BeforeAll(func(ctx SpecContext) {
		ns = utils.NewNamespace(ctx, env.Admin)
		var err error
		hostIP, err = podCtrd.HostIP()
		Expect(err).NotTo(HaveOccurred())
	})
	// The pods go through nodelet, which stops their containers, before
	// nodelet and containerd are stopped.
	AfterAll(func(ctx SpecContext) {
		for _, name := range []string{"host-network", "early", "pod-network", "host-port"} {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			Expect(client.IgnoreNotFound(env.Admin.Delete(ctx, pod, client.GracePeriodSeconds(1)))).To(Succeed())
		}
		Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(env.Admin.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty())
		}).WithTimeout(podCIDRPodTimeout).WithPolling(pollInterval).Should(Succeed())
	})
	readyCondition := func(g Gomega, ctx SpecContext) corev1.NodeCondition {
		node := &corev1.Node{}
		g.Expect(env.Admin.Get(ctx, client.ObjectKey{Name: podCIDRNode}, node)).To(Succeed())
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c
			}
		}
		g.Expect(node.Status.Conditions).To(ContainElement(HaveField("Type", corev1.NodeReady)))
		return corev1.NodeCondition{}
	}
	running := func(ctx SpecContext, pod *corev1.Pod) *corev1.Pod {
		GinkgoHelper()
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		return utils.WaitForPod(ctx, env.Admin, ns, pod.Name, podCIDRPodTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(utils.PodReady(p)).To(BeTrue(), "pod %s ready", pod.Name)
		})
	}
	// events returns the Events of the pod named name by reason.
	events := func(g Gomega, ctx SpecContext, name string) map[string]corev1.Event {
		list := &corev1.EventList{}
		g.Expect(env.Admin.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		out := map[string]corev1.Event{}
		for _, e := range list.Items {
			if e.InvolvedObject.Name == name {
				out[e.Reason] = e
			}
		}
		return out
	}
	// held checks that the pod named name waits for the network: Pending,
	// its container waiting in ContainerCreating, and never tried to
	// create its sandbox.
	held := func(g Gomega, ctx SpecContext, name string) {
		p := utils.GetPod(ctx, env.Admin, ns, name)(g)
		g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
		g.Expect(p.Status.ContainerStatuses).To(ConsistOf(HaveField("State.Waiting.Reason", "ContainerCreating")))
		g.Expect(events(g, ctx, name)).NotTo(HaveKey("FailedCreatePodSandBox"))
	}
	updates := func() int {
		data, err := os.ReadFile(env.Nodelet.LogPath)
		Expect(err).NotTo(HaveOccurred())
		return strings.Count(string(data), updatingPodCIDR)
	}

	It("reports the node not ready while the runtime waits for its pod CIDR, and runs host-network pods meanwhile", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			c := readyCondition(g, ctx)
			g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring("container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady"))
		}).WithTimeout(podCIDRReadyTimeout).WithPolling(pollInterval).Should(Succeed())

		pod := utils.BusyboxPod(ns, "host-network", podCIDRNode, "sleep", "3600")
		pod.Spec.HostNetwork = true
		p := running(ctx, pod)
		Expect(p.Status.PodIP).To(Equal(hostIP.String()), "a host-network pod has the node's IP")
		Expect(env.Admin.Create(ctx, utils.BusyboxPod(ns, "early", podCIDRNode, "sleep", "3600"))).To(Succeed())
		By("holding a pod on the pod network with NetworkNotReady Events, retried, never trying its sandbox")
		Eventually(func(g Gomega) {
			held(g, ctx, "early")
			e, ok := events(g, ctx, "early")["NetworkNotReady"]
			g.Expect(ok).To(BeTrue(), "NetworkNotReady Event")
			g.Expect(e.Type).To(Equal(corev1.EventTypeWarning))
			g.Expect(e.Message).To(HavePrefix(networkNotReadyHeld))
			g.Expect(e.Count).To(BeNumerically(">=", 2), "the held pod is tried again")
		}).WithTimeout(podCIDRReadyTimeout).WithPolling(pollInterval).Should(Succeed())
		Consistently(func(g Gomega) { held(g, ctx, "early") }).
			WithTimeout(podCIDRHoldPeriod).WithPolling(pollInterval).Should(Succeed())
		Expect(readyCondition(Default, ctx).Status).To(Equal(corev1.ConditionFalse), "nothing handed the runtime a pod CIDR yet")
		Expect(updates()).To(BeZero())
	})

	It("becomes Ready once the Node has its pod CIDR, and gives pods IPs in it", func(ctx SpecContext) {
		node := &corev1.Node{}
		Expect(env.Admin.Get(ctx, client.ObjectKey{Name: podCIDRNode}, node)).To(Succeed())
		orig := node.DeepCopy()
		cidr := podCtrd.Subnet.String()
		node.Spec.PodCIDR, node.Spec.PodCIDRs = cidr, []string{cidr}
		Expect(env.Admin.Patch(ctx, node, client.MergeFrom(orig))).To(Succeed(), "set the pod CIDR, allowed once while empty")

		Eventually(func(g Gomega) {
			g.Expect(readyCondition(g, ctx).Status).To(Equal(corev1.ConditionTrue))
		}).WithTimeout(podCIDRReadyTimeout).WithPolling(pollInterval).Should(Succeed())
		Expect(env.Nodelet.LogTail(200)).To(ContainSubstring(`newPodCIDR="` + cidr + `"`))
		Expect(updates()).To(Equal(1))

		p := running(ctx, utils.BusyboxPod(ns, "pod-network", podCIDRNode, "sleep", "3600"))
		ip := net.ParseIP(p.Status.PodIP)
		Expect(ip).NotTo(BeNil(), "pod IP %q", p.Status.PodIP)
		Expect(podCtrd.Subnet.Contains(ip)).To(BeTrue(), "pod IP %s outside the Node's pod CIDR %s", ip, cidr)
		Expect(p.Status.PodIPs).To(ConsistOf(corev1.PodIP{IP: p.Status.PodIP}))
		Consistently(updates).WithTimeout(2*time.Second).Should(Equal(1), "the same pod CIDR is sent once")

		early := utils.WaitForPod(ctx, env.Admin, ns, "early", podCIDRPodTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(utils.PodReady(p)).To(BeTrue(), "the pod created while the network waited")
		})
		Expect(podCtrd.Subnet.Contains(net.ParseIP(early.Status.PodIP))).To(BeTrue(), "pod IP %s", early.Status.PodIP)
		Expect(events(Default, ctx, "early")).NotTo(HaveKey("FailedCreatePodSandBox"), "the held pod's sandbox waited for the network")
		host := utils.GetPod(ctx, env.Admin, ns, "host-network")(Default)
		Expect(utils.PodReady(host)).To(BeTrue(), "the host-network pod keeps running")
		Expect(host.Status.ContainerStatuses[0].RestartCount).To(BeZero())
	})

	It("serves a hostPort pod on the node's IP", func(ctx SpecContext) {
		port := podCIDRHostPortBase + int(podCtrd.Subnet.IP.To4()[2])
		pod := utils.BusyboxPod(ns, "host-port", podCIDRNode, "sh", "-c",
			"mkdir -p /www && echo served-through-host-port > /www/index.html && exec httpd -f -p 8080 -h /www")
		pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: int32(port)}}
		p := running(ctx, pod)
		Expect(podCtrd.Subnet.Contains(net.ParseIP(p.Status.PodIP))).To(BeTrue())

		url := fmt.Sprintf("http://%s/", net.JoinHostPort(hostIP.String(), fmt.Sprint(port)))
		httpc := &http.Client{Timeout: 2 * time.Second}
		Eventually(func(g Gomega) string {
			resp, err := httpc.Get(url)
			g.Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			g.Expect(err).NotTo(HaveOccurred())
			return string(body)
		}).WithTimeout(podCIDRPodTimeout).WithPolling(pollInterval).Should(ContainSubstring("served-through-host-port"))
	})

	It("hands the pod CIDR to the runtime again after a restart", func(ctx SpecContext) {
		Expect(env.Nodelet.Stop()).To(Succeed())
		Expect(env.Nodelet.Restart(ctx)).To(Succeed())
		Eventually(updates).WithTimeout(podCIDRReadyTimeout).WithPolling(pollInterval).Should(Equal(2))
		Eventually(func(g Gomega) {
			g.Expect(readyCondition(g, ctx).Status).To(Equal(corev1.ConditionTrue))
		}).WithTimeout(podCIDRReadyTimeout).WithPolling(pollInterval).Should(Succeed())
	})
})

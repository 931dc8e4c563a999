package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// clusterStartTimeout covers building the add-on images (minutes when
	// the build cache is cold), n containerds importing their images and n
	// nodelets joining by TLS bootstrap on two shared cores.
	clusterStartTimeout = addonsBuildTimeout + 10*time.Minute
	// multiNodePodTimeout bounds a pod's start and a cross-node request.
	multiNodePodTimeout = 2 * time.Minute
	// webPort is where utils.WebImage listens.
	webPort = 8080
	// heavyLabel marks specs that make test leaves out: they run only when
	// a label filter selects them (-ginkgo.label-filter=heavy).
	heavyLabel = "heavy"
)

var _ = Describe("Multi-node cluster", func() {
	Context("of two nodes", Ordered, func() {
		multiNodeSpecs(2)
	})

	Context("of three nodes", Ordered, Label(heavyLabel), func() {
		BeforeAll(func() {
			if !strings.Contains(GinkgoLabelFilter(), heavyLabel) {
				Skip("a heavy spec: run it with -ginkgo.label-filter=" + heavyLabel)
			}
		})
		multiNodeSpecs(3)
	})

	It("cleans up the network a killed run left", func(ctx SpecContext) {
		nw, err := utils.StartNodeNetwork()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(nw.Stop)
		node, err := nw.AddNode(1)
		Expect(err).NotTo(HaveOccurred())
		_, cidr, _ := net.ParseCIDR("10.244.77.0/24")
		Expect(nw.SetPodCIDR(1, cidr)).To(Succeed())
		sleeper := node.Nsenter("sleep", "600")
		Expect(sleeper.Start()).To(Succeed())
		go func() { _ = sleeper.Wait() }()
		// nsenter joins the namespace, then becomes sleep.
		Eventually(func(g Gomega) {
			comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", sleeper.Process.Pid))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strings.TrimSpace(string(comm))).To(Equal("sleep"))
		}).WithTimeout(10 * time.Second).Should(Succeed())

		By("letting go of the network's slot as a killed process would")
		nw.Abandon()
		cleaned, err := utils.CleanupNodeNetworks()
		Expect(err).NotTo(HaveOccurred())
		Expect(cleaned).To(ContainElement(nw.N))
		expectNetworkGone(nw, []string{cidr.String()})
		Eventually(func() error { return sleeper.Process.Signal(syscall.Signal(0)) }).
			WithTimeout(10*time.Second).ShouldNot(Succeed(), "the process in the node's namespace survived")
	})
})

// multiNodeSpecs are the specs of a cluster of n nodes: every node Ready
// with a pod subnet of its own, pods reaching each other across nodes by
// pod IP, and nothing left on the machine after Stop.
func multiNodeSpecs(n int) {
	var (
		cluster *utils.Cluster
		admin   client.Client
		ns      string
		webIPs  map[int]string
	)

	BeforeAll(func(ctx SpecContext) {
		ns = fmt.Sprintf("multinode-%d", n)
		cluster, admin = startTestCluster(ctx, n, fmt.Sprintf("mn%d", GinkgoParallelProcess()), ns)
	}, NodeTimeout(clusterStartTimeout))

	AfterEach(func() { printClusterLogsOnFailure(cluster, 40) })

	It("has every node Ready with a pod subnet of its own", func(ctx SpecContext) {
		seen := map[string]string{}
		for _, node := range cluster.Nodes {
			got := &corev1.Node{}
			Expect(admin.Get(ctx, client.ObjectKey{Name: node.Name}, got)).To(Succeed())
			Expect(utils.NodeReady(got)).To(BeTrue(), "node %s is not Ready", node.Name)
			Expect(got.Spec.PodCIDR).NotTo(BeEmpty(), "node %s has no pod subnet", node.Name)
			Expect(seen).NotTo(HaveKey(got.Spec.PodCIDR), "nodes %s and %s share pod subnet %s", seen[got.Spec.PodCIDR], node.Name, got.Spec.PodCIDR)
			seen[got.Spec.PodCIDR] = node.Name
			Expect(got.Status.Addresses).To(ContainElement(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: node.IP.String()}))
		}
	})

	It("serves the API on the node network with a certificate naming the kubernetes Service", func(ctx SpecContext) {
		u, err := url.Parse(cluster.API.Config.Host)
		Expect(err).NotTo(HaveOccurred())
		host := u.Host
		Expect(u.Hostname()).To(Equal(cluster.Network.HostIP.String()))
		pool := x509.NewCertPool()
		Expect(pool.AppendCertsFromPEM(cluster.API.Config.CAData)).To(BeTrue())
		conn, err := tls.Dial("tcp", host, &tls.Config{RootCAs: pool, ServerName: "kubernetes.default.svc", MinVersion: tls.VersionTLS12})
		Expect(err).NotTo(HaveOccurred())
		defer conn.Close()
		cert := conn.ConnectionState().PeerCertificates[0]
		for _, name := range []string{"10.0.0.1", "127.0.0.1", cluster.Network.HostIP.String(), "localhost", "kubernetes",
			"kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"} {
			Expect(cert.VerifyHostname(name)).To(Succeed(), "the serving certificate does not name %s", name)
		}
	})

	It("runs pods with addresses of their node's pod subnet", func(ctx SpecContext) {
		webIPs = map[int]string{}
		for _, node := range cluster.Nodes {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%d", node.Index),
					Labels: map[string]string{"app": fmt.Sprintf("web-%d", node.Index)}},
				Spec: corev1.PodSpec{
					NodeName:   node.Name,
					Containers: []corev1.Container{{Name: "web", Image: utils.WebImage, ImagePullPolicy: corev1.PullNever}},
				},
			}
			Expect(admin.Create(ctx, pod)).To(Succeed())
		}
		for _, node := range cluster.Nodes {
			got := &corev1.Node{}
			Expect(admin.Get(ctx, client.ObjectKey{Name: node.Name}, got)).To(Succeed())
			_, subnet, err := net.ParseCIDR(got.Spec.PodCIDR)
			Expect(err).NotTo(HaveOccurred())
			pod := &corev1.Pod{}
			Eventually(func(g Gomega) {
				g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("web-%d", node.Index)}, pod)).To(Succeed())
				g.Expect(utils.PodReady(pod)).To(BeTrue(), "pod %s is not Ready: %+v", pod.Name, pod.Status)
			}).WithTimeout(multiNodePodTimeout).Should(Succeed())
			Expect(subnet.Contains(net.ParseIP(pod.Status.PodIP))).To(BeTrue(),
				"pod %s on %s has IP %s, outside the node's pod subnet %s", pod.Name, node.Name, pod.Status.PodIP, subnet)
			webIPs[node.Index] = pod.Status.PodIP
		}
	})

	It("lets a pod on one node reach a pod on another by pod IP", func(ctx SpecContext) {
		Expect(webIPs).To(HaveLen(n))
		for _, from := range cluster.Nodes {
			for _, to := range cluster.Nodes {
				if from.Index == to.Index {
					continue
				}
				name := fmt.Sprintf("wget-%d-to-%d", from.Index, to.Index)
				page := fmt.Sprintf("http://%s/", net.JoinHostPort(webIPs[to.Index], fmt.Sprint(webPort)))
				pod := utils.BusyboxPod(ns, name, from.Name, utils.FetchCommand(page)...)
				// Again on failure: a request may race the routes.
				pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
				Expect(admin.Create(ctx, pod)).To(Succeed())
				Eventually(func(g Gomega) {
					g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
					g.Expect(pod.Status.Phase).To(Equal(corev1.PodSucceeded),
						"a pod on %s fetching %s from %s: %+v", from.Name, page, to.Name, pod.Status.ContainerStatuses)
				}).WithTimeout(multiNodePodTimeout).Should(Succeed())
			}
		}
	})

	It("lets pods reach the API server where the kubernetes Service's endpoints point", func(ctx SpecContext) {
		slice := &discoveryv1.EndpointSlice{}
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "kubernetes"}, slice)).To(Succeed())
		Expect(slice.Endpoints).To(HaveLen(1))
		Expect(slice.Endpoints[0].Addresses).To(ConsistOf(cluster.Network.HostIP.String()))
		Expect(slice.Ports).To(HaveLen(1))
		port := fmt.Sprint(*slice.Ports[0].Port)
		for _, node := range cluster.Nodes {
			// A TCP connection: the API server closes it at the client's
			// EOF, and nc fails when it cannot connect.
			pod := utils.BusyboxPod(ns, fmt.Sprintf("apiserver-from-%d", node.Index), node.Name,
				"sh", "-c", "nc "+cluster.Network.HostIP.String()+" "+port+" </dev/null")
			pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			Expect(admin.Create(ctx, pod)).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
				g.Expect(pod.Status.Phase).To(Equal(corev1.PodSucceeded), "%+v", pod.Status.ContainerStatuses)
			}).WithTimeout(multiNodePodTimeout).Should(Succeed())
		}
	})

	It("lets pods reach the API server through the kubernetes Service (kube-proxy)", func(ctx SpecContext) {
		for _, node := range cluster.Nodes {
			pod := utils.BusyboxPod(ns, fmt.Sprintf("service-from-%d", node.Index), node.Name,
				"sh", "-c", "nc "+utils.KubernetesServiceIP.String()+" 443 </dev/null")
			expectSucceeds(ctx, admin, pod)
		}
	})

	It("runs kube-proxy beside nodelet on every node, each serving its own metrics", func(ctx SpecContext) {
		cs, err := kubernetes.NewForConfig(cluster.API.Config)
		Expect(err).NotTo(HaveOccurred())
		for _, node := range cluster.Nodes {
			// kube-proxy's on its default address in the node's network,
			// where nodelet runs with its default configuration.
			Eventually(func(g Gomega) {
				out, err := exec.CommandContext(ctx, "nsenter", "--net="+node.Net.NetNSPath(),
					"curl", "-sS", "--max-time", "5", "http://127.0.0.1:10249/metrics").CombinedOutput()
				g.Expect(err).NotTo(HaveOccurred(), "%s", out)
				g.Expect(string(out)).To(ContainSubstring("kubeproxy_sync_proxy_rules_duration_seconds"))
				g.Expect(string(out)).NotTo(ContainSubstring("kubelet_running_pods"))
			}).WithContext(ctx).WithTimeout(multiNodePodTimeout).Should(Succeed())
			// nodelet's on the node API, as the kubelet serves them.
			raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node.Name, "proxy", "metrics").DoRaw(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(string(raw)).To(ContainSubstring(`kubelet_node_name{node="` + node.Name + `"} 1`))
			Expect(string(raw)).NotTo(ContainSubstring("kubeproxy_"))
		}
	})

	It("resolves Service names through the cluster DNS (CoreDNS)", func(ctx SpecContext) {
		for _, node := range cluster.Nodes {
			pod := utils.BusyboxPod(ns, fmt.Sprintf("dns-from-%d", node.Index), node.Name,
				"sh", "-c", "nslookup kubernetes.default.svc."+utils.DefaultClusterDomain+" | grep -q 'Address: *"+utils.KubernetesServiceIP.String()+"$'")
			expectSucceeds(ctx, admin, pod)
		}
	})

	It("lets a pod on one node reach a pod on another through a Service's name", func(ctx SpecContext) {
		last := cluster.Nodes[len(cluster.Nodes)-1]
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": fmt.Sprintf("web-%d", last.Index)},
				Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(webPort)}},
			},
		}
		Expect(admin.Create(ctx, svc)).To(Succeed())
		pod := utils.BusyboxPod(ns, "service-by-name", cluster.Nodes[0].Name,
			utils.FetchCommand("http://web."+ns+".svc."+utils.DefaultClusterDomain+"/")...)
		expectSucceeds(ctx, admin, pod)
	})

	It("answers a NodePort Service on every node's address, from the host and from a pod", func(ctx SpecContext) {
		expectNodePortServes(ctx, cluster, admin, ns, "nodeport", cluster.Nodes[0].Name)
	})

	It("makes a node NotReady when its nodelet stops, and Ready when it starts again", func(ctx SpecContext) {
		last := cluster.Nodes[len(cluster.Nodes)-1]
		Expect(cluster.StopNode(last.Index)).To(Succeed())
		node := &corev1.Node{}
		Eventually(func(g Gomega) {
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: last.Name}, node)).To(Succeed())
			g.Expect(utils.NodeReady(node)).To(BeFalse())
		}).WithTimeout(multiNodePodTimeout).WithPolling(time.Second).Should(Succeed())
		Expect(cluster.StartNode(ctx, last.Index)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: last.Name}, node)).To(Succeed())
			g.Expect(utils.NodeReady(node)).To(BeTrue())
		}).WithTimeout(multiNodePodTimeout).WithPolling(time.Second).Should(Succeed())
	}, SpecTimeout(2*multiNodePodTimeout+time.Minute))

	It("leaves no namespace, bridge or route behind when stopped", func(ctx SpecContext) {
		var cidrs []string
		for _, node := range cluster.Nodes {
			got := &corev1.Node{}
			Expect(admin.Get(ctx, client.ObjectKey{Name: node.Name}, got)).To(Succeed())
			cidrs = append(cidrs, got.Spec.PodCIDR)
		}
		nw := cluster.Network
		Expect(cluster.Stop()).To(Succeed())
		expectNetworkGone(nw, cidrs)
		for _, node := range cluster.Nodes {
			_, err := os.Stat(node.Containerd.Dir)
			Expect(os.IsNotExist(err)).To(BeTrue(), "the containerd directory of %s is still there", node.Name)
			_, err = os.Stat(node.Nodelet.Dir)
			Expect(os.IsNotExist(err)).To(BeTrue(), "the nodelet directory of %s is still there", node.Name)
		}
	})
}

// expectSucceeds creates pod, restarted on failure, and waits for it to
// succeed.
func expectSucceeds(ctx context.Context, admin client.Client, pod *corev1.Pod) {
	GinkgoHelper()
	pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	Expect(admin.Create(ctx, pod)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodSucceeded), "pod %s on %s: %+v", pod.Name, pod.Spec.NodeName, pod.Status.ContainerStatuses)
	}).WithTimeout(multiNodePodTimeout).Should(Succeed())
}

// expectNetworkGone checks that node network nw has no namespace, link or
// host route of cidrs left.
func expectNetworkGone(nw *utils.NodeNetwork, cidrs []string) {
	GinkgoHelper()
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "%s", out)
	Expect(string(out)).NotTo(ContainSubstring(nw.Bridge+"-"), "a node namespace is left")
	out, err = exec.Command("ip", "-o", "link", "show").CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "%s", out)
	Expect(string(out)).NotTo(MatchRegexp(`: %sv?\d*[@:]`, nw.Bridge), "a link of the node network is left")
	out, err = exec.Command("ip", "route", "show").CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "%s", out)
	for _, cidr := range cidrs {
		Expect(string(out)).NotTo(ContainSubstring(cidr), "a route to pod subnet %s is left", cidr)
	}
	Expect(string(out)).NotTo(ContainSubstring(nw.Subnet.String()), "the node network's route is left")
}

// startTestCluster starts a cluster of n nodes named <prefix>-node-<i> with
// kube-proxy and CoreDNS, stopped when the container ends, and a namespace
// ns whose default service account exists (the ServiceAccount admission
// refuses pods until the controller-manager made it).
func startTestCluster(ctx context.Context, n int, prefix, ns string) (*utils.Cluster, client.Client) {
	GinkgoHelper()
	cluster, err := utils.StartCluster(ctx, utils.ClusterOptions{
		Nodes:      n,
		NamePrefix: prefix,
		Addons:     utils.InstallClusterAddons,
	})
	if cluster != nil {
		DeferCleanup(cluster.Stop)
	}
	Expect(err).NotTo(HaveOccurred())
	admin, err := cluster.AdminClient()
	Expect(err).NotTo(HaveOccurred())
	Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})).To(Succeed())
	}).WithTimeout(multiNodePodTimeout).Should(Succeed())
	return cluster, admin
}

// printClusterLogsOnFailure prints the last lines of every node's nodelet
// and containerd log when the current spec failed.
func printClusterLogsOnFailure(cluster *utils.Cluster, lines int) {
	if !CurrentSpecReport().Failed() || cluster == nil {
		return
	}
	for _, node := range cluster.Nodes {
		if node.Nodelet != nil {
			GinkgoWriter.Printf("nodelet log of %s:\n%s\n", node.Name, node.Nodelet.LogTail(lines))
		}
		if node.Containerd != nil {
			GinkgoWriter.Printf("containerd log of %s:\n%s\n", node.Name, node.Containerd.LogTail(lines))
		}
	}
}

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// addonsBuildTimeout covers building kube-proxy and CoreDNS from the
	// module proxy when the cache is cold, and their images.
	addonsBuildTimeout = 20 * time.Minute
	// addonsTimeout bounds each step after the builds: a tool run, CoreDNS
	// becoming ready, a name resolving.
	addonsTimeout = 60 * time.Second
)

// The add-ons run as pods on the nodes of a multi-node cluster; here their
// images are checked without one: kube-proxy's binary and iptables tools
// run from the image's own file system in a throwaway network namespace,
// and CoreDNS, run from its image's file system with the add-on's Corefile
// and RBAC as its pod would, answers for the suite's API server's Services.
var _ = Describe("Cluster add-ons", func() {
	var archives map[string]string

	BeforeEach(func(ctx SpecContext) {
		if archives != nil {
			return // built by an earlier spec
		}
		var err error
		archives, err = utils.AddonImages(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(archives).To(HaveKey(utils.KubeProxyImage))
		Expect(archives).To(HaveKey(utils.CoreDNSImage))
	}, NodeTimeout(addonsBuildTimeout))

	It("builds a kube-proxy image whose binary and nf_tables iptables tools run from its own files", func(ctx SpecContext) {
		By("importing the image into containerd, as a node does")
		Expect(ctrd.ImportArchive(ctx, utils.KubeProxyImage, archives[utils.KubeProxyImage])).To(Succeed())

		rootfs := unpackAddonImage(archives, utils.KubeProxyImage)
		out, err := exec.CommandContext(ctx, "chroot", rootfs, "/usr/local/bin/kube-proxy", "--version").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		Expect(strings.TrimSpace(string(out))).To(Equal("Kubernetes " + utils.KubeProxyVersion))

		By("programming a throwaway network namespace with the image's iptables")
		netns := fmt.Sprintf("nodelet-addons-%d", os.Getpid())
		Expect(exec.CommandContext(ctx, "ip", "netns", "add", netns).Run()).To(Succeed())
		DeferCleanup(func() {
			Expect(exec.Command("ip", "netns", "del", netns).Run()).To(Succeed())
		})
		inNetns := func(stdin string, args ...string) string {
			GinkgoHelper()
			cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--net=/run/netns/" + netns, "chroot", rootfs}, args...)...)
			cmd.Stdin = strings.NewReader(stdin)
			out, err := cmd.CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), "%v: %s", args, out)
			return string(out)
		}
		Expect(inNetns("", "iptables", "--version")).To(ContainSubstring("(nf_tables)"))
		Expect(inNetns("", "iptables", "-L", "-n")).To(ContainSubstring("Chain INPUT"))
		// Rules of the kinds kube-proxy writes, with the matches and
		// targets it uses, each loaded from the image's extensions.
		inNetns(`*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-TEST - [0:0]
:KUBE-SEP-TEST - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-POSTROUTING - [0:0]
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-SERVICES -d 10.0.0.10/32 -p udp -m comment --comment "kube-system/kube-dns:dns cluster IP" -m udp --dport 53 -j KUBE-SVC-TEST
-A KUBE-SVC-TEST -m comment --comment "to one endpoint" -m statistic --mode random --probability 0.5 -j KUBE-SEP-TEST
-A KUBE-SEP-TEST -s 10.244.1.5/32 -j KUBE-MARK-MASQ
-A KUBE-SEP-TEST -p udp -m udp -j DNAT --to-destination 10.244.1.5:53
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
-A KUBE-POSTROUTING -m mark --mark 0x4000/0x4000 -j MASQUERADE --random-fully
COMMIT
*filter
:KUBE-FORWARD - [0:0]
-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
COMMIT
`, "iptables-restore", "--noflush")
		saved := inNetns("", "iptables-save")
		Expect(saved).To(ContainSubstring("-j DNAT --to-destination 10.244.1.5:53"))
		Expect(saved).To(ContainSubstring("--probability 0.50000000000"))
		Expect(saved).To(ContainSubstring("-m conntrack --ctstate INVALID -j DROP"))
		Expect(inNetns("", "ip6tables-save")).NotTo(ContainSubstring("KUBE-"))
	}, NodeTimeout(addonsTimeout))

	It("runs kube-proxy from its image with the add-on's configuration in a node's network namespace", func(ctx SpecContext) {
		By("starting an API server a network namespace can reach, and installing the add-ons with its CA inline")
		api := utils.MustStartAPIServerWithOptions(ctx, utils.APIServerOptions{Args: map[string]string{"bind-address": "0.0.0.0"}})
		admin, err := api.AdminClient()
		Expect(err).NotTo(HaveOccurred())
		_, apiPort, err := net.SplitHostPort(strings.TrimPrefix(api.Config.Host, "https://"))
		Expect(err).NotTo(HaveOccurred())
		n := os.Getpid() % 256
		hostIP, nodeIP := fmt.Sprintf("10.252.%d.1", n), fmt.Sprintf("10.252.%d.2", n)
		caFile, err := api.ServingCAFile()
		Expect(err).NotTo(HaveOccurred())
		ca, err := os.ReadFile(caFile)
		Expect(err).NotTo(HaveOccurred())
		apiURL := "https://" + net.JoinHostPort(hostIP, apiPort)
		objs, err := utils.RenderAddons(utils.AddonOptions{APIServerURL: apiURL, CAData: ca})
		Expect(err).NotTo(HaveOccurred())
		Expect(utils.InstallAddons(ctx, admin, utils.AddonOptions{APIServerURL: apiURL, CAData: ca})).To(Succeed())
		var ds *appsv1.DaemonSet
		for _, u := range objs {
			if u.GetKind() == "DaemonSet" {
				ds = &appsv1.DaemonSet{}
				Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ds)).To(Succeed())
			}
		}
		Expect(ds).NotTo(BeNil())
		cm := &corev1.ConfigMap{}
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: utils.AddonsNamespace, Name: "kube-proxy"}, cm)).To(Succeed())
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: utils.AddonsNamespace, Name: "kube-proxy"}}
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
		Expect(admin.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
		nodeName := fmt.Sprintf("addons-node-%d", n)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
		Expect(admin.Create(ctx, node)).To(Succeed())
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeIP}}
		Expect(admin.Status().Update(ctx, node)).To(Succeed())

		By("making a node: a network namespace joined to the host by a veth")
		netns := fmt.Sprintf("nodelet-addons-kp-%d", os.Getpid())
		hostVeth := fmt.Sprintf("nlkp%d", n)
		run := func(args ...string) {
			GinkgoHelper()
			out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), "%v: %s", args, out)
		}
		run("ip", "netns", "add", netns)
		// The veth goes with the namespace.
		DeferCleanup(func() { Expect(exec.Command("ip", "netns", "del", netns).Run()).To(Succeed()) })
		inNode := []string{"nsenter", "--net=/run/netns/" + netns}
		run("ip", "link", "add", hostVeth, "type", "veth", "peer", "name", "eth0", "netns", netns)
		run("ip", "addr", "add", hostIP+"/30", "dev", hostVeth)
		run("ip", "link", "set", hostVeth, "up")
		run(append(inNode, "ip", "addr", "add", nodeIP+"/30", "dev", "eth0")...)
		run(append(inNode, "ip", "link", "set", "eth0", "up")...)
		run(append(inNode, "ip", "link", "set", "lo", "up")...)

		By("giving kube-proxy its pod's files: the ConfigMap, its ServiceAccount's token, /dev/null and /proc")
		rootfs := unpackAddonImage(archives, utils.KubeProxyImage)
		configDir := ds.Spec.Template.Spec.Containers[0].VolumeMounts[0].MountPath
		Expect(os.MkdirAll(filepath.Join(rootfs, configDir), 0o755)).To(Succeed())
		// The serving certificate names loopback, not the host's veth
		// address; a real cluster's names its bridge address.
		kubeconfig := replaceOnce(cm.Data["kubeconfig.conf"],
			"    server: "+apiURL+"\n", "    server: "+apiURL+"\n    tls-server-name: localhost\n")
		for name, data := range map[string]string{"config.conf": cm.Data["config.conf"], "kubeconfig.conf": kubeconfig} {
			Expect(os.WriteFile(filepath.Join(rootfs, configDir, name), []byte(data), 0o644)).To(Succeed())
		}
		saDir := filepath.Join(rootfs, "var/run/secrets/kubernetes.io/serviceaccount")
		Expect(os.MkdirAll(saDir, 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(saDir, "token"), []byte(tr.Status.Token), 0o644)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(saDir, "ca.crt"), ca, 0o644)).To(Succeed())
		for _, d := range []string{"dev", "proc"} {
			Expect(os.MkdirAll(filepath.Join(rootfs, d), 0o755)).To(Succeed())
		}
		run("mknod", "-m", "666", filepath.Join(rootfs, "dev/null"), "c", "1", "3")
		run("mount", "-t", "proc", "proc", filepath.Join(rootfs, "proc"))
		DeferCleanup(func() { Expect(exec.Command("umount", filepath.Join(rootfs, "proc")).Run()).To(Succeed()) })

		By("running the DaemonSet's command for the node")
		ctr := ds.Spec.Template.Spec.Containers[0]
		command := make([]string, 0, len(ctr.Command))
		for _, a := range append(append([]string{}, ctr.Command...), ctr.Args...) {
			command = append(command, strings.ReplaceAll(a, "$(NODE_NAME)", nodeName))
		}
		var logs syncBuffer
		cmd := exec.Command(inNode[0], append(append(inNode[1:], "chroot", rootfs), command...)...)
		cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
		cmd.Stdout, cmd.Stderr = &logs, &logs
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		Expect(cmd.Start()).To(Succeed())
		exited := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(exited)
		}()
		DeferCleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
			if CurrentSpecReport().Failed() {
				GinkgoWriter.Printf("kube-proxy log:\n%s\n", logs.String())
			}
		})

		By("finding the Services in the node's iptables, and kube-proxy healthy")
		Eventually(func(g Gomega) {
			select {
			case <-exited:
				StopTrying("kube-proxy exited").Now()
			default:
			}
			out, err := exec.CommandContext(ctx, inNode[0], append(append(inNode[1:], "chroot", rootfs), "iptables-save")...).CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), "%s", out)
			g.Expect(string(out)).To(ContainSubstring(`-d 10.0.0.1/32 -p tcp -m comment --comment "default/kubernetes:https cluster IP"`))
			g.Expect(string(out)).To(ContainSubstring(`-d %s/32 -p udp -m comment --comment "kube-system/kube-dns:dns has no endpoints"`, utils.DefaultDNSIP))
		}).WithContext(ctx).WithTimeout(addonsTimeout).WithPolling(500*time.Millisecond).Should(Succeed(), "kube-proxy log:\n%s", &logs)
		Eventually(func(g Gomega) {
			resp, err := http.Get("http://" + net.JoinHostPort(nodeIP, "10256") + "/healthz")
			g.Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		}).WithContext(ctx).WithTimeout(addonsTimeout).WithPolling(500 * time.Millisecond).Should(Succeed())
		// It set a sysctl of the node's own namespace, and left the
		// machine's conntrack table, which a namespace cannot size, alone.
		out, err := exec.CommandContext(ctx, inNode[0], append(inNode[1:], "cat", "/proc/sys/net/ipv4/conf/all/route_localnet")...).Output()
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.TrimSpace(string(out))).To(Equal("1"))
		Expect(logs.String()).NotTo(ContainSubstring("nf_conntrack"))
	}, NodeTimeout(3*addonsTimeout))

	It("runs CoreDNS from its image with the add-on's Corefile and RBAC, answering for the API server's Services", func(ctx SpecContext) {
		admin, err := apiServer.AdminClient()
		Expect(err).NotTo(HaveOccurred())

		By("installing the add-ons twice: the second apply updates the first")
		opts := utils.AddonOptions{APIServerURL: apiServer.Config.Host}
		objs, err := utils.RenderAddons(opts)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			for _, u := range objs {
				Expect(client.IgnoreNotFound(admin.Delete(ctx, u))).To(Succeed())
			}
		}, NodeTimeout(apiTimeout))
		Expect(utils.InstallAddons(ctx, admin, opts)).To(Succeed())
		Expect(utils.InstallAddons(ctx, admin, opts)).To(Succeed())
		corefileCM := &corev1.ConfigMap{}
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: utils.AddonsNamespace, Name: "coredns"}, corefileCM)).To(Succeed())
		dnsSvc := &corev1.Service{}
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: utils.AddonsNamespace, Name: utils.KubeDNSService}, dnsSvc)).To(Succeed())
		Expect(dnsSvc.Spec.ClusterIP).To(Equal(utils.DefaultDNSIP))

		By("giving CoreDNS its pod's files: the Corefile, its ServiceAccount's token and the CA")
		rootfs := unpackAddonImage(archives, utils.CoreDNSImage)
		ports := freeAddonPorts(4)
		dnsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
		readyAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2]))
		// The pod's ports are its own; here they are the host's, so each
		// listener moves to a free port (and the server to loopback).
		corefile := replaceOnce(corefileCM.Data["Corefile"],
			".:53 {", fmt.Sprintf(".:%d {", ports[0]),
			"health {", fmt.Sprintf("health 127.0.0.1:%d {", ports[1]),
			"ready\n", fmt.Sprintf("ready %s\n", readyAddr),
			"prometheus :9153", fmt.Sprintf("prometheus 127.0.0.1:%d", ports[3]),
		)
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: utils.AddonsNamespace, Name: "coredns"}}
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
		Expect(admin.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
		caFile, err := apiServer.ServingCAFile()
		Expect(err).NotTo(HaveOccurred())
		ca, err := os.ReadFile(caFile)
		Expect(err).NotTo(HaveOccurred())
		saDir := filepath.Join(rootfs, "var/run/secrets/kubernetes.io/serviceaccount")
		Expect(os.MkdirAll(saDir, 0o755)).To(Succeed())
		for name, data := range map[string][]byte{
			"token": []byte(tr.Status.Token), "ca.crt": ca, "namespace": []byte(utils.AddonsNamespace),
		} {
			Expect(os.WriteFile(filepath.Join(saDir, name), data, 0o644)).To(Succeed())
		}
		Expect(os.WriteFile(filepath.Join(rootfs, "etc/coredns/Corefile"), []byte(corefile), 0o644)).To(Succeed())
		// An upstream that answers nothing: only the cluster's names are asked.
		Expect(os.WriteFile(filepath.Join(rootfs, "etc/resolv.conf"), []byte("nameserver 192.0.2.53\n"), 0o644)).To(Succeed())

		By("starting CoreDNS with the in-cluster configuration its pod would have")
		host, port, err := net.SplitHostPort(strings.TrimPrefix(apiServer.Config.Host, "https://"))
		Expect(err).NotTo(HaveOccurred())
		var logs syncBuffer
		cmd := exec.Command("chroot", rootfs, "/coredns", "-conf", "/etc/coredns/Corefile")
		cmd.Env = []string{"KUBERNETES_SERVICE_HOST=" + host, "KUBERNETES_SERVICE_PORT=" + port}
		cmd.Stdout, cmd.Stderr = &logs, &logs
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		Expect(cmd.Start()).To(Succeed())
		DeferCleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if CurrentSpecReport().Failed() {
				GinkgoWriter.Printf("CoreDNS log:\n%s\n", logs.String())
			}
		})
		Eventually(func(g Gomega) {
			resp, err := http.Get("http://" + readyAddr + "/ready")
			g.Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		}).WithContext(ctx).WithTimeout(addonsTimeout).WithPolling(200*time.Millisecond).Should(Succeed(), "CoreDNS /ready; log:\n%s", &logs)

		By("resolving a new Service's name to its ClusterIP, over UDP and TCP")
		ns := utils.NewNamespace(ctx, admin)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": "web"},
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
			},
		}
		Expect(admin.Create(ctx, svc)).To(Succeed())
		Expect(svc.Spec.ClusterIP).NotTo(BeEmpty())
		name := fmt.Sprintf("web.%s.svc.%s.", ns, utils.DefaultClusterDomain)
		for _, network := range []string{"udp", "tcp"} {
			r := resolverAt(network, dnsAddr)
			Eventually(func(g Gomega) {
				addrs, err := r.LookupHost(ctx, name)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(addrs).To(ConsistOf(svc.Spec.ClusterIP))
			}).WithContext(ctx).WithTimeout(addonsTimeout).WithPolling(200*time.Millisecond).Should(Succeed(), "%s over %s", name, network)
		}
		r := resolverAt("udp", dnsAddr)
		addrs, err := r.LookupHost(ctx, fmt.Sprintf("%s.%s.svc.%s.", utils.KubeDNSService, utils.AddonsNamespace, utils.DefaultClusterDomain))
		Expect(err).NotTo(HaveOccurred())
		Expect(addrs).To(ConsistOf(utils.DefaultDNSIP))
		_, err = r.LookupHost(ctx, fmt.Sprintf("absent.%s.svc.%s.", ns, utils.DefaultClusterDomain))
		var dnsErr *net.DNSError
		Expect(errors.As(err, &dnsErr)).To(BeTrue(), "%v", err)
		Expect(dnsErr.IsNotFound).To(BeTrue(), "%v", err)

		By("forgetting the Service once it is deleted")
		Expect(admin.Delete(ctx, svc)).To(Succeed())
		Eventually(func(g Gomega) {
			_, err := r.LookupHost(ctx, name)
			g.Expect(err).To(HaveOccurred())
		}).WithContext(ctx).WithTimeout(addonsTimeout).WithPolling(200 * time.Millisecond).Should(Succeed())
	}, NodeTimeout(3*addonsTimeout))
})

// unpackAddonImage unpacks image from its archive into a directory of the
// spec's, removed when the spec ends.
func unpackAddonImage(archives map[string]string, image string) string {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	Expect(utils.UnpackImage(archives[image], image, dir)).To(Succeed())
	return dir
}

// resolverAt is a resolver that asks only the DNS server at addr, over
// network.
func resolverAt(network, addr string) *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
}

// freeAddonPorts returns n distinct ports free on loopback for both TCP
// and UDP at the time of the call.
func freeAddonPorts(n int) []int {
	GinkgoHelper()
	var ports []int
	seen := map[int]bool{}
	for len(ports) < n {
		l, err := net.ListenPacket("udp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		p := l.LocalAddr().(*net.UDPAddr).Port
		t, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		_ = l.Close()
		if err != nil {
			continue
		}
		_ = t.Close()
		if !seen[p] {
			seen[p] = true
			ports = append(ports, p)
		}
	}
	return ports
}

// replaceOnce replaces each old with its new in s, failing the spec when an
// old is not there exactly once.
func replaceOnce(s string, oldNew ...string) string {
	GinkgoHelper()
	for i := 0; i+1 < len(oldNew); i += 2 {
		Expect(strings.Count(s, oldNew[i])).To(Equal(1), "%q in:\n%s", oldNew[i], s)
		s = strings.Replace(s, oldNew[i], oldNew[i+1], 1)
	}
	return s
}

package e2e

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// installTimeout covers the install once the cluster runs: building
	// nodelet's image, each host's containerd, and every host's nodelet
	// pulling through a TLS bootstrap (with the kubelet's restart back-off
	// while its bootstrap kubeconfig is not there yet) to a Ready Node.
	installTimeout = 12 * time.Minute
	// installNodes is the number of kubelet hosts.
	installNodes = 2
	// docsHost is the host name the docs' examples use; each host's name
	// replaces it.
	docsHost = "worker-1"
	// nodeletSuffix is what config/default appends to the host's Node name.
	nodeletSuffix = "-nodelet"
	// nodeletCRISocket is where config/host's containerd listens, on a host.
	nodeletCRISocket = "/run/nodelet-containerd/containerd.sock"
	// kubeletCRISocket is the kubelet's containerd as the docs' ctr line
	// names it, on a host.
	kubeletCRISocket = "/run/containerd/containerd.sock"
	// hostSandboxImage is config/host's sandbox_image, which a host would
	// pull: here it is the harness's pause image under that name.
	hostSandboxImage = "registry.k8s.io/pause:3.10"
)

// installHostPaths are the directories the install writes on a host (or
// that config/host, config/daemonset and docs/deploying.md name): each
// node has its own, over the machine's, in its mount namespace.
var installHostPaths = []string{
	"/etc/nodelet",                // the bootstrap kubeconfig
	"/etc/nodelet-containerd",     // config/host's containerd configuration and CNI template
	"/etc/systemd/system",         // the unit
	"/opt/nodelet-containerd",     // its opt directory
	"/run/containerd",             // the kubelet's containerd socket, as the docs' ctr line names it
	"/run/nodelet-containerd",     // its state and socket
	"/var/lib/nodelet",            // nodelet's state and kubeconfig
	"/var/lib/nodelet-containerd", // its root
	"/var/log/containers",         // log links
	"/var/log/nodelet-pods",       // nodelet's pod logs
	"/var/log/pods",               // the kubelet's pod logs
}

// installSteps are the shell blocks of the install, read from README.md
// and docs/deploying.md.
type installSteps struct {
	// hostInstall and hostStart are the blocks of "Its own runtime" that
	// run on each host, as root: the one that installs config/host's
	// files, and the one that starts the unit.
	hostInstall, hostStart string
	// imageBuild and imageImport are "The image"'s block: its lines
	// without the docs' host name (once, as the admin) and with it (once
	// per host, as the admin).
	imageBuild, imageImport string
	// adminOnce and adminPerHost are the README's block: its lines without
	// and with the docs' host name.
	adminOnce, adminPerHost string
}

// The spec follows README.md's "Installing as a DaemonSet beside the
// kubelet" and docs/deploying.md's "As a DaemonSet beside a kubelet" word
// for word on a cluster with a controller-manager (the DaemonSet
// controller, pod CIDR allocation), a scheduler, kube-proxy and two
// kubelet hosts. Each host is a network namespace and a mount namespace
// of its own, where the install's paths are the host's own; the docs'
// shell blocks are read at test time and run with bash, with ssh, scp,
// systemctl and kubectl as shell functions that reach the hosts and the
// cluster.
var _ = Describe("Multi-node cluster DaemonSet install", Ordered, Label(heavyLabel), func() {
	var (
		cluster      *utils.Cluster
		admin        client.Client
		root         string
		steps        installSteps
		controlPlane *utils.NodeMounts
		unitDirs     map[string]string // host name → the systemctl shim's pid and log files
		ns           string
		tolerating   map[string]*corev1.Pod // nodelet Node → its web pod
	)

	BeforeAll(func(ctx SpecContext) {
		if !strings.Contains(GinkgoLabelFilter(), heavyLabel) {
			Skip("a heavy spec: run it with -ginkgo.label-filter=" + heavyLabel)
		}
		var err error
		root, err = utils.RepoRoot()
		Expect(err).NotTo(HaveOccurred())

		By("reading the install's shell blocks from README.md and docs/deploying.md")
		steps = readInstallSteps(root)

		By(fmt.Sprintf("starting a cluster of %d kubelet hosts, each with a mount namespace of its own", installNodes))
		cluster, err = utils.StartCluster(ctx, utils.ClusterOptions{
			Nodes:        installNodes,
			NamePrefix:   fmt.Sprintf("dsi%d", GinkgoParallelProcess()),
			Images:       []string{utils.PauseImage},
			StartAgent:   utils.ClusterKubelet("", nil),
			NodeMounts:   &utils.NodeMountOptions{Paths: installHostPaths, CgroupRoots: []string{"/nodelet"}},
			Addons:       utils.InstallClusterAddons,
			ReadyTimeout: 5 * time.Minute,
		})
		if cluster != nil {
			DeferCleanup(cluster.Stop)
		}
		Expect(err).NotTo(HaveOccurred())
		admin, err = cluster.AdminClient()
		Expect(err).NotTo(HaveOccurred())
		expectHostPathsCovered(ctx, cluster, root)

		By("making the control-plane host: /etc/kubernetes/pki/ca.crt is the API server's kubelet client CA, as kubeadm's")
		controlPlane, err = utils.StartNodeMounts("control-plane", "", utils.NodeMountOptions{Paths: []string{"/etc/kubernetes"}})
		if controlPlane != nil {
			DeferCleanup(controlPlane.Stop)
		}
		Expect(err).NotTo(HaveOccurred())
		ca, err := os.ReadFile(cluster.API.KubeletClientCA.CertFile)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.MkdirAll(controlPlane.HostPath("/etc/kubernetes/pki"), 0o755)).To(Succeed())
		Expect(os.WriteFile(controlPlane.HostPath("/etc/kubernetes/pki/ca.crt"), ca, 0o644)).To(Succeed())

		By("leaving config/approver the only approver: the harness's quick join lets the controller-manager approve any bootstrap token's request")
		for _, b := range utils.KubeadmTLSBootstrapBindings() {
			Expect(client.IgnoreNotFound(admin.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: b.Name}}))).To(Succeed())
		}
		By("keeping kube-proxy off nodelet's Nodes, as docs/deploying.md's known limits say")
		kubectlOut(ctx, cluster, "-n", utils.AddonsNamespace, "patch", "daemonset", utils.KubeProxyDaemonSet, "--type=json", "-p",
			`[{"op":"add","path":"/spec/template/spec/affinity","value":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":`+
				`{"nodeSelectorTerms":[{"matchExpressions":[{"key":"nodelet.io/agent","operator":"DoesNotExist"}]}]}}}}]`)

		unitDirs = map[string]string{}
		for _, n := range cluster.Nodes {
			unitDirs[n.Name] = GinkgoT().TempDir()
			DeferCleanup(stopUnits, n, unitDirs[n.Name])
		}
		DeferCleanup(func() {
			for _, n := range cluster.Nodes {
				_ = os.Remove(filepath.Join(root, n.Name+nodeletSuffix+".bootstrap.kubeconfig"))
			}
		})
	}, NodeTimeout(clusterStartTimeout))

	AfterEach(func(ctx SpecContext) {
		if !CurrentSpecReport().Failed() || cluster == nil {
			return
		}
		for _, n := range cluster.Nodes {
			if n.Kubelet != nil {
				GinkgoWriter.Printf("kubelet log of %s:\n%s\n", n.Name, n.Kubelet.LogTail(30))
				GinkgoWriter.Printf("container logs of %s's kubelet:\n%s\n", n.Name, containerLogTail(filepath.Join(n.Kubelet.Dir, "pod-logs")))
			}
			if dir := unitDirs[n.Name]; dir != "" {
				GinkgoWriter.Printf("nodelet-containerd log of %s:\n%s\n", n.Name, utils.TailLines(filepath.Join(dir, "nodelet-containerd.log"), 30))
			}
		}
		if out, err := kubectlCombined(ctx, cluster, "get", "pods", "-A", "-o", "wide"); err == nil {
			GinkgoWriter.Printf("pods:\n%s\n", out)
		}
	})

	It("installs nodelet on every host with the docs' commands as written", func(ctx SpecContext) {
		for _, n := range cluster.Nodes {
			By("on host " + n.Name + ": nodelet's containerd (docs/deploying.md, Its own runtime)")
			runOnHost(ctx, n, root, unitDirs[n.Name], steps.hostInstall)
			adaptHostContainerd(n)
			runOnHost(ctx, n, root, unitDirs[n.Name], steps.hostStart)
			preloadNodeletImages(ctx, n)
			// The docs' ctr line dials the kubelet's containerd at the usual
			// path; the harness's listens in its own directory.
			Expect(os.Symlink(strings.TrimPrefix(n.Containerd.Endpoint(), "unix://"), n.Mounts.HostPath(kubeletCRISocket))).To(Succeed())
		}

		By("building nodelet's image as docs/deploying.md says: " + steps.imageBuild)
		runAsAdmin(ctx, cluster, controlPlane, root, steps.imageBuild)
		for _, n := range cluster.Nodes {
			script := strings.ReplaceAll(steps.imageImport, docsHost, n.Name)
			By(fmt.Sprintf("importing it into the kubelet's containerd of %s, with %s replaced by %s:\n%s", n.Name, docsHost, n.Name, script))
			runAsAdmin(ctx, cluster, controlPlane, root, script)
		}

		By("as the cluster admin, README.md's block once: " + steps.adminOnce)
		runAsAdmin(ctx, cluster, controlPlane, root, steps.adminOnce)
		for _, n := range cluster.Nodes {
			script := strings.ReplaceAll(steps.adminPerHost, docsHost, n.Name)
			By(fmt.Sprintf("as the cluster admin, README.md's per-host lines with %s replaced by %s:\n%s", docsHost, n.Name, script))
			runAsAdmin(ctx, cluster, controlPlane, root, script)
		}

		By("waiting for every host's nodelet Node to be Ready")
		for _, n := range cluster.Nodes {
			name := n.Name + nodeletSuffix
			Eventually(func(g Gomega) {
				node := &corev1.Node{}
				g.Expect(admin.Get(ctx, client.ObjectKey{Name: name}, node)).To(Succeed())
				g.Expect(utils.NodeReady(node)).To(BeTrue(), "node %s is not Ready: %+v", name, node.Status.Conditions)
			}).WithContext(ctx).WithTimeout(installTimeout).WithPolling(2*time.Second).Should(Succeed(),
				func() string { return "nodelet's pods:\n" + containerLogTail(filepath.Join(n.Kubelet.Dir, "pod-logs")) })
		}
	}, SpecTimeout(2*installTimeout))

	It("runs nodelet as the DaemonSet's pods, one per kubelet host, placed by the DaemonSet controller", func(ctx SpecContext) {
		hosts := map[string]bool{}
		for _, n := range cluster.Nodes {
			hosts[n.Name] = true
		}
		ds := &appsv1.DaemonSet{}
		Eventually(func(g Gomega) {
			g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: "nodelet-system", Name: "nodelet"}, ds)).To(Succeed())
			g.Expect(ds.Status.DesiredNumberScheduled).To(BeEquivalentTo(installNodes), "the DaemonSet targets the kubelet hosts only")
			g.Expect(ds.Status.NumberReady).To(BeEquivalentTo(installNodes))
		}).WithContext(ctx).WithTimeout(multiNodePodTimeout).Should(Succeed())
		pods := &corev1.PodList{}
		Expect(admin.List(ctx, pods, client.InNamespace("nodelet-system"), client.MatchingLabels{"app.kubernetes.io/name": "nodelet"})).To(Succeed())
		Expect(pods.Items).To(HaveLen(installNodes))
		seen := map[string]bool{}
		for _, p := range pods.Items {
			Expect(p.OwnerReferences).To(ContainElement(HaveField("Kind", "DaemonSet")))
			Expect(hosts).To(HaveKey(p.Spec.NodeName), "pod %s runs on %s, not a kubelet host", p.Name, p.Spec.NodeName)
			Expect(seen).NotTo(HaveKey(p.Spec.NodeName))
			seen[p.Spec.NodeName] = true
		}
		for _, n := range cluster.Nodes {
			node := &corev1.Node{}
			Expect(admin.Get(ctx, client.ObjectKey{Name: n.Name + nodeletSuffix}, node)).To(Succeed())
			Expect(node.Labels).To(HaveKeyWithValue("nodelet.io/agent", "nodelet"))
			Expect(node.Spec.Taints).To(ContainElement(And(HaveField("Key", "nodelet.io/agent"), HaveField("Effect", corev1.TaintEffectNoSchedule))))
			Expect(node.Status.Addresses).To(ContainElement(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: n.IP.String()}), "the host's address")
			kubeletNode := &corev1.Node{}
			Expect(admin.Get(ctx, client.ObjectKey{Name: n.Name}, kubeletNode)).To(Succeed())
			Expect(node.Spec.PodCIDR).NotTo(BeEmpty(), "the controller-manager allocated no pod CIDR")
			Expect(node.Spec.PodCIDR).NotTo(Equal(kubeletNode.Spec.PodCIDR))

			By("on host " + n.Name + ": the bootstrap kubeconfig replaced by nodelet's own, in the host's /etc/nodelet and /var/lib/nodelet")
			Expect(n.Mounts.HostPath("/etc/nodelet/bootstrap/bootstrap.kubeconfig")).NotTo(BeAnExistingFile(), "nodelet removes it after the join")
			Expect(n.Mounts.HostPath("/var/lib/nodelet/kubeconfig")).To(BeARegularFile())
			Expect("/tmp/"+n.Name+nodeletSuffix+".bootstrap.kubeconfig").NotTo(BeAnExistingFile(), "the ssh line removes its copy")
		}
	})

	It("approved each host's client certificate for its own node name only, with config/approver", func(ctx SpecContext) {
		csrs := &certificatesv1.CertificateSigningRequestList{}
		Expect(admin.List(ctx, csrs)).To(Succeed())
		approvedFor := map[string]int{}
		for _, csr := range csrs.Items {
			if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || !strings.HasPrefix(csr.Spec.Username, "system:bootstrap:") {
				continue
			}
			cn := csrCommonName(csr.Spec.Request)
			name := strings.TrimPrefix(cn, "system:node:")
			approved := slices.ContainsFunc(csr.Status.Conditions, func(c certificatesv1.CertificateSigningRequestCondition) bool {
				return c.Type == certificatesv1.CertificateApproved && c.Status == corev1.ConditionTrue
			})
			if !approved {
				continue
			}
			Expect(csr.Spec.Groups).To(ContainElement("system:bootstrappers:nodelet:node:"+name),
				"CSR %s for %s was approved for a token bound to another node: %v", csr.Name, cn, csr.Spec.Groups)
			Expect(csr.Status.Conditions).To(ContainElement(And(
				HaveField("Type", certificatesv1.CertificateApproved),
				HaveField("Message", ContainSubstring("Auto approving nodelet client certificate for node "+name)))),
				"approved by nodelet's approver, not the controller-manager")
			Expect(csr.Status.Certificate).NotTo(BeEmpty(), "CSR %s approved but not issued", csr.Name)
			approvedFor[name]++
		}
		want := map[string]int{}
		for _, n := range cluster.Nodes {
			want[n.Name+nodeletSuffix] = 1
		}
		Expect(approvedFor).To(Equal(want), "one approved bootstrap request per host, each for its own nodelet Node")
	})

	It("runs a pod that tolerates nodelet.io/agent on each nodelet Node, with an IP of that Node's pod CIDR", func(ctx SpecContext) {
		ns = utils.NewNamespace(ctx, admin)
		tolerating = map[string]*corev1.Pod{}
		for _, n := range cluster.Nodes {
			name := n.Name + nodeletSuffix
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-" + strconv.Itoa(n.Index)},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken:  ptr.To(false),
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Tolerations:                   []corev1.Toleration{{Key: "nodelet.io/agent", Operator: corev1.TolerationOpExists}},
					// Through the scheduler, to the one Node.
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
						NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
							Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{name},
						}}}},
					}}},
					Containers: []corev1.Container{{Name: "web", Image: utils.WebImage, ImagePullPolicy: corev1.PullIfNotPresent}},
				},
			}
			Expect(admin.Create(ctx, pod)).To(Succeed())
			tolerating[name] = pod
		}
		for name, pod := range tolerating {
			node := &corev1.Node{}
			Expect(admin.Get(ctx, client.ObjectKey{Name: name}, node)).To(Succeed())
			_, subnet, err := net.ParseCIDR(node.Spec.PodCIDR)
			Expect(err).NotTo(HaveOccurred())
			Eventually(func(g Gomega) {
				g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
				g.Expect(pod.Spec.NodeName).To(Equal(name))
				g.Expect(utils.PodReady(pod)).To(BeTrue(), "pod %s is not Ready: %+v", pod.Name, pod.Status)
			}).WithContext(ctx).WithTimeout(multiNodePodTimeout).Should(Succeed())
			Expect(subnet.Contains(net.ParseIP(pod.Status.PodIP))).To(BeTrue(),
				"pod %s on %s has IP %s, outside the Node's pod CIDR %s", pod.Name, name, pod.Status.PodIP, subnet)
		}
	})

	It("answers kubectl logs and kubectl exec through the API server on each nodelet Node", func(ctx SpecContext) {
		Expect(ns).NotTo(BeEmpty())
		for _, n := range cluster.Nodes {
			name := n.Name + nodeletSuffix
			pod := utils.BusyboxPod(ns, "shell-"+strconv.Itoa(n.Index), name, "sh", "-c", "echo logged on "+name+"; exec sleep 3600")
			pod.Spec.Tolerations = []corev1.Toleration{{Key: "nodelet.io/agent", Operator: corev1.TolerationOpExists}}
			pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
			Expect(admin.Create(ctx, pod)).To(Succeed())
			utils.WaitForPod(ctx, admin, ns, pod.Name, multiNodePodTimeout, func(g Gomega, p *corev1.Pod) {
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			})
			Eventually(func(g Gomega) {
				out, err := kubectlCombined(ctx, cluster, "-n", ns, "logs", pod.Name)
				g.Expect(err).NotTo(HaveOccurred(), "%s", out)
				g.Expect(out).To(Equal("logged on " + name + "\n"))
			}).WithContext(ctx).WithTimeout(multiNodePodTimeout).WithPolling(time.Second).Should(Succeed())
			Expect(kubectlOut(ctx, cluster, "-n", ns, "exec", pod.Name, "--", "sh", "-c", "echo exec on $0", name)).To(Equal("exec on " + name + "\n"))
		}
	})

	It("lets a pod on one nodelet Node reach a pod on the other by pod IP", func(ctx SpecContext) {
		Expect(tolerating).To(HaveLen(installNodes))
		for _, from := range cluster.Nodes {
			for _, to := range cluster.Nodes {
				if from.Index == to.Index {
					continue
				}
				target := tolerating[to.Name+nodeletSuffix]
				page := fmt.Sprintf("http://%s/", net.JoinHostPort(target.Status.PodIP, strconv.Itoa(webPort)))
				pod := utils.BusyboxPod(ns, fmt.Sprintf("wget-%d-to-%d", from.Index, to.Index), from.Name+nodeletSuffix, utils.FetchCommand(page)...)
				pod.Spec.Tolerations = []corev1.Toleration{{Key: "nodelet.io/agent", Operator: corev1.TolerationOpExists}}
				// Again on failure: a request may race the routes.
				pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
				Expect(admin.Create(ctx, pod)).To(Succeed())
				Eventually(func(g Gomega) {
					g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
					g.Expect(pod.Status.Phase).To(Equal(corev1.PodSucceeded),
						"a pod on %s fetching %s from %s: %+v", from.Name+nodeletSuffix, page, to.Name+nodeletSuffix, pod.Status.ContainerStatuses)
				}).WithContext(ctx).WithTimeout(multiNodePodTimeout).Should(Succeed())
			}
		}
	})
})

// readInstallSteps reads the install's shell blocks from README.md and
// docs/deploying.md, and checks that the docs' admin steps are the
// README's lines.
func readInstallSteps(root string) installSteps {
	GinkgoHelper()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	Expect(err).NotTo(HaveOccurred())
	deploying, err := os.ReadFile(filepath.Join(root, "docs", "deploying.md"))
	Expect(err).NotTo(HaveOccurred())
	readmeBlocks := shellBlocks(markdownSection(string(readme), "## Installing as a DaemonSet beside the kubelet"))
	Expect(readmeBlocks).To(HaveLen(1), "README.md's DaemonSet section has one shell block")
	docsBlocks := shellBlocks(markdownSection(string(deploying), "## As a DaemonSet beside a kubelet"))

	var s installSteps
	s.adminOnce, s.adminPerHost, err = splitPerHost("README.md's block", readmeBlocks[0])
	Expect(err).NotTo(HaveOccurred())
	s.hostInstall = findBlock(docsBlocks, "config/host/config.toml")
	s.hostStart = findBlock(docsBlocks, "systemctl")
	s.imageBuild, s.imageImport, err = splitPerHost("docs/deploying.md's image block", findBlock(docsBlocks, "make image"))
	Expect(err).NotTo(HaveOccurred())
	Expect(s.imageImport).To(ContainSubstring("images import"))

	// docs/deploying.md's steps 2 to 4 say what the README's block says.
	readmeLines := commandLines(readmeBlocks[0])
	for _, b := range docsBlocks {
		if !strings.Contains(b, "kubectl apply -k") && !strings.Contains(b, "nodelet-client-ca") && !strings.Contains(b, "hack/bootstrap-token.sh") {
			continue
		}
		for _, line := range commandLines(b) {
			Expect(readmeLines).To(ContainElement(line), "docs/deploying.md runs %q, which README.md's block does not", line)
		}
	}
	return s
}

// markdownSection is the text under the heading line title up to the next
// heading of the same or a higher level (fenced blocks' lines are never
// headings). Empty when there is no such heading.
func markdownSection(doc, title string) string {
	level := strings.Index(title, " ")
	var out []string
	in, fenced := false, false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if !fenced && strings.HasPrefix(line, "#") {
			hashes := len(line) - len(strings.TrimLeft(line, "#"))
			switch {
			case strings.TrimSpace(line) == title:
				in = true
				continue
			case in && hashes <= level:
				return strings.Join(out, "\n")
			}
		}
		if in {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// shellBlocks returns the contents of md's ```sh blocks, without the
// indentation of their fences.
func shellBlocks(md string) []string {
	var blocks []string
	var cur []string
	indent, in := "", false
	for _, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case !in && trimmed == "```sh":
			in, cur = true, nil
			indent = line[:len(line)-len(strings.TrimLeft(line, " "))]
		case in && trimmed == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n")+"\n")
		case in:
			cur = append(cur, strings.TrimPrefix(line, indent))
		}
	}
	return blocks
}

// findBlock returns the one block that contains s.
func findBlock(blocks []string, s string) string {
	GinkgoHelper()
	var found []string
	for _, b := range blocks {
		if strings.Contains(b, s) {
			found = append(found, b)
		}
	}
	Expect(found).To(HaveLen(1), "docs/deploying.md's DaemonSet section has one shell block with %q", s)
	return found[0]
}

// splitPerHost splits a block, named what, into its lines without the
// docs' host name and the lines with it, which must come last.
func splitPerHost(what, block string) (once, perHost string, err error) {
	for _, line := range strings.Split(strings.TrimRight(block, "\n"), "\n") {
		if strings.Contains(line, docsHost) {
			perHost += line + "\n"
			continue
		}
		if perHost != "" {
			return "", "", fmt.Errorf("%s has %q after the per-host lines (with %s): run once or per host?", what, line, docsHost)
		}
		once += line + "\n"
	}
	if perHost == "" {
		return "", "", fmt.Errorf("%s names no host %s", what, docsHost)
	}
	return once, perHost, nil
}

var shellComment = regexp.MustCompile(`(^|\s+)#.*$`)

// commandLines are a block's lines without comments and blank lines.
func commandLines(block string) []string {
	var out []string
	for _, line := range strings.Split(block, "\n") {
		if line = strings.TrimSpace(shellComment.ReplaceAllString(line, "")); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// expectHostPathsCovered checks that every host path config/default's
// DaemonSet mounts (but the host's / and its cgroups) is one the hosts
// have of their own.
func expectHostPathsCovered(ctx context.Context, c *utils.Cluster, root string) {
	GinkgoHelper()
	out, err := exec.CommandContext(ctx, filepath.Join(c.API.Env.BinaryAssetsDirectory, "kubectl"), "kustomize", filepath.Join(root, "config", "default")).Output()
	Expect(err).NotTo(HaveOccurred())
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			Expect(err.Error()).To(Equal("EOF"))
			return
		}
		if u.GetKind() != "DaemonSet" {
			continue
		}
		volumes, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "volumes")
		for _, v := range volumes {
			p, ok, _ := unstructured.NestedString(v.(map[string]any), "hostPath", "path")
			if !ok || p == "/" || p == "/sys/fs/cgroup" {
				continue
			}
			Expect(slices.ContainsFunc(installHostPaths, func(own string) bool { return p == own || strings.HasPrefix(p, own+"/") })).
				To(BeTrue(), "config/default mounts host path %s, which the test's hosts do not have of their own", p)
		}
	}
}

// hostPreamble defines systemctl for a host without systemd as PID 1:
// daemon-reload does nothing, enable --now starts the unit's ExecStart in
// the background (its pid and log in $NODELET_E2E_UNITS).
const hostPreamble = `set -euo pipefail
systemctl() {
	case "${1:-}" in
	daemon-reload) return 0 ;;
	enable)
		if [[ "${2:-}" != --now || $# -ne 3 ]]; then
			echo "systemctl (test): only 'enable --now <unit>' is supported: $*" >&2
			return 1
		fi
		local unit="${3%.service}" file line
		file="/etc/systemd/system/$unit.service"
		line="$(sed -n 's/^ExecStart=//p' "$file" | tail -n 1)"
		# The host's containerd is the runtime the tests run, first on PATH.
		line="${line/#\/usr\/bin\/containerd /containerd }"
		if [[ -z "$line" ]]; then
			echo "systemctl (test): no ExecStart in $file" >&2
			return 1
		fi
		echo "systemctl (test): starting $unit: $line" >&2
		bash -c "exec $line" </dev/null >>"$NODELET_E2E_UNITS/$unit.log" 2>&1 &
		echo "$!" >"$NODELET_E2E_UNITS/$unit.pid"
		;;
	*)
		echo "systemctl (test): unsupported: $*" >&2
		return 1
		;;
	esac
}
`

// runOnHost runs script with bash as root on host n (its network and
// mount namespaces), from the repository.
func runOnHost(ctx context.Context, n *utils.ClusterNode, root, unitDir, script string) {
	GinkgoHelper()
	GinkgoWriter.Printf("on host %s:\n%s", n.Name, script)
	cmd := n.Mounts.Command(root, "bash", "-c", hostPreamble+script)
	env, err := utils.RuntimePathEnv(ctx, os.Environ(), "NODELET_E2E_UNITS="+unitDir)
	Expect(err).NotTo(HaveOccurred())
	cmd.Env = env
	out, err := runWithContext(ctx, cmd)
	Expect(err).NotTo(HaveOccurred(), "on host %s:\n%s\n%s", n.Name, script, out)
}

// runAsAdmin runs script with bash as the cluster admin on the
// control-plane host, from the repository, with kubectl on the cluster's
// admin kubeconfig and ssh and scp reaching the cluster's hosts by name.
func runAsAdmin(ctx context.Context, c *utils.Cluster, controlPlane *utils.NodeMounts, root, script string) {
	GinkgoHelper()
	kubeconfig, err := c.API.AdminKubeconfig()
	Expect(err).NotTo(HaveOccurred())
	var hosts strings.Builder
	for _, n := range c.Nodes {
		fmt.Fprintf(&hosts, "\t%s) echo %q ;;\n", n.Name, strings.Join(n.Mounts.NsenterArgs(), " "))
	}
	preamble := `set -euo pipefail
kubectl() { "$NODELET_E2E_KUBECTL" --kubeconfig "$NODELET_E2E_KUBECONFIG" "$@"; }
__e2e_host() {
	case "$1" in
` + hosts.String() + `	*) echo "no such host: $1" >&2; return 1 ;;
	esac
}
# ssh <host> '<command>': the command, with bash, as root on that host.
ssh() {
	local ns
	ns="$(__e2e_host "$1")" || return 255
	shift
	nsenter $ns --wdns=/ -- bash -c "$*"
}
# scp <file> <host>:<path>: the file copied to that host, mode 0600.
scp() {
	if [[ $# -ne 2 || "$2" != *:* ]]; then
		echo "scp (test): want <file> <host>:<path>: $*" >&2
		return 1
	fi
	local ns
	ns="$(__e2e_host "${2%%:*}")" || return 1
	nsenter $ns --wdns=/ -- sh -c 'umask 077; if [ -d "$1" ]; then cat >"$1/$2"; else cat >"$1"; fi' sh "${2#*:}" "$(basename "$1")" <"$1"
}
export -f kubectl __e2e_host ssh scp
`
	GinkgoWriter.Printf("as the cluster admin:\n%s", script)
	cmd := controlPlane.Command(root, "bash", "-c", preamble+script)
	// The docs' ctr is the selected runtime's, first on PATH.
	env, err := utils.RuntimePathEnv(ctx, os.Environ(),
		"NODELET_E2E_KUBECTL="+filepath.Join(c.API.Env.BinaryAssetsDirectory, "kubectl"),
		"NODELET_E2E_KUBECONFIG="+kubeconfig,
		"KUBECONFIG="+kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	cmd.Env = env
	out, err := runWithContext(ctx, cmd)
	Expect(err).NotTo(HaveOccurred(), "as the cluster admin:\n%s\n%s", script, out)
	GinkgoWriter.Printf("%s", out)
}

// runWithContext runs cmd, killed when ctx ends, and returns its output.
func runWithContext(ctx context.Context, cmd *exec.Cmd) (string, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return out.String(), errors.Join(ctx.Err(), <-done)
	}
}

// adaptHostContainerd does what docs/deploying.md asks of each host after
// installing config/host's config.toml: the CNI bin_dir where this
// machine's plugins are (Debian's /usr/lib/cni), and, as config.toml's
// comment says for a containerd without CAP_SYS_RESOURCE, as here,
// restrict_oom_score_adj.
func adaptHostContainerd(n *utils.ClusterNode) {
	GinkgoHelper()
	path := n.Mounts.HostPath("/etc/nodelet-containerd/config.toml")
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	config := string(data)
	for from, to := range map[string]string{
		`bin_dir = "/opt/cni/bin"`:        `bin_dir = "/usr/lib/cni"`,
		`# restrict_oom_score_adj = true`: `restrict_oom_score_adj = true`,
	} {
		Expect(strings.Count(config, from)).To(Equal(1), "config/host/config.toml has %q once", from)
		config = strings.Replace(config, from, to, 1)
		GinkgoWriter.Printf("on host %s: /etc/nodelet-containerd/config.toml: %s → %s\n", n.Name, from, to)
	}
	Expect(os.WriteFile(path, []byte(config), 0o644)).To(Succeed())
}

// preloadNodeletImages puts into host n's nodelet containerd the images it
// would pull from registries: config/host's sandbox image (the harness's
// pause image under that name) and the test pods' images.
func preloadNodeletImages(ctx context.Context, n *utils.ClusterNode) {
	GinkgoHelper()
	socket := n.Mounts.HostPath(nodeletCRISocket)
	endpoint := "unix://" + socket
	Eventually(func(g Gomega) {
		rs, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(endpoint).WithConnectionTimeout(criTimeout).Build(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		defer rs.Close(ctx)
		st, err := rs.Status(ctx, false)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.GetStatus().GetConditions()).To(ContainElement(And(
			HaveField("Type", runtimeapi.RuntimeReady), HaveField("Status", true))))
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed(), "nodelet-containerd on %s", n.Name)
	ctr := func(args ...string) {
		GinkgoHelper()
		ctrPath, err := utils.RuntimeBinary(ctx, "ctr")
		Expect(err).NotTo(HaveOccurred())
		out, err := exec.CommandContext(ctx, ctrPath, append([]string{"--address", socket, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "ctr %s: %s", strings.Join(args, " "), out)
	}
	for _, image := range []string{utils.PauseImage, utils.BusyboxImage, utils.WebImage} {
		archive, err := utils.ImageArchive(ctx, image)
		Expect(err).NotTo(HaveOccurred())
		ctr("images", "import", "--all-platforms", "--snapshotter", "overlayfs", archive)
	}
	ctr("images", "tag", "--force", utils.PauseImage, hostSandboxImage)
}

// stopUnits stops what the systemctl shim started on host n: its
// containerd's sandboxes first (their network and mounts), then the
// process.
func stopUnits(n *utils.ClusterNode, unitDir string) error {
	var errs []error
	if n.Mounts != nil {
		errs = append(errs, removeAllSandboxes("unix://"+n.Mounts.HostPath(nodeletCRISocket)))
	}
	pids, _ := filepath.Glob(filepath.Join(unitDir, "*.pid"))
	for _, f := range pids {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid <= 1 {
			continue
		}
		// The unit's process, not one that took its pid since.
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil || filepath.Base(exe) != "containerd" {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(10 * time.Second)
		for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if syscall.Kill(pid, 0) == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return errors.Join(errs...)
}

// removeAllSandboxes stops and removes every sandbox of the containerd at
// endpoint; nothing when it does not answer.
func removeAllSandboxes(endpoint string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := os.Stat(strings.TrimPrefix(endpoint, "unix://")); err != nil {
		return nil
	}
	rs, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(endpoint).WithConnectionTimeout(criTimeout).Build(ctx)
	if err != nil {
		return nil //nolint:nilerr // not running: nothing to remove
	}
	defer rs.Close(ctx)
	sandboxes, err := rs.ListPodSandbox(ctx, nil)
	if err != nil {
		return nil //nolint:nilerr // not answering: the cluster's Stop kills it
	}
	var errs []error
	for _, sb := range sandboxes {
		if err := utils.RemoveSandbox(ctx, rs, sb.GetId()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// csrCommonName is the subject CN of a PEM certificate request.
func csrCommonName(request []byte) string {
	GinkgoHelper()
	block, _ := pem.Decode(request)
	Expect(block).NotTo(BeNil())
	req, err := x509.ParseCertificateRequest(block.Bytes)
	Expect(err).NotTo(HaveOccurred())
	return req.Subject.CommonName
}

// kubectlCombined runs the cluster's admin kubectl and returns its
// standard output, and its error output on failure.
func kubectlCombined(ctx context.Context, c *utils.Cluster, args ...string) (string, error) {
	cmd, err := c.API.Kubectl(ctx, args...)
	if err != nil {
		return "", err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), err
	}
	return string(out), nil
}

func kubectlOut(ctx context.Context, c *utils.Cluster, args ...string) string {
	GinkgoHelper()
	out, err := kubectlCombined(ctx, c, args...)
	Expect(err).NotTo(HaveOccurred(), "kubectl %s: %s", strings.Join(args, " "), out)
	return out
}

func TestInstallDocsParsing(t *testing.T) {
	doc := strings.Join([]string{
		"# Title",
		"## Other",
		"```sh",
		"not this",
		"```",
		"## Install",
		"text",
		"```sh",
		"# a comment, not a heading",
		"kubectl apply -k config/default",
		"```",
		"### Sub",
		"- item:",
		"",
		"  ```sh",
		"  install -d /etc/x   # made",
		"  ssh worker-1 'true'",
		"  ```",
		"```yaml",
		"skipped: true",
		"```",
		"## Next",
		"```sh",
		"nor this",
		"```",
	}, "\n")
	section := markdownSection(doc, "## Install")
	if got, want := shellBlocks(section), []string{
		"# a comment, not a heading\nkubectl apply -k config/default\n",
		"install -d /etc/x   # made\nssh worker-1 'true'\n",
	}; !slices.Equal(got, want) {
		t.Errorf("shellBlocks(markdownSection(## Install)) = %q, want %q", got, want)
	}
	if got := markdownSection(doc, "## Missing"); got != "" {
		t.Errorf("markdownSection(## Missing) = %q, want empty", got)
	}
	if got, want := commandLines("# c\nkubectl get nodes   # all\n\n  install -d /x\n"), []string{"kubectl get nodes", "install -d /x"}; !slices.Equal(got, want) {
		t.Errorf("commandLines() = %q, want %q", got, want)
	}

	tests := []struct {
		name          string
		block         string
		once, perHost string
		wantErr       bool
	}{
		{name: "once, then per host", block: "make image\nscp f worker-1:/tmp/\nssh worker-1 'x'\n",
			once: "make image\n", perHost: "scp f worker-1:/tmp/\nssh worker-1 'x'\n"},
		{name: "per host only", block: "ssh worker-1 'x'\n", perHost: "ssh worker-1 'x'\n"},
		{name: "no host", block: "kubectl apply -k config/default\n", wantErr: true},
		{name: "a line for once after the per-host ones", block: "ssh worker-1 'x'\nkubectl get nodes\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			once, perHost, err := splitPerHost("the block", tt.block)
			if (err != nil) != tt.wantErr {
				t.Fatalf("splitPerHost() error = %v, want error %v", err, tt.wantErr)
			}
			if once != tt.once || perHost != tt.perHost {
				t.Errorf("splitPerHost() = %q, %q, want %q, %q", once, perHost, tt.once, tt.perHost)
			}
		})
	}
}

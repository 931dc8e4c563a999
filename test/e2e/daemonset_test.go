package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/internal/version"
	"github.com/nodelet/nodelet/test/utils"
)

const (
	// kubeletSetupTimeout covers building the kubelet (minutes the first
	// time) and nodelet's image.
	kubeletSetupTimeout = 15 * time.Minute
	// daemonSetTimeout is how long each step of the DaemonSet spec may take:
	// a Node registering, a pod starting through its agent.
	daemonSetTimeout = 2 * time.Minute
)

// The spec runs nodelet the way config/default deploys it, with a real
// kubelet as the host's agent: the kubelet runs nodelet's pod (the
// DaemonSet's template, bound to the kubelet's Node as the DaemonSet
// controller would bind it) from the image hack/image builds, and nodelet
// registers a Node of its own next to the kubelet's. Only what cannot be
// the same on a shared test machine is changed, as an overlay would:
// nodelet's state, log and runtime directories are temporary ones, its
// runtime is a private containerd, and its kubeconfig is written for it.
var _ = Describe("nodelet deployed as a DaemonSet beside a real kubelet", Ordered, func() {
	var (
		admin       client.Client
		kubelet     *utils.Kubelet
		hostCtrd    *utils.Containerd // the kubelet's runtime
		nodeletCtrd *utils.Containerd // nodelet's own (config/host's)
		hostNode    string
		nodeletNode string
		nodeletPod  *corev1.Pod
		podLogsDir  string
	)

	BeforeAll(func(ctx SpecContext) {
		var err error
		admin, err = apiServer.AdminClient()
		Expect(err).NotTo(HaveOccurred())
		hostNode = fmt.Sprintf("host-%d", GinkgoParallelProcess())
		nodeletNode = hostNode + "-nodelet"

		By("building nodelet's image without Docker")
		archive := filepath.Join(GinkgoT().TempDir(), "nodelet-image.tar")
		root, err := utils.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		build := exec.CommandContext(ctx, "go", "run", "./hack/image", "--version", "v0.0.0-e2e", "--trimpath=false", "--output", archive)
		build.Dir = root
		out, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "hack/image:\n%s", out)

		By("starting the kubelet's containerd, with nodelet's image imported")
		hostCtrd = utils.MustStartContainerd(ctx, utils.ContainerdOptions{Images: []string{utils.PauseImage}})
		imp := hostCtrd.Ctr(ctx, "images", "import", "--snapshotter", "overlayfs", archive)
		out, err = imp.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "ctr images import:\n%s", out)

		By("starting nodelet's own containerd")
		nodeletCtrd = utils.MustStartContainerd(ctx, utils.ContainerdOptions{})

		By("starting a real kubelet as " + hostNode)
		kubelet, err = utils.StartKubelet(ctx, utils.KubeletOptions{NodeName: hostNode, API: apiServer, Containerd: hostCtrd})
		if kubelet != nil {
			DeferCleanup(kubelet.Stop)
		}
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(deleteNode, admin, hostNode)
		waitNodeReady(ctx, admin, hostNode, "the kubelet", kubelet.LogTail)
	}, NodeTimeout(kubeletSetupTimeout))

	JustAfterEach(func() {
		if !CurrentSpecReport().Failed() {
			return
		}
		if kubelet != nil {
			GinkgoWriter.Printf("kubelet log (%s):\n%s\n", kubelet.LogPath, kubelet.LogTail(60))
		}
		if podLogsDir != "" {
			GinkgoWriter.Printf("nodelet's container log:\n%s\n", containerLogTail(podLogsDir))
		}
	})

	It("runs nodelet as the kubelet's pod, and nodelet registers a tainted Node of its own", func(ctx SpecContext) {
		state, cleanupState, err := utils.SharedDir("nodelet-ds-state-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(cleanupState)
		podLogsDir = GinkgoT().TempDir()
		hostRoot, cleanupHostRoot, err := utils.SharedRootBind("nodelet-ds-hostroot-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(cleanupHostRoot)

		By("applying config/default, with the DaemonSet's pod adapted to this machine")
		objs := renderDefault(ctx)
		configMap, ds := adaptForTest(objs, state, podLogsDir, hostRoot, nodeletCtrd.Endpoint())
		for _, u := range objs {
			if u.GetKind() == "DaemonSet" {
				continue // no DaemonSet controller here: the pod is made below
			}
			if u.GetKind() == "ConfigMap" && u.GetName() == configMap.GetName() {
				u = configMap
			}
			Expect(admin.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("e2e"), client.ForceOwnership)).To(Succeed(), "applying %s %s", u.GetKind(), u.GetName())
		}
		DeferCleanup(deleteNamespace, admin, ds.Namespace)
		By("making the client CA ConfigMap the DaemonSet mounts, as docs/deploying.md says, from the API server's kubelet client CA")
		kubectl(ctx, "-n", ds.Namespace, "create", "configmap", "nodelet-client-ca", "--from-file=ca.crt="+apiServer.KubeletClientCA.CertFile)
		nodeletCfg, err := apiServer.NodeUserConfig(nodeletNode)
		Expect(err).NotTo(HaveOccurred())
		Expect(utils.WriteKubeconfig(filepath.Join(state, "kubeconfig"), nodeletCfg, "system:node:"+nodeletNode)).To(Succeed())
		DeferCleanup(deleteNode, admin, nodeletNode)

		By("binding the DaemonSet's pod to " + hostNode + ", as the DaemonSet controller would")
		nodeletPod = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "nodelet-" + hostNode, Namespace: ds.Namespace, Labels: ds.Spec.Template.Labels},
			Spec:       *ds.Spec.Template.Spec.DeepCopy(),
		}
		nodeletPod.Spec.NodeName = hostNode
		Expect(admin.Create(ctx, nodeletPod)).To(Succeed())
		DeferCleanup(deletePodAndWait, admin, nodeletPod)
		utils.WaitForPod(ctx, admin, nodeletPod.Namespace, nodeletPod.Name, daemonSetTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(podReady(p)).To(BeTrue(), "nodelet's readiness probe on /readyz")
		})

		By("nodelet registering " + nodeletNode + " with its taint, label, version and the host's identity")
		waitNodeReady(ctx, admin, nodeletNode, "nodelet", func(int) string { return containerLogTail(podLogsDir) })
		node := &corev1.Node{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: nodeletNode}, node)).To(Succeed())
		Expect(node.Spec.Taints).To(ContainElement(And(
			HaveField("Key", "nodelet.io/agent"), HaveField("Value", "nodelet"), HaveField("Effect", corev1.TaintEffectNoSchedule))))
		Expect(node.Labels).To(HaveKeyWithValue("nodelet.io/agent", "nodelet"))
		Expect(node.Status.NodeInfo.KubeletVersion).To(Equal(version.KubernetesVersion + "+" + version.BuildMetadata("v0.0.0-e2e")))
		Expect(node.Status.DaemonEndpoints.KubeletEndpoint.Port).To(BeEquivalentTo(10350))
		machineID, err := os.ReadFile("/etc/machine-id")
		Expect(err).NotTo(HaveOccurred())
		Expect(node.Status.NodeInfo.MachineID).To(Equal(strings.TrimSpace(string(machineID))), "the host's machine ID, not the image's")
		kubeletNode := &corev1.Node{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: hostNode}, kubeletNode)).To(Succeed())
		Expect(kubeletNode.Status.NodeInfo.KubeletVersion).To(Equal(version.KubernetesVersion), "both report the same Kubernetes version")

		ns := utils.NewNamespace(ctx, admin)
		By("running a pod that tolerates the taint on nodelet's Node")
		tolerating := busyboxPod(ns, "tolerating", nodeletNode)
		tolerating.Spec.Tolerations = []corev1.Toleration{{Key: "nodelet.io/agent", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		Expect(admin.Create(ctx, tolerating)).To(Succeed())
		DeferCleanup(deletePodAndWait, admin, tolerating)
		utils.WaitForPod(ctx, admin, ns, tolerating.Name, daemonSetTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		})

		By("refusing a pod bound to it that does not tolerate the taint")
		intolerant := busyboxPod(ns, "intolerant", nodeletNode)
		Expect(admin.Create(ctx, intolerant)).To(Succeed())
		utils.WaitForPod(ctx, admin, ns, intolerant.Name, daemonSetTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(p.Status.Reason).To(Equal("TaintToleration"))
		})

		By("leaving the kubelet's pod and runtime alone, and the kubelet leaving nodelet's")
		Consistently(func(g Gomega) {
			p := utils.GetPod(ctx, admin, nodeletPod.Namespace, nodeletPod.Name)(g)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(p.Status.ContainerStatuses).To(HaveEach(HaveField("RestartCount", BeZero())))
		}).WithTimeout(5 * time.Second).WithPolling(time.Second).Should(Succeed())
		Expect(readySandboxes(ctx, hostCtrd)).To(ConsistOf(nodeletPod.Name), "the kubelet's containerd runs nodelet's pod only")
		Expect(readySandboxes(ctx, nodeletCtrd)).To(ConsistOf(tolerating.Name), "nodelet's containerd runs the tolerating pod only")
		Expect(kubelet.Running()).To(BeTrue())

		By("running a pod with hostPath volumes on " + nodeletNode + ", resolved on the host, not in nodelet's container")
		hostDir := GinkgoT().TempDir() // the host's: nodelet's container sees it under hostRoot only
		Expect(os.MkdirAll(filepath.Join(hostDir, "real"), 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(hostDir, "real", "greeting"), []byte("hello from the host\n"), 0o644)).To(Succeed())
		// An absolute link means the host's path: in nodelet's container it
		// is <hostRoot>/<hostDir>/real, never <hostDir>/real there.
		Expect(os.Symlink(filepath.Join(hostDir, "real"), filepath.Join(hostDir, "link"))).To(Succeed())
		made := filepath.Join(hostDir, "made", "by", "nodelet")
		hostPaths := busyboxPod(ns, "host-paths", nodeletNode)
		hostPaths.Spec.Tolerations = tolerating.Spec.Tolerations
		hostPaths.Spec.Containers[0].Command = []string{"sh", "-c", "cat /greeting/greeting /linked/greeting; echo logged; exec sleep 3600"}
		hostPaths.Spec.Volumes = []corev1.Volume{
			{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostDir, Type: ptr.To(corev1.HostPathDirectory)}}},
			{Name: "made", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: made, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}},
		}
		hostPaths.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
			{Name: "host", MountPath: "/greeting", SubPath: "real"},
			{Name: "host", MountPath: "/linked", SubPath: "link"},
			{Name: "made", MountPath: "/made"},
		}
		Expect(admin.Create(ctx, hostPaths)).To(Succeed())
		DeferCleanup(deletePodAndWait, admin, hostPaths)
		utils.WaitForPod(ctx, admin, ns, hostPaths.Name, daemonSetTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		})
		info, err := os.Stat(made)
		Expect(err).NotTo(HaveOccurred(), "the DirectoryOrCreate hostPath on the host")
		Expect(info.IsDir()).To(BeTrue())
		pid := nodeletPID(state)
		_, err = os.Lstat(fmt.Sprintf("/proc/%d/root%s", pid, filepath.Join(hostDir, "made")))
		Expect(err).To(MatchError(os.ErrNotExist), "nodelet made the DirectoryOrCreate hostPath in its own container")

		By("kubectl logs through the API server, which calls nodelet's node API with its kubelet client certificate")
		Eventually(func(g Gomega) {
			g.Expect(kubectlOutput(ctx, g, "-n", ns, "logs", hostPaths.Name)).To(Equal("hello from the host\nhello from the host\nlogged\n"))
		}).WithContext(ctx).WithTimeout(daemonSetTimeout).WithPolling(time.Second).Should(Succeed())

		By("kubectl exec the same way, writing to the host through the DirectoryOrCreate volume")
		out := kubectl(ctx, "-n", ns, "exec", hostPaths.Name, "--", "sh", "-c", "echo written in the pod > /made/by-exec && cat /linked/greeting")
		Expect(out).To(Equal("hello from the host\n"))
		Expect(os.ReadFile(filepath.Join(made, "by-exec"))).To(BeEquivalentTo("written in the pod\n"))
	}, SpecTimeout(6*daemonSetTimeout))

	It("refuses to run the Node a live kubelet runs", func(ctx SpecContext) {
		n, err := utils.StartNodelet(ctx, utils.NodeletOptions{NodeName: hostNode, API: apiServer, Containerd: nodeletCtrd})
		if n != nil {
			DeferCleanup(n.Cleanup)
		}
		Expect(err).To(MatchError(ContainSubstring("nodelet exited during start-up")))
		Expect(n.LogTail(20)).To(ContainSubstring(`node \"` + hostNode + `\" is run by another agent (kubeletVersion ` + version.KubernetesVersion))
		Expect(kubelet.Running()).To(BeTrue())
	}, SpecTimeout(daemonSetTimeout))
})

// kubectl runs the envtest-built kubectl with the admin kubeconfig and
// returns its standard output.
func kubectl(ctx context.Context, args ...string) string {
	GinkgoHelper()
	return kubectlOutput(ctx, Default, args...)
}

func kubectlOutput(ctx context.Context, g Gomega, args ...string) string {
	cmd, err := apiServer.Kubectl(ctx, args...)
	g.Expect(err).NotTo(HaveOccurred())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	g.Expect(err).NotTo(HaveOccurred(), "kubectl %s: %s", strings.Join(args, " "), stderr.String())
	return string(out)
}

// nodeletPID finds the process of the nodelet whose kubeconfig is under
// state: the DaemonSet's container, seen through hostPID.
func nodeletPID(state string) int {
	GinkgoHelper()
	want := "--kubeconfig=" + filepath.Join(state, "kubeconfig")
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	Expect(err).NotTo(HaveOccurred())
	for _, p := range procs {
		cmdline, err := os.ReadFile(p)
		if err != nil || !slices.Contains(strings.Split(string(cmdline), "\x00"), want) {
			continue
		}
		var pid int
		_, err = fmt.Sscanf(p, "/proc/%d/cmdline", &pid)
		Expect(err).NotTo(HaveOccurred())
		return pid
	}
	Fail("no nodelet process runs with " + want)
	return 0
}

// renderDefault renders config/default with the envtest-built kubectl.
func renderDefault(ctx context.Context) []*unstructured.Unstructured {
	GinkgoHelper()
	root, err := utils.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(apiServer.Env.BinaryAssetsDirectory, "kubectl"), "kustomize", filepath.Join(root, "config", "default"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred(), "kubectl kustomize config/default: %s", stderr.String())
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			Expect(errors.Is(err, io.EOF)).To(BeTrue(), "decoding config/default: %v", err)
			return objs
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// adaptForTest returns config/default's ConfigMap and DaemonSet with the
// host paths nodelet hands its runtime moved to state and podLogs (at
// the same paths inside the pod, as in config/default), the host's / it
// mounts at hostRoot taken from hostRootBind (the machine's / alone, made
// a shared mount), its log links under podLogs, its runtime
// endpoint at endpoint, its kubeconfig under state, and disk pressure only
// at 1% free. Everything else
// (ports, taint, identity, mounts of the host's files, privileges) is
// config/default's.
func adaptForTest(objs []*unstructured.Unstructured, state, podLogs, hostRootBind, endpoint string) (*unstructured.Unstructured, *appsv1.DaemonSet) {
	GinkgoHelper()
	var configMap *unstructured.Unstructured
	ds := &appsv1.DaemonSet{}
	for _, u := range objs {
		switch u.GetKind() {
		case "ConfigMap":
			// nodelet's own, not the CSR approver's.
			if _, found, _ := unstructured.NestedString(u.Object, "data", "nodelet.yaml"); found {
				configMap = u.DeepCopy()
			}
		case "DaemonSet":
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ds)).To(Succeed())
		}
	}
	Expect(configMap).NotTo(BeNil())
	data, _, _ := unstructured.NestedString(configMap.Object, "data", "nodelet.yaml")
	cfg := map[string]any{}
	Expect(yaml.Unmarshal([]byte(data), &cfg)).To(Succeed())
	runtimeDir := filepath.Dir(strings.TrimPrefix(endpoint, "unix://"))
	moved := map[string]string{ // config/default's path → this test's
		cfg["rootDir"].(string):    state,
		cfg["podLogsDir"].(string): podLogs,
		filepath.Dir(strings.TrimPrefix(cfg["containerRuntimeEndpoint"].(string), "unix://")): runtimeDir,
		cfg["containerLogLinksDir"].(string):                                                  filepath.Join(podLogs, "links"), // never the machine's
		// The runtime's root, which image GC measures at the path the
		// runtime reports: the test containerd's.
		"/var/lib/nodelet-containerd": filepath.Join(runtimeDir, "root"),
		// The machine's / is a private mount, which the runtime refuses to
		// mount with HostToContainer propagation.
		"/": hostRootBind,
	}
	cfg["rootDir"], cfg["podLogsDir"], cfg["containerRuntimeEndpoint"] = state, podLogs, endpoint
	// Its own pod cgroups, never the machine's /nodelet.
	cfg["cgroupRoot"] = utils.E2ECgroupParent + "/" + filepath.Base(state)
	DeferCleanup(utils.RemoveCgroupTree, cfg["cgroupRoot"])
	cfg["containerLogLinksDir"] = filepath.Join(podLogs, "links")
	// Disk pressure only when the machine is really short, as for the
	// harness's agents: the machine's disk, shared with build caches, is
	// not the test's.
	cfg["evictionHard"] = map[string]any{"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"}
	b, err := yaml.Marshal(cfg)
	Expect(err).NotTo(HaveOccurred())
	Expect(unstructured.SetNestedField(configMap.Object, string(b), "data", "nodelet.yaml")).To(Succeed())

	spec := &ds.Spec.Template.Spec
	for i := range spec.Volumes {
		if hp := spec.Volumes[i].HostPath; hp != nil && moved[hp.Path] != "" {
			hp.Path = moved[hp.Path]
		}
	}
	c := &spec.Containers[0]
	for i := range c.VolumeMounts {
		if to := moved[c.VolumeMounts[i].MountPath]; to != "" {
			c.VolumeMounts[i].MountPath = to
		}
	}
	// The kubeconfig is written for nodelet under its state directory, so
	// the host's bootstrap kubeconfig (absent here) is not needed, as on a
	// host that joined before; its directory is a test one, not /etc's.
	for i := range spec.Volumes {
		if hp := spec.Volumes[i].HostPath; hp != nil && hp.Path == "/etc/nodelet/bootstrap" {
			hp.Path = filepath.Join(state, "bootstrap")
		}
	}
	for i, a := range c.Args {
		if strings.HasPrefix(a, "--kubeconfig=") {
			c.Args[i] = "--kubeconfig=" + filepath.Join(state, "kubeconfig")
		}
	}
	return configMap, ds
}

func busyboxPod(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "sleep", Image: utils.BusyboxImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"sleep", "3600"},
			}},
		},
	}
}

func podReady(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

// waitNodeReady waits for a Node to be Ready, printing its agent's log
// tail when it is not.
func waitNodeReady(ctx context.Context, c client.Client, name, agent string, logTail func(int) string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		n := &corev1.Node{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, n)).To(Succeed())
		g.Expect(n.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionTrue))))
	}).WithContext(ctx).WithTimeout(daemonSetTimeout).WithPolling(time.Second).Should(Succeed(),
		func() string { return agent + " log:\n" + logTail(40) })
}

// readySandboxes lists the pod names of a containerd's ready sandboxes.
func readySandboxes(ctx context.Context, c *utils.Containerd) []string {
	GinkgoHelper()
	rs, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(c.Endpoint()).WithConnectionTimeout(criTimeout).Build(ctx)
	Expect(err).NotTo(HaveOccurred())
	defer rs.Close(ctx)
	sandboxes, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	})
	Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, s := range sandboxes {
		names = append(names, s.GetMetadata().GetName())
	}
	return names
}

// containerLogTail returns the end of the container logs under a pod logs
// directory.
func containerLogTail(dir string) string {
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*", "*.log"))
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		fmt.Fprintf(&b, "%s:\n%s\n", f, strings.Join(lines, "\n"))
	}
	return b.String()
}

func deleteNode(ctx context.Context, c client.Client, name string) error {
	return client.IgnoreNotFound(c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}))
}

func deleteNamespace(ctx context.Context, c client.Client, name string) error {
	return client.IgnoreNotFound(c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
}

// deletePodAndWait deletes a pod and waits until its agent has removed it.
func deletePodAndWait(ctx context.Context, c client.Client, p *corev1.Pod) error {
	if err := client.IgnoreNotFound(c.Delete(ctx, p)); err != nil {
		return err
	}
	deadline := time.Now().Add(daemonSetTimeout)
	for time.Now().Before(deadline) {
		err := c.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{})
		if client.IgnoreNotFound(err) == nil && err != nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("pod %s/%s still exists %s after its deletion", p.Namespace, p.Name, daemonSetTimeout)
}

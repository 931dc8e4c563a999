package controller_test

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/agent"
	"github.com/nodelet/nodelet/internal/controller"
	"github.com/nodelet/nodelet/internal/nodeinfo"
	"github.com/nodelet/nodelet/internal/version"
	"github.com/nodelet/nodelet/test/utils"
)

var _ = Describe("Node controller", func() {
	It("lists the CSI volumes on disk in the status's volumesInUse until they are torn down", func(ctx SpecContext) {
		name := nodeName()
		// Left on disk before the start, as by a publish before a crash: the
		// tracker's first list reads every pod's directory (the records of a
		// live publish are noted by the publisher, see package csi).
		var staging string
		a := startAgent(name, func(c *v1alpha1.NodeletConfiguration) {
			By("recording a pod's CSI volume and a staging as a publish leaves them")
			podVolume := filepath.Join(c.RootDir, "pods", "uid-1", "volumes", "kubernetes.io~csi", "pv-1")
			staging = filepath.Join(c.RootDir, "plugins", "kubernetes.io", "csi", "csi.example.com", "0123abcd")
			for dir, handle := range map[string]string{podVolume: "vol-1", staging: "vol-2"} {
				Expect(os.MkdirAll(dir, 0o750)).To(Succeed())
				Expect(os.WriteFile(filepath.Join(dir, "vol_data.json"),
					[]byte(`{"driverName":"csi.example.com","volumeHandle":"`+handle+`"}`), 0o600)).To(Succeed())
			}
		})
		waitReady(name, startTimeout)

		Eventually(func(g Gomega) {
			g.Expect(getNode(g, name).Status.VolumesInUse).To(Equal([]corev1.UniqueVolumeName{
				"kubernetes.io/csi/csi.example.com^vol-1", "kubernetes.io/csi/csi.example.com^vol-2",
			}))
		}).WithContext(ctx).WithTimeout(4 * statusUpdateFrequency).Should(Succeed())

		By("tearing them down")
		Expect(os.RemoveAll(filepath.Join(a.cfg.RootDir, "pods", "uid-1"))).To(Succeed())
		Expect(os.RemoveAll(staging)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(getNode(g, name).Status.VolumesInUse).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(4 * statusUpdateFrequency).Should(Succeed())
	})

	It("registers a Ready Node with its capacity, system info, addresses, labels and taints", func(ctx SpecContext) {
		name := nodeName()
		startAgent(name, func(c *v1alpha1.NodeletConfiguration) {
			c.MaxPods = 42
			c.NodeLabels = map[string]string{"example.com/pool": "blue"}
			c.RegisterWithTaints = []corev1.Taint{{Key: "example.com/dedicated", Value: "test", Effect: corev1.TaintEffectNoSchedule}}
		})
		node := waitReady(name, startTimeout)

		By("reporting the host's resources")
		meminfo, err := os.ReadFile(nodeinfo.MeminfoPath)
		Expect(err).NotTo(HaveOccurred())
		mem, err := nodeinfo.ParseMeminfo(meminfo)
		Expect(err).NotTo(HaveOccurred())
		Expect(node.Status.Capacity.Cpu().Value()).To(BeEquivalentTo(runtime.NumCPU()))
		Expect(node.Status.Capacity.Memory().Value()).To(Equal(mem.TotalBytes))
		Expect(node.Status.Capacity.Pods().Value()).To(BeEquivalentTo(42))
		Expect(node.Status.Capacity.StorageEphemeral().Value()).To(BeNumerically(">", 0))
		hugePages := mem.HugePagesTotal * mem.HugePageSizeBytes
		threshold := resource.MustParse("100Mi")
		wantAllocMemory := mem.TotalBytes - threshold.Value() - hugePages
		Expect(node.Status.Allocatable.Memory().Value()).To(Equal(wantAllocMemory), "capacity minus the default memory.available threshold")
		Expect(node.Status.Allocatable.StorageEphemeral().Value()).To(BeNumerically("<", node.Status.Capacity.StorageEphemeral().Value()))

		By("reporting system info, with the real containerd's version")
		bootID, err := os.ReadFile(nodeinfo.BootIDPath)
		Expect(err).NotTo(HaveOccurred())
		info := node.Status.NodeInfo
		Expect(info.ContainerRuntimeVersion).To(HavePrefix("containerd://"))
		Expect(info.KubeletVersion).To(Equal(version.KubeletVersion()))
		Expect(info.OperatingSystem).To(Equal(runtime.GOOS))
		Expect(info.Architecture).To(Equal(runtime.GOARCH))
		Expect(info.BootID).To(Equal(strings.TrimSpace(string(bootID))))
		Expect(info.KernelVersion).NotTo(BeEmpty())
		Expect(info.OSImage).NotTo(BeEmpty())
		Expect(node.Status.DaemonEndpoints.KubeletEndpoint.Port).To(BeEquivalentTo(v1alpha1.DefaultServerPort))
		Expect(node.Status.Images).To(ContainElement(HaveField("Names", ContainElement(ContainSubstring(utils.PauseImage)))))

		By("reporting a host address and the node name")
		Expect(node.Status.Addresses).To(ContainElement(corev1.NodeAddress{Type: corev1.NodeHostName, Address: name}))
		Expect(address(node, corev1.NodeInternalIP)).To(BeElementOf(hostAddresses()))

		By("reporting conditions the kubelet's way")
		for t, reason := range map[corev1.NodeConditionType]string{
			corev1.NodeMemoryPressure: nodeinfo.ReasonSufficientMemory,
			corev1.NodeDiskPressure:   nodeinfo.ReasonNoDiskPressure,
			corev1.NodePIDPressure:    nodeinfo.ReasonSufficientPID,
		} {
			Expect(condition(node, t)).To(HaveField("Reason", reason), string(t))
		}
		Expect(condition(node, corev1.NodeReady)).To(HaveField("Message", nodeinfo.MessageReady))

		By("registering with the configured labels and taints")
		Expect(node.Labels).To(HaveKeyWithValue(corev1.LabelHostname, name))
		Expect(node.Labels).To(HaveKeyWithValue(corev1.LabelOSStable, runtime.GOOS))
		Expect(node.Labels).To(HaveKeyWithValue(corev1.LabelArchStable, runtime.GOARCH))
		Expect(node.Labels).To(HaveKeyWithValue("example.com/pool", "blue"))
		Expect(node.Spec.Taints).To(ContainElement(corev1.Taint{Key: "example.com/dedicated", Value: "test", Effect: corev1.TaintEffectNoSchedule}))
	})

	It("refuses at setup node labels that NodeRestriction forbids a node to set", func() {
		name := nodeName()
		cfg := &v1alpha1.NodeletConfiguration{
			NodeName:           name,
			RootDir:            GinkgoT().TempDir(),
			HealthzBindAddress: "0",
			MetricsBindAddress: "0",
			NodeLabels:         map[string]string{"node-role.kubernetes.io/worker": "", "example.com/pool": "blue"},
		}
		v1alpha1.SetDefaults(cfg)
		mgr, err := agent.NewManager(nodeConfig(name), cfg)
		Expect(err).NotTo(HaveOccurred())
		err = controller.Default.Setup(mgr, &controller.Deps{Config: cfg}, []string{"node"})
		Expect(err).To(MatchError(ContainSubstring("node-role.kubernetes.io/worker")))
		Expect(err.Error()).NotTo(ContainSubstring("example.com/pool"))
	})

	It("keeps the labels, annotations and taints others add, across status writes and a restart", func(ctx SpecContext) {
		name := nodeName()
		reportEveryTick := func(c *v1alpha1.NodeletConfiguration) {
			c.NodeStatusReportFrequency.Duration = statusUpdateFrequency
			c.NodeLabels = map[string]string{"example.com/pool": "blue"}
		}
		a := startAgent(name, reportEveryTick)
		node := waitReady(name, startTimeout)

		By("adding a label, an annotation and a taint as an admin")
		adminTaint := corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule}
		patch := client.MergeFrom(node.DeepCopy())
		node.Labels["example.com/rack"] = "r1"
		node.Annotations = map[string]string{"example.com/owner": "team-a"}
		node.Spec.Taints = append(node.Spec.Taints, adminTaint)
		Expect(admin.Patch(ctx, node, patch)).To(Succeed())

		expectKept := func(g Gomega, n *corev1.Node) {
			g.Expect(n.Labels).To(HaveKeyWithValue("example.com/rack", "r1"))
			g.Expect(n.Annotations).To(HaveKeyWithValue("example.com/owner", "team-a"))
			g.Expect(n.Spec.Taints).To(ContainElement(adminTaint))
		}
		waitStatusWrites(name, 2, expectKept)

		By("restarting the agent after the admin removed a label nodelet owns")
		a.stop()
		node = getNode(Default, name)
		patch = client.MergeFrom(node.DeepCopy())
		delete(node.Labels, "example.com/pool")
		Expect(admin.Patch(ctx, node, patch)).To(Succeed())
		startAgent(name, reportEveryTick)
		waitStatusWrites(name, 2, func(g Gomega, n *corev1.Node) {
			expectKept(g, n)
			g.Expect(n.Labels).To(HaveKeyWithValue("example.com/pool", "blue"), "nodelet's label is put back on adoption")
			g.Expect(n.Annotations).To(HaveKeyWithValue(nodeinfo.ControllerManagedAttachDetachAnnotation, "true"), "the attach/detach controller manages the adopted node's volumes")
			g.Expect(n.UID).To(Equal(node.UID), "the Node is adopted, not re-created")
		})
	})

	It("re-creates a deleted Node within twice the status update frequency", func(ctx SpecContext) {
		name := nodeName()
		startAgent(name)
		node := waitReady(name, startTimeout)

		Expect(admin.Delete(ctx, node)).To(Succeed())
		Eventually(func(g Gomega) {
			n := getNode(g, name)
			g.Expect(n.UID).NotTo(Equal(node.UID))
			g.Expect(condition(n, corev1.NodeReady)).To(HaveField("Status", corev1.ConditionTrue))
			g.Expect(n.Labels).To(HaveKeyWithValue(corev1.LabelHostname, name))
		}).WithTimeout(2 * statusUpdateFrequency).WithPolling(50 * time.Millisecond).Should(Succeed())

		By("moving the lease's owner to the new Node")
		Eventually(func(g Gomega) {
			n := getNode(g, name)
			g.Expect(getLease(g, name).OwnerReferences).To(ConsistOf(HaveField("UID", n.UID)))
		}).WithTimeout(startTimeout).Should(Succeed())
	})

	It("reports NotReady naming the runtime while containerd is stopped, and Ready once it is back", func(ctx SpecContext) {
		name := nodeName()
		startAgent(name)
		waitReady(name, startTimeout)

		Expect(containerd.StopProcess()).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			if !containerd.Running() {
				Expect(containerd.StartProcess(ctx)).To(Succeed())
			}
		})
		Eventually(func(g Gomega) {
			ready := condition(getNode(g, name), corev1.NodeReady)
			g.Expect(ready.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(nodeinfo.ReasonNotReady))
			g.Expect(ready.Message).To(ContainSubstring("container runtime is down"))
		}).WithTimeout(2 * statusUpdateFrequency).WithPolling(50 * time.Millisecond).Should(Succeed())

		Expect(containerd.StartProcess(ctx)).To(Succeed())
		waitReady(name, runtimeRecoveryTimeout)

		By("recording the kubelet's Node events for each transition, and at start")
		Eventually(func(g Gomega) {
			reasons := nodeEventReasons(g, name)
			for _, r := range []string{nodeinfo.EventStarting, nodeinfo.EventNodeHasSufficientMemory, nodeinfo.EventNodeHasNoDiskPressure,
				nodeinfo.EventNodeHasSufficientPID, nodeinfo.EventNodeReady, nodeinfo.EventNodeNotReady} {
				g.Expect(reasons).To(ContainElement(r))
			}
		}).WithTimeout(startTimeout).Should(Succeed())
	})

	It("renews its Lease every renew interval, owned by its Node", func(ctx SpecContext) {
		name := nodeName()
		startAgent(name)
		node := waitReady(name, startTimeout)

		var last time.Time
		Eventually(func(g Gomega) {
			l := getLease(g, name)
			g.Expect(l.Spec.HolderIdentity).To(HaveValue(Equal(name)))
			g.Expect(l.Spec.LeaseDurationSeconds).To(HaveValue(BeEquivalentTo(leaseDurationSeconds)))
			g.Expect(l.OwnerReferences).To(ConsistOf(corev1OwnerRef(node)))
			last = l.Spec.RenewTime.Time
		}).WithTimeout(startTimeout).Should(Succeed())

		for range 3 {
			var next time.Time
			Eventually(func(g Gomega) {
				next = getLease(g, name).Spec.RenewTime.Time
				g.Expect(next).To(BeTemporally(">", last))
			}).WithTimeout(2 * renewInterval).WithPolling(20 * time.Millisecond).Should(Succeed())
			Expect(next.Sub(last)).To(BeNumerically(">=", renewInterval*9/10), "renewed sooner than the renew interval")
			last = next
		}
	})

	It("resumes renewals and status writes after the API server restarts, without exiting", func(ctx SpecContext) {
		name := nodeName()
		a := startAgent(name, func(c *v1alpha1.NodeletConfiguration) {
			c.NodeStatusReportFrequency.Duration = statusUpdateFrequency
		})
		waitReady(name, startTimeout)

		restartAPIServer(apiServerDowntime)
		back := time.Now()
		Eventually(func(g Gomega) {
			g.Expect(getLease(g, name).Spec.RenewTime.Time).To(BeTemporally(">", back))
			n := getNode(g, name)
			g.Expect(condition(n, corev1.NodeReady).LastHeartbeatTime.Time).To(BeTemporally(">", back))
		}).WithTimeout(apiServerRecoveryTimeout).Should(Succeed())
		Expect(a.running()).To(BeTrue(), "the manager must survive the API server's absence")
	})

	It("runs three agents for three nodes on one API server, each with its own Node and Lease", func(ctx SpecContext) {
		names := []string{nodeName(), nodeName(), nodeName()}
		ips := []string{"192.0.2.11", "192.0.2.12", "192.0.2.13"}
		for i, name := range names {
			startAgent(name, func(c *v1alpha1.NodeletConfiguration) { c.NodeIP = ips[i] })
		}
		for i, name := range names {
			node := waitReady(name, startTimeout)
			Expect(node.Labels).To(HaveKeyWithValue(corev1.LabelHostname, name))
			Expect(node.Status.Addresses).To(ConsistOf(
				corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ips[i]},
				corev1.NodeAddress{Type: corev1.NodeHostName, Address: name}))
			Eventually(func(g Gomega) {
				l := getLease(g, name)
				g.Expect(l.Spec.HolderIdentity).To(HaveValue(Equal(name)))
				g.Expect(l.OwnerReferences).To(ConsistOf(corev1OwnerRef(node)))
			}).WithTimeout(startTimeout).Should(Succeed())
		}
		By("refusing, as the Node authorizer does, one node's identity writing another's objects")
		other := getNode(Default, names[1])
		intruder, err := client.New(nodeConfig(names[0]), client.Options{})
		Expect(err).NotTo(HaveOccurred())
		patch := client.MergeFrom(other.DeepCopy())
		other.Labels["example.com/touched"] = "yes"
		Expect(intruder.Patch(ctx, other, patch)).NotTo(Succeed())
	})
})

// waitReady waits until the Node is registered and Ready, and returns it.
func waitReady(name string, timeout time.Duration) *corev1.Node {
	GinkgoHelper()
	var node *corev1.Node
	Eventually(func(g Gomega) {
		node = getNode(g, name)
		ready := condition(node, corev1.NodeReady)
		g.Expect(ready.Status).To(Equal(corev1.ConditionTrue), ready.Message)
		g.Expect(ready.Reason).To(Equal(nodeinfo.ReasonReady))
	}).WithTimeout(timeout).Should(Succeed())
	return node
}

// waitStatusWrites waits until the status was written n more times (the
// Ready heartbeat moved n report intervals on) and check holds then.
func waitStatusWrites(name string, n int, check func(Gomega, *corev1.Node)) {
	GinkgoHelper()
	start := condition(getNode(Default, name), corev1.NodeReady).LastHeartbeatTime.Time
	Eventually(func(g Gomega) {
		node := getNode(g, name)
		hb := condition(node, corev1.NodeReady).LastHeartbeatTime.Time
		g.Expect(hb.Sub(start)).To(BeNumerically(">=", time.Duration(n)*statusUpdateFrequency))
		check(g, node)
	}).WithTimeout(startTimeout).Should(Succeed())
}

func getNode(g Gomega, name string) *corev1.Node {
	GinkgoHelper()
	node := &corev1.Node{}
	g.Expect(admin.Get(suiteCtx, types.NamespacedName{Name: name}, node)).To(Succeed())
	return node
}

// nodeEventReasons lists the reasons of the Events recorded on the Node
// name, which the kubelet names by the node's name as its UID too.
func nodeEventReasons(g Gomega, name string) []string {
	GinkgoHelper()
	var events corev1.EventList
	g.Expect(admin.List(suiteCtx, &events, client.InNamespace(corev1.NamespaceDefault))).To(Succeed())
	var out []string
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == name && string(e.InvolvedObject.UID) == name {
			g.Expect(e.Message).To(Or(HavePrefix("Node "+name+" status is now: "), Equal("Starting nodelet.")))
			out = append(out, e.Reason)
		}
	}
	return out
}

func getLease(g Gomega, name string) *coordinationv1.Lease {
	GinkgoHelper()
	l := &coordinationv1.Lease{}
	g.Expect(admin.Get(suiteCtx, types.NamespacedName{Namespace: corev1.NamespaceNodeLease, Name: name}, l)).To(Succeed())
	return l
}

// condition returns the node's condition of type t, or an empty one.
func condition(node *corev1.Node, t corev1.NodeConditionType) corev1.NodeCondition {
	for _, c := range node.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return corev1.NodeCondition{}
}

func address(node *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range node.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return ""
}

func hostAddresses() []string {
	GinkgoHelper()
	addrs, err := net.InterfaceAddrs()
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			out = append(out, n.IP.String())
		}
	}
	return out
}

func corev1OwnerRef(node *corev1.Node) OmegaMatcher {
	return And(HaveField("APIVersion", "v1"), HaveField("Kind", "Node"), HaveField("Name", node.Name), HaveField("UID", node.UID))
}

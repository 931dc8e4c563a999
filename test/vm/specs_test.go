package vm

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ocgroups "github.com/opencontainers/cgroups"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

var _ = Describe("nodelet under systemd on cgroup v2", Ordered, func() {
	// qosNS holds the three pods of the QoS spec, which the restart
	// specs check again.
	var qosNS string
	qosPods := map[string]corev1.PodQOSClass{
		"guaranteed": corev1.PodQOSGuaranteed, "burstable": corev1.PodQOSBurstable, "besteffort": corev1.PodQOSBestEffort,
	}

	JustAfterEach(func(ctx SpecContext) {
		if CurrentSpecReport().Failed() {
			out, err := inGuest(ctx, "journalctl -u nodelet --no-pager | tail -n 60; systemctl status containerd --no-pager | head -5")
			GinkgoWriter.Printf("nodelet's journal in the guest (%v):\n%s\n", err, out)
		}
	})

	It("joins by TLS bootstrap as a systemd service and reports Ready", func(ctx SpecContext) {
		node := &corev1.Node{}
		Eventually(func(g Gomega) {
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: nodeName}, node)).To(Succeed())
			g.Expect(utils.NodeReady(node)).To(BeTrue(), "conditions: %v", node.Status.Conditions)
		}).WithTimeout(joinTimeout).WithPolling(pollInterval).Should(Succeed())
		Expect(node.Status.Addresses).To(ContainElement(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: GuestIP}))
		Expect(node.Status.NodeInfo.ContainerRuntimeVersion).To(HavePrefix("containerd://v2."))

		By("the guest: systemd as PID 1 on a cgroup v2 hierarchy")
		Expect(mustInGuest(ctx, "cat /proc/1/comm")).To(Equal("systemd"))
		Expect(mustInGuest(ctx, "stat -fc %T /sys/fs/cgroup")).To(Equal("cgroup2fs"))

		By("nodelet runs as nodelet.service, in its own cgroup, with the drop-in's command line")
		show := ParseKeyValues(mustInGuest(ctx, "systemctl show nodelet -p ActiveState,MainPID,DropInPaths,UnitFileState"))
		Expect(show).To(HaveKeyWithValue("ActiveState", "active"))
		Expect(show).To(HaveKeyWithValue("UnitFileState", "enabled"))
		Expect(show["DropInPaths"]).To(ContainSubstring("10-kubeadm.conf"))
		Expect(mustInGuest(ctx, "cat /proc/"+show["MainPID"]+"/cgroup")).To(Equal("0::/system.slice/nodelet.service"))
		cmdline := strings.ReplaceAll(mustInGuest(ctx, "cat /proc/"+show["MainPID"]+"/cmdline"), "\x00", " ")
		Expect(cmdline).To(ContainSubstring("--config=/var/lib/kubelet/config.yaml"))

		By("the bootstrap token was traded for a client certificate, and the kubeconfig written")
		Expect(mustInGuest(ctx, "ls /var/lib/kubelet/pki/; test -s /etc/kubernetes/kubelet.conf && echo kubeconfig")).To(
			And(ContainSubstring("nodelet-client-current.pem"), ContainSubstring("kubeconfig")))

		By("the QoS slices are systemd units")
		for _, slice := range []string{"kubepods.slice", "kubepods-burstable.slice", "kubepods-besteffort.slice"} {
			Eventually(func(g Gomega) {
				out, err := inGuest(ctx, "systemctl show "+slice+" -p ActiveState,ControlGroup")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ParseKeyValues(out)).To(HaveKeyWithValue("ActiveState", "active"), slice)
			}).WithTimeout(apiTimeout).WithPolling(guestPollInterval).Should(Succeed())
		}
	})

	It("runs a pod of each QoS class in its slice under kubepods.slice, bounded by its resources", func(ctx SpecContext) {
		qosNS = utils.NewNamespace(ctx, admin)
		resources := map[string]corev1.ResourceRequirements{
			"guaranteed": {
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			},
			"burstable": {
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			},
			"besteffort": {},
		}
		for name, r := range resources {
			pod := utils.BusyboxPod(qosNS, name, nodeName, "sleep", "100000")
			pod.Spec.Containers[0].Resources = r
			Expect(admin.Create(ctx, pod)).To(Succeed())
		}
		pods := map[string]*corev1.Pod{}
		for name, qos := range qosPods {
			pods[name] = utils.WaitForPod(ctx, admin, qosNS, name, podStartTimeout, func(g Gomega, p *corev1.Pod) {
				g.Expect(utils.PodReady(p)).To(BeTrue(), "status: %+v", p.Status)
			})
			Expect(pods[name].Status.QOSClass).To(Equal(qos))
		}

		// read returns the files of dir, name to trimmed content.
		read := func(dir string, files ...string) map[string]string {
			GinkgoHelper()
			out := map[string]string{}
			for _, f := range files {
				out[f] = mustInGuest(ctx, "cat "+dir+"/"+f)
			}
			return out
		}
		weight := func(milli int64) string {
			return strconv.FormatUint(ocgroups.ConvertCPUSharesToCgroupV2Value(MilliCPUToShares(milli)), 10)
		}
		pidsMax := strconv.Itoa(podPidsLimit)

		By("Guaranteed: kubepods-pod<uid>.slice, memory.max and cpu.max at the limits, cpu.weight from the request")
		g := pods["guaranteed"]
		slice := PodSlice(corev1.PodQOSGuaranteed, g.UID)
		files := read(slice, "memory.max", "cpu.max", "cpu.weight", "pids.max")
		Expect(files).To(HaveKeyWithValue("memory.max", "67108864"))
		Expect(ParseCPUMax(files["cpu.max"])).To(Equal(CPUMax{Quota: 20000, Period: 100000}))
		Expect(files).To(HaveKeyWithValue("cpu.weight", weight(200)))
		Expect(files).To(HaveKeyWithValue("pids.max", pidsMax))
		scope := ContainerScope(slice, g.Status.ContainerStatuses[0].ContainerID)
		Expect(read(scope, "memory.max")).To(HaveKeyWithValue("memory.max", "67108864"))
		Expect(mustInGuest(ctx, "systemctl show "+filepath.Base(slice)+" -p ActiveState")).To(Equal("ActiveState=active"))

		By("Burstable: in kubepods-burstable.slice, the pod's limits, its container's own")
		b := pods["burstable"]
		slice = PodSlice(corev1.PodQOSBurstable, b.UID)
		files = read(slice, "memory.max", "cpu.max", "cpu.weight", "pids.max")
		Expect(files).To(HaveKeyWithValue("memory.max", "134217728"))
		Expect(ParseCPUMax(files["cpu.max"])).To(Equal(CPUMax{Quota: 50000, Period: 100000}))
		Expect(files).To(HaveKeyWithValue("cpu.weight", weight(100)))
		Expect(files).To(HaveKeyWithValue("pids.max", pidsMax))
		scope = ContainerScope(slice, b.Status.ContainerStatuses[0].ContainerID)
		files = read(scope, "memory.max", "cpu.max")
		Expect(files).To(HaveKeyWithValue("memory.max", "134217728"))
		Expect(ParseCPUMax(files["cpu.max"])).To(Equal(CPUMax{Quota: 50000, Period: 100000}))

		By("BestEffort: in kubepods-besteffort.slice, no memory or CPU bound, the lowest weight")
		e := pods["besteffort"]
		slice = PodSlice(corev1.PodQOSBestEffort, e.UID)
		files = read(slice, "memory.max", "cpu.max", "cpu.weight", "pids.max")
		Expect(files).To(HaveKeyWithValue("memory.max", "max"))
		Expect(ParseCPUMax(files["cpu.max"])).To(HaveField("Quota", int64(-1)))
		Expect(files).To(HaveKeyWithValue("cpu.weight", weight(0)))
		Expect(files).To(HaveKeyWithValue("pids.max", pidsMax))
		Expect(mustInGuest(ctx, "cat "+CgroupRoot+"/kubepods.slice/kubepods-besteffort.slice/cpu.weight")).To(Equal(weight(0)))
	})

	It("reports a container killed past its memory limit as OOMKilled", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, admin)
		// dd's 96 MiB buffer is written in full, in a container bounded
		// at 32 MiB.
		pod := utils.BusyboxPod(ns, "oom", nodeName, "sh", "-c", "sleep 2; dd if=/dev/zero of=/dev/null bs=96M count=1; sleep 100000")
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi"), corev1.ResourceCPU: resource.MustParse("500m")},
		}
		Expect(admin.Create(ctx, pod)).To(Succeed())
		p := utils.WaitForPod(ctx, admin, ns, "oom", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(p.Status.ContainerStatuses[0].LastTerminationState.Terminated).NotTo(BeNil())
		})
		Expect(p.Status.ContainerStatuses[0].LastTerminationState.Terminated.Reason).To(Equal("OOMKilled"))
		Expect(p.Status.ContainerStatuses[0].LastTerminationState.Terminated.ExitCode).To(Equal(int32(137)))
		Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeNumerically(">=", 1))
		events := ParseKeyValues(mustInGuest(ctx, "cat "+PodSlice(corev1.PodQOSGuaranteed, p.UID)+"/memory.events"))
		Expect(strconv.Atoi(events["oom_kill"])).To(BeNumerically(">=", 1), "the pod slice's memory.events")
	})

	It("serves kubectl logs and exec and the stats summary through the API server's node proxy", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, admin)
		Expect(admin.Create(ctx, utils.BusyboxPod(ns, "talker", nodeName, "sh", "-c", "echo hello from the VM; sleep 100000"))).To(Succeed())
		utils.WaitForPod(ctx, admin, ns, "talker", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(utils.PodReady(p)).To(BeTrue())
		})

		By("logs")
		Eventually(func(g Gomega) {
			logs, err := clientset.CoreV1().Pods(ns).GetLogs("talker", &corev1.PodLogOptions{}).DoRaw(ctx)
			g.Expect(err).NotTo(HaveOccurred(), "body: %s", logs)
			g.Expect(string(logs)).To(Equal("hello from the VM\n"))
		}).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())

		By("exec, with kubectl: the container sees its own cgroup namespace")
		cmd, err := api.Kubectl(ctx, "-n", ns, "exec", "talker", "--", "cat", "/proc/self/cgroup")
		Expect(err).NotTo(HaveOccurred())
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "kubectl exec: %s", out)
		Expect(strings.TrimSpace(string(out))).To(Equal("0::/"))

		By("the stats summary: the node's memory and the pod's, from the v2 files")
		raw, err := clientset.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodeName, "proxy", "stats", "summary").DoRaw(ctx)
		Expect(err).NotTo(HaveOccurred())
		summary := &statsapi.Summary{}
		Expect(json.Unmarshal(raw, summary)).To(Succeed())
		Expect(summary.Node.NodeName).To(Equal(nodeName))
		Expect(summary.Node.Memory).NotTo(BeNil())
		Expect(summary.Node.Memory.AvailableBytes).NotTo(BeNil())
		Expect(*summary.Node.Memory.AvailableBytes).To(BeNumerically(">", 0))
		var talker *statsapi.PodStats
		for i := range summary.Pods {
			if summary.Pods[i].PodRef.Namespace == ns && summary.Pods[i].PodRef.Name == "talker" {
				talker = &summary.Pods[i]
			}
		}
		Expect(talker).NotTo(BeNil(), "the pod in the summary")
		Expect(talker.Memory).NotTo(BeNil())
		Expect(talker.Memory.WorkingSetBytes).NotTo(BeNil())
		Expect(*talker.Memory.WorkingSetBytes).To(BeNumerically(">", 0))
		Expect(talker.CPU).NotTo(BeNil())
	})

	// running reads the QoS pods' container IDs and restart counts.
	running := func(ctx context.Context, g Gomega) map[string]string {
		out := map[string]string{}
		for name := range qosPods {
			p := &corev1.Pod{}
			g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: qosNS, Name: name}, p)).To(Succeed())
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			cs := p.Status.ContainerStatuses[0]
			g.Expect(cs.State.Running).NotTo(BeNil(), "%s is not running", name)
			out[name] = fmt.Sprintf("%s restarts=%d", cs.ContainerID, cs.RestartCount)
		}
		return out
	}
	// guestTasks lists the containers containerd runs in the guest.
	guestTasks := func(ctx context.Context) string {
		GinkgoHelper()
		return mustInGuest(ctx, "ctr -n k8s.io tasks ls")
	}
	expectTasksRunning := func(ctx context.Context, before map[string]string) {
		GinkgoHelper()
		tasks := guestTasks(ctx)
		for name, id := range before {
			cid := strings.TrimPrefix(strings.Fields(id)[0], "containerd://")
			Expect(tasks).To(MatchRegexp(`(?m)^%s\s+\d+\s+RUNNING`, cid), "the container of %s", name)
		}
	}

	It("adopts every running pod when systemctl restarts nodelet", func(ctx SpecContext) {
		before := running(ctx, Default)
		pid := ParseKeyValues(mustInGuest(ctx, "systemctl show nodelet -p MainPID"))["MainPID"]
		mustInGuest(ctx, "systemctl restart nodelet")
		after := ParseKeyValues(mustInGuest(ctx, "systemctl show nodelet -p MainPID,ActiveState"))
		Expect(after).To(HaveKeyWithValue("ActiveState", "active"))
		Expect(after["MainPID"]).NotTo(Equal(pid), "a new nodelet process")

		By("the restarted nodelet renews the node's lease")
		restarted := time.Now()
		Eventually(func(g Gomega) {
			lease := &coordinationv1.Lease{}
			g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: "kube-node-lease", Name: nodeName}, lease)).To(Succeed())
			g.Expect(lease.Spec.RenewTime).NotTo(BeNil())
			g.Expect(lease.Spec.RenewTime.Time).To(BeTemporally(">", restarted))
		}).WithTimeout(joinTimeout).WithPolling(pollInterval).Should(Succeed())

		By("the same containers, not restarted")
		Consistently(func(g Gomega) {
			g.Expect(running(ctx, g)).To(Equal(before))
		}).WithTimeout(adoptionWindow).WithPolling(pollInterval).Should(Succeed())
		expectTasksRunning(ctx, before)
	})

	It("leaves the pods running when systemctl stops nodelet", func(ctx SpecContext) {
		before := running(ctx, Default)
		mustInGuest(ctx, "systemctl stop nodelet")
		Expect(ParseKeyValues(mustInGuest(ctx, "systemctl show nodelet -p ActiveState"))).To(HaveKeyWithValue("ActiveState", "inactive"))
		expectTasksRunning(ctx, before)
		for name, qos := range qosPods {
			p := &corev1.Pod{}
			Expect(admin.Get(ctx, client.ObjectKey{Namespace: qosNS, Name: name}, p)).To(Succeed())
			Expect(mustInGuest(ctx, "systemctl show "+filepath.Base(PodSlice(qos, p.UID))+" -p ActiveState")).To(Equal("ActiveState=active"))
		}
		By("started again, nodelet adopts them")
		mustInGuest(ctx, "systemctl start nodelet")
		Eventually(func(g Gomega) {
			node := &corev1.Node{}
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: nodeName}, node)).To(Succeed())
			g.Expect(utils.NodeReady(node)).To(BeTrue())
		}).WithTimeout(joinTimeout).WithPolling(pollInterval).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(running(ctx, g)).To(Equal(before))
		}).WithTimeout(adoptionWindow).WithPolling(pollInterval).Should(Succeed())
	})

	It("evicts the BestEffort pod first under memory pressure", func(ctx SpecContext) {
		By("removing the earlier specs' pods, so that the two here are the node's only ones")
		pods := &corev1.PodList{}
		Expect(admin.List(ctx, pods)).To(Succeed())
		for i := range pods.Items {
			Expect(client.IgnoreNotFound(admin.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0)))).To(Succeed())
		}
		Eventually(func(g Gomega) {
			g.Expect(admin.List(ctx, pods)).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty())
		}).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(Succeed())

		ns := utils.NewNamespace(ctx, admin)
		idle := utils.BusyboxPod(ns, "idle", nodeName, "sleep", "100000")
		Expect(admin.Create(ctx, idle)).To(Succeed())
		utils.WaitForPod(ctx, admin, ns, "idle", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(utils.PodReady(p)).To(BeTrue())
		})

		By("a Guaranteed pod fills memory past the threshold, within its own limit")
		available := nodeMemoryAvailable(ctx)
		threshold := resource.MustParse(evictionThreshold)
		fill := (available - threshold.Value() + 192<<20) >> 20
		Expect(fill).To(BeNumerically(">", 0))
		// The pod's limit must fit the node's allocatable, which the
		// eviction threshold and the reservations make smaller than
		// what is available: what is left over is written to the guest's
		// own tmpfs, as memory used outside the pods.
		node := &corev1.Node{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: nodeName}, node)).To(Succeed())
		allocatable := node.Status.Allocatable.Memory().Value() >> 20
		inPod := min(fill, allocatable-128)
		outside := fill - inPod
		GinkgoWriter.Printf("memory.available %d MiB, threshold %s, allocatable %d MiB: filling %d MiB in the pod, %d MiB outside\n",
			available>>20, evictionThreshold, allocatable, inPod, outside)
		if outside > 0 {
			DeferCleanup(func(ctx SpecContext) { _, _ = inGuest(ctx, "rm -f /dev/shm/nodelet-e2e-fill") })
			mustInGuest(ctx, fmt.Sprintf("dd if=/dev/zero of=/dev/shm/nodelet-e2e-fill bs=1M count=%d status=none", outside))
		}
		limit := resource.MustParse(fmt.Sprintf("%dMi", inPod+64))
		hog := utils.BusyboxPod(ns, "hog", nodeName, "sh", "-c", fmt.Sprintf("dd if=/dev/zero of=/fill/zeros bs=1M count=%d; sleep 100000", inPod))
		hog.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: limit, corev1.ResourceCPU: resource.MustParse("500m")},
		}
		hog.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "fill", MountPath: "/fill"}}
		hog.Spec.Volumes = []corev1.Volume{{Name: "fill", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}}
		Expect(admin.Create(ctx, hog)).To(Succeed())

		By("the node reports MemoryPressure and evicts the BestEffort pod while the Guaranteed one runs")
		var seen string
		Eventually(func(g Gomega) {
			if h := utils.GetPod(ctx, admin, ns, "hog")(g); h != nil {
				avail, _ := MemoryAvailable(mustInGuest(ctx, "cat /proc/meminfo"), mustInGuest(ctx, "cat "+CgroupRoot+"/memory.stat"))
				seen = fmt.Sprintf("last seen: memory.available %d MiB; hog %s, containers %+v", avail>>20, h.Status.Phase, h.Status.ContainerStatuses)
			}
			p := utils.GetPod(ctx, admin, ns, "idle")(g)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(p.Status.Reason).To(Equal("Evicted"))
			h := utils.GetPod(ctx, admin, ns, "hog")(g)
			g.Expect(h.Status.Reason).NotTo(Equal("Evicted"), "the Guaranteed pod was evicted before the BestEffort one")
		}).WithTimeout(evictionTimeout).WithPolling(pollInterval).Should(Succeed(), func() string { return seen })
		Expect(admin.Get(ctx, client.ObjectKey{Name: nodeName}, node)).To(Succeed())
		Expect(node.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.NodeMemoryPressure), HaveField("Status", corev1.ConditionTrue))))
		Expect(admin.Delete(ctx, hog, client.GracePeriodSeconds(0))).To(Succeed())
	})
})

// nodeMemoryAvailable is the guest's memory.available, measured as the
// kubelet (and nodelet's eviction) measure it on cgroup v2.
func nodeMemoryAvailable(ctx context.Context) int64 {
	GinkgoHelper()
	available, err := MemoryAvailable(mustInGuest(ctx, "cat /proc/meminfo"), mustInGuest(ctx, "cat "+CgroupRoot+"/memory.stat"))
	Expect(err).NotTo(HaveOccurred())
	return available
}

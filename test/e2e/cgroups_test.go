package e2e

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// cgroupsNode is the node the cgroup specs' nodelet runs.
	cgroupsNode = "e2e-cgroups"
	// cgroupsTimeout covers a sandbox and a container start, or an OOM kill.
	cgroupsTimeout = 60 * time.Second
	// cgroupsPidsLimit is the node's podPidsLimit: small, for the fork test.
	cgroupsPidsLimit = 20
)

var _ = Describe("Pod cgroups", Ordered, func() {
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: cgroupsNode, API: apiServer, Containerd: ctrd,
			Config: map[string]any{
				"podPidsLimit":   cgroupsPidsLimit,
				"systemReserved": map[string]string{"cpu": "250m", "memory": "1Gi"},
				"kubeReserved":   map[string]string{"cpu": "250m", "memory": "512Mi"},
			}}
	})
	kubepods := func() string { return env.Nodelet.CgroupRoot + "/kubepods" }
	// file reads a cgroup file of the controller (cgroup v1).
	file := func(controller, cgroup, name string) string {
		GinkgoHelper()
		v, err := utils.CgroupFile(controller, cgroup, name)
		Expect(err).NotTo(HaveOccurred())
		return v
	}
	ready := func(ctx SpecContext, pod *corev1.Pod) *corev1.Pod {
		GinkgoHelper()
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		return utils.WaitForPod(ctx, env.Admin, pod.Namespace, pod.Name, cgroupsTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(utils.PodReady(p)).To(BeTrue(), "pod %s ready", pod.Name)
		})
	}
	// podCgroupUIDs lists the pod cgroups under kubepods and its QoS
	// children, in the cpu hierarchy.
	podCgroupUIDs := func() []string {
		var uids []string
		for _, dir := range []string{"", "/burstable", "/besteffort"} {
			entries, _ := os.ReadDir(filepath.Join("/sys/fs/cgroup/cpu", kubepods()+dir))
			for _, e := range entries {
				if uid, ok := strings.CutPrefix(e.Name(), "pod"); ok && e.IsDir() {
					uids = append(uids, uid)
				}
			}
		}
		slices.Sort(uids)
		return uids
	}
	containerLog := func(p *corev1.Pod) string {
		matches, _ := filepath.Glob(filepath.Join(env.Nodelet.PodLogsDir, p.Namespace+"_"+p.Name+"_"+string(p.UID), "*", "*.log"))
		var out strings.Builder
		for _, m := range matches {
			data, _ := os.ReadFile(m)
			out.Write(data)
		}
		return out.String()
	}
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}

	It("puts each pod in a cgroup under its QoS class's, bounded by its resources", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		burstable := utils.BusyboxPod(ns, "burstable", cgroupsNode, "sleep", "3600")
		burstable.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: rl("cpu", "100m", "memory", "16Mi"), Limits: rl("cpu", "200m", "memory", "64Mi")}
		guaranteed := utils.BusyboxPod(ns, "guaranteed", cgroupsNode, "sleep", "3600")
		guaranteed.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: rl("cpu", "300m", "memory", "32Mi"), Limits: rl("cpu", "300m", "memory", "32Mi")}
		bestEffort := utils.BusyboxPod(ns, "besteffort", cgroupsNode, "sleep", "3600")

		b := ready(ctx, burstable)
		cg := kubepods() + "/burstable/pod" + string(b.UID)
		Expect(file("cpu", cg, "cpu.shares")).To(Equal("102"))
		Expect(file("cpu", cg, "cpu.cfs_quota_us")).To(Equal("20000"))
		Expect(file("cpu", cg, "cpu.cfs_period_us")).To(Equal("100000"))
		Expect(file("memory", cg, "memory.limit_in_bytes")).To(Equal(strconv.Itoa(64 << 20)))
		Expect(file("pids", cg, "pids.max")).To(Equal(strconv.Itoa(cgroupsPidsLimit)))
		Expect(containerProcCgroup(ctx, b, "cpu")).To(HavePrefix(cg+"/"), "the container's cgroup is under its pod's")
		Expect(containerProcCgroup(ctx, b, "memory")).To(HavePrefix(cg + "/"))
		By("kubepods bounded by the node's capacity less the reservations")
		meminfo, err := os.ReadFile("/proc/meminfo")
		Expect(err).NotTo(HaveOccurred())
		var totalKiB int64
		for _, line := range strings.Split(string(meminfo), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				totalKiB, err = strconv.ParseInt(f[1], 10, 64)
				Expect(err).NotTo(HaveOccurred())
			}
		}
		Expect(file("memory", kubepods(), "memory.limit_in_bytes")).To(Equal(strconv.FormatInt(totalKiB*1024-(1536<<20), 10)))
		Expect(file("cpu", kubepods(), "cpu.shares")).To(Equal(strconv.Itoa((runtime.NumCPU()*1000 - 500) * 1024 / 1000)))
		By("the burstable cgroup's shares following its pods' requests")
		Expect(file("cpu", kubepods()+"/burstable", "cpu.shares")).To(Equal("102"))
		Expect(file("cpu", kubepods()+"/besteffort", "cpu.shares")).To(Equal("2"))

		g := ready(ctx, guaranteed)
		cg = kubepods() + "/pod" + string(g.UID)
		Expect(file("cpu", cg, "cpu.shares")).To(Equal("307"))
		Expect(file("cpu", cg, "cpu.cfs_quota_us")).To(Equal("30000"))
		Expect(file("memory", cg, "memory.limit_in_bytes")).To(Equal(strconv.Itoa(32 << 20)))
		Expect(containerProcCgroup(ctx, g, "cpu")).To(HavePrefix(cg + "/"))

		be := ready(ctx, bestEffort)
		cg = kubepods() + "/besteffort/pod" + string(be.UID)
		Expect(file("cpu", cg, "cpu.shares")).To(Equal("2"))
		Expect(file("cpu", cg, "cpu.cfs_quota_us")).To(Equal("-1"))
		Expect(containerProcCgroup(ctx, be, "pids")).To(HavePrefix(cg + "/"))

		By("removing a pod's cgroup with the pod")
		Expect(env.Admin.Delete(ctx, be)).To(Succeed())
		Eventually(podCgroupUIDs).WithTimeout(cgroupsTimeout).WithPolling(pollInterval).ShouldNot(ContainElement(string(be.UID)))
		Expect(utils.CgroupDirs(cg)).To(BeEmpty(), "gone from every hierarchy")
	})

	It("stops a container forking past podPidsLimit, and nothing else", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "forks", cgroupsNode, "sh", "-c",
			// The subshell, whose fork fails, ends; the shell goes on.
			"(i=0; while [ $i -lt 40 ]; do sleep 600 & i=$((i+1)); done); echo forked; exec sleep 3600")
		p := ready(ctx, pod)
		Eventually(func() string { return containerLog(p) }).WithTimeout(cgroupsTimeout).WithPolling(pollInterval).
			Should(Or(ContainSubstring("can't fork"), ContainSubstring("Resource temporarily unavailable")))
		Consistently(func(g Gomega) {
			p := utils.GetPod(ctx, env.Admin, ns, "forks")(g)
			g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeZero())
		}).WithContext(ctx).WithTimeout(3 * time.Second).WithPolling(pollInterval).Should(Succeed())
		cg := kubepods() + "/besteffort/pod" + string(p.UID)
		Expect(strconv.Atoi(file("pids", cg, "pids.current"))).To(BeNumerically("<=", cgroupsPidsLimit))
		Expect(env.Nodelet.Running()).To(BeTrue(), "nodelet keeps running")
		By("starting another pod next to it")
		ready(ctx, utils.BusyboxPod(ns, "other", cgroupsNode, "sleep", "3600"))
	})

	It("bounds a pod by its pod-level resources alone", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "podlevel", cgroupsNode, "sh", "-c",
			"sleep 1; exec dd if=/dev/zero of=/dev/null bs=96M count=1")
		pod.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "32Mi"), Limits: rl("cpu", "500m", "memory", "32Mi")}
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		var uid string
		Eventually(func(g Gomega) {
			p := utils.GetPod(ctx, env.Admin, ns, "podlevel")(g)
			uid = string(p.UID)
			cg := kubepods() + "/burstable/pod" + uid
			v, err := utils.CgroupFile("memory", cg, "memory.limit_in_bytes")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(v).To(Equal(strconv.Itoa(32 << 20)))
			v, err = utils.CgroupFile("cpu", cg, "cpu.cfs_quota_us")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(v).To(Equal("50000"))
		}).WithContext(ctx).WithTimeout(cgroupsTimeout).WithPolling(pollInterval).Should(Succeed())
		utils.WaitForPod(ctx, env.Admin, ns, "podlevel", cgroupsTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			t := p.Status.ContainerStatuses[0].State.Terminated
			g.Expect(t).NotTo(BeNil(), "the container ended")
			g.Expect(t.Reason).To(Equal("OOMKilled"))
		})
	})

	It("grows a pod's cgroup before its containers and shrinks it after them in an in-place resize", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "resized", cgroupsNode, "sleep", "3600")
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: rl("cpu", "100m", "memory", "16Mi"), Limits: rl("cpu", "200m", "memory", "64Mi")}
		p := ready(ctx, pod)
		cg := kubepods() + "/burstable/pod" + string(p.UID)
		expectBounds := func(quota string, memory int) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				v, err := utils.CgroupFile("cpu", cg, "cpu.cfs_quota_us")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(v).To(Equal(quota))
				v, err = utils.CgroupFile("memory", cg, "memory.limit_in_bytes")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(v).To(Equal(strconv.Itoa(memory)))
				p := utils.GetPod(ctx, env.Admin, ns, "resized")(g)
				g.Expect(p.Status.Conditions).NotTo(ContainElement(HaveField("Type", corev1.PodResizeInProgress)))
			}).WithContext(ctx).WithTimeout(cgroupsTimeout).WithPolling(pollInterval).Should(Succeed())
		}
		expectBounds("20000", 64<<20)
		resize := func(cpu, memory string) {
			GinkgoHelper()
			patch := `{"spec":{"containers":[{"name":"main","resources":{"limits":{"cpu":"` + cpu + `","memory":"` + memory + `"}}}]}}`
			Expect(env.Admin.SubResource("resize").Patch(ctx, p, client.RawPatch(types.StrategicMergePatchType, []byte(patch)))).To(Succeed())
		}
		By("growing the limits")
		resize("400m", "96Mi")
		expectBounds("40000", 96<<20)
		By("shrinking the limits")
		resize("100m", "48Mi")
		expectBounds("10000", 48<<20)
		Expect(file("cpu", cg, "cpu.shares")).To(Equal("102"))
		Expect(utils.GetPod(ctx, env.Admin, ns, "resized")(Default).Status.ContainerStatuses[0].RestartCount).To(BeZero())
	})

	It("bounds the system-reserved cgroup, and refuses to start while it does not exist", func(ctx SpecContext) {
		reserved := utils.E2ECgroupParent + "/" + env.Nodelet.Options.NodeName + "-" + strconv.Itoa(os.Getpid()) + "-system"
		DeferCleanup(utils.RemoveCgroupTree, reserved)
		n, err := utils.StartNodelet(ctx, utils.NodeletOptions{NodeName: cgroupsNode + "-reserved", API: apiServer, Containerd: ctrd,
			Config: map[string]any{
				"enforceNodeAllocatable": []string{"pods", "system-reserved"},
				"systemReservedCgroup":   reserved,
				"systemReserved":         map[string]string{"cpu": "100m", "memory": "100Mi"},
			}})
		if n != nil {
			DeferCleanup(n.Cleanup)
		}
		Expect(err).To(MatchError(ContainSubstring("nodelet exited during start-up")))
		Expect(n.LogTail(20)).To(ContainSubstring(`bounding reserved cgroup \"` + reserved + `\": the cgroup does not exist`))

		By("starting once the cgroup exists, and bounding it")
		mounts, err := filepath.Glob("/sys/fs/cgroup/*")
		Expect(err).NotTo(HaveOccurred())
		for _, m := range mounts {
			if st, err := os.Stat(m); err == nil && st.IsDir() {
				Expect(os.MkdirAll(filepath.Join(m, reserved), 0o755)).To(Succeed())
			}
		}
		Expect(n.Restart(ctx)).To(Succeed())
		Expect(file("memory", reserved, "memory.limit_in_bytes")).To(Equal(strconv.Itoa(100 << 20)))
		Expect(file("cpu", reserved, "cpu.shares")).To(Equal("102"))
		Expect(utils.CgroupDirs(n.CgroupRoot + "/kubepods/burstable")).NotTo(BeEmpty())
	})

	It("gives pods and containers the CFS period of cpuCFSQuotaPeriod", func(ctx SpecContext) {
		node := cgroupsNode + "-cfs"
		n, err := utils.StartNodelet(ctx, utils.NodeletOptions{NodeName: node, API: apiServer, Containerd: ctrd,
			Config: map[string]any{"cpuCFSQuotaPeriod": "50ms"}})
		if n != nil {
			DeferCleanup(n.Cleanup)
		}
		Expect(err).NotTo(HaveOccurred())
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "cfs", node, "sleep", "3600")
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: rl("cpu", "100m", "memory", "16Mi"), Limits: rl("cpu", "200m", "memory", "64Mi")}
		p := ready(ctx, pod)
		cg := n.CgroupRoot + "/kubepods/burstable/pod" + string(p.UID)
		Expect(file("cpu", cg, "cpu.cfs_period_us")).To(Equal("50000"))
		Expect(file("cpu", cg, "cpu.cfs_quota_us")).To(Equal("10000"), "200m of a 50ms period")
		container := containerProcCgroup(ctx, p, "cpu")
		Expect(file("cpu", container, "cpu.cfs_period_us")).To(Equal("50000"))
		Expect(file("cpu", container, "cpu.cfs_quota_us")).To(Equal("10000"))
	})

	It("adopts the cgroups of running pods after a crash, removes those of its gone pods, and leaves those it has no record of", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		keep := utils.BusyboxPod(ns, "keep", cgroupsNode, "sleep", "3600")
		keep.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: rl("cpu", "100m"), Limits: rl("memory", "48Mi")}
		gone := utils.BusyboxPod(ns, "gone", cgroupsNode, "sleep", "3600")
		gone.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: rl("cpu", "100m"), Limits: rl("memory", "48Mi")}
		k, g := ready(ctx, keep), ready(ctx, gone)
		keepCg := kubepods() + "/burstable/pod" + string(k.UID)
		goneCg := kubepods() + "/burstable/pod" + string(g.UID)
		rs, _ := newCRIClients(ctx)
		keepID := strings.TrimPrefix(k.Status.ContainerStatuses[0].ContainerID, "containerd://")
		keepPid := containerPid(ctx, rs, keepID)
		keepProcCg := containerProcCgroup(ctx, k, "cpu")

		Expect(env.Nodelet.Kill()).To(Succeed())
		By("deleting a pod for good and leaving a stray pod cgroup (another agent's) while nodelet is down")
		Expect(env.Admin.Delete(ctx, g, client.GracePeriodSeconds(0))).To(Succeed())
		stray := kubepods() + "/besteffort/pod00000000-0000-0000-0000-00000000dead"
		for _, c := range []string{"cpu", "memory", "pids"} {
			Expect(os.Mkdir(filepath.Join("/sys/fs/cgroup", c, stray), 0o755)).To(Succeed())
		}
		DeferCleanup(utils.RemoveCgroupTree, stray)
		// A changed bound shows the adopted cgroup is brought to the pod's.
		Expect(os.WriteFile(filepath.Join("/sys/fs/cgroup/cpu", keepCg, "cpu.shares"), []byte("5000"), 0o644)).To(Succeed())
		Expect(env.Nodelet.Restart(ctx)).To(Succeed())

		Eventually(func(g Gomega) {
			g.Expect(podCgroupUIDs()).NotTo(ContainElement(string(gone.UID)))
			g.Expect(utils.CgroupDirs(goneCg)).To(BeEmpty())
			v, err := utils.CgroupFile("cpu", keepCg, "cpu.shares")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(v).To(Equal("102"), "the adopted cgroup brought to the pod's bounds")
		}).WithContext(ctx).WithTimeout(cgroupsTimeout).WithPolling(pollInterval).Should(Succeed())
		Expect(processAlive(keepPid)).To(BeTrue(), "the adopted pod's process was not restarted")
		Expect(containerProcCgroup(ctx, k, "cpu")).To(Equal(keepProcCg), "in the same cgroup")
		Expect(file("memory", keepCg, "memory.limit_in_bytes")).To(Equal(strconv.Itoa(48 << 20)))
		p := utils.GetPod(ctx, env.Admin, ns, "keep")(Default)
		Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeZero())
		Expect(p.Status.ContainerStatuses[0].ContainerID).To(Equal(k.Status.ContainerStatuses[0].ContainerID))

		Expect(utils.CgroupDirs(stray)).NotTo(BeEmpty(), "nodelet has no record of the stray cgroup's pod: not its to remove")

		By("keeping no cgroup of a pod that is not on the node, but the stray one")
		var pods corev1.PodList
		Expect(env.Admin.List(ctx, &pods, client.MatchingFields{"spec.nodeName": cgroupsNode})).To(Succeed())
		live := []string{"00000000-0000-0000-0000-00000000dead"}
		for _, p := range pods.Items {
			live = append(live, string(p.UID))
		}
		Eventually(func(g Gomega) {
			sandboxes, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
				LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(gone.UID)}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sandboxes).To(BeEmpty(), "the gone pod's sandbox is removed")
			for _, uid := range podCgroupUIDs() {
				g.Expect(live).To(ContainElement(uid))
			}
		}).WithContext(ctx).WithTimeout(cgroupsTimeout).WithPolling(pollInterval).Should(Succeed())
	})
})

// containerProcCgroup is the cgroup of the pod's first container's process
// in the controller's hierarchy ("" for cgroup v2's unified one).
func containerProcCgroup(ctx SpecContext, p *corev1.Pod, controller string) string {
	GinkgoHelper()
	rs, _ := newCRIClients(ctx)
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
	data, err := os.ReadFile("/proc/" + strconv.Itoa(containerPid(ctx, rs, id)) + "/cgroup")
	Expect(err).NotTo(HaveOccurred())
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && (controller == "" && parts[0] == "0" || controller != "" && slices.Contains(strings.Split(parts[1], ","), controller)) {
			return parts[2]
		}
	}
	Fail("no " + controller + " cgroup in /proc/<pid>/cgroup:\n" + string(data))
	return ""
}

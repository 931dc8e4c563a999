package e2e

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// memoryNode is the node the memory cgroup specs' nodelet runs.
	memoryNode = "e2e-memory"
	// memoryTimeout covers a sandbox and a container start.
	memoryTimeout = 60 * time.Second
	// reservedHugePages are the 2 MiB huge pages the specs reserve on the
	// host (vm.nr_hugepages) before nodelet starts, when the host has
	// fewer and lets them be reserved; restored after.
	reservedHugePages = 4
	// memoryThrottlingFactor is the node's, for memory.high on cgroup v2.
	memoryThrottlingFactor = 0.9
)

var _ = Describe("Memory cgroups", Ordered, func() {
	// The pool must exist before nodelet starts: the Node's capacity and
	// the kubepods bound are read at start, as the kubelet reads them.
	var hugePagesReserved bool
	BeforeAll(func(ctx SpecContext) {
		if !utils.HugetlbController() {
			return // nothing could bound them: the first spec skips
		}
		if hugePagesReserved = reserveHugePages(reservedHugePages); hugePagesReserved {
			archive, err := utils.ImageArchive(ctx, utils.HugePagesImage)
			Expect(err).NotTo(HaveOccurred())
			Expect(ctrd.ImportArchive(ctx, utils.HugePagesImage, archive)).To(Succeed())
		}
	})
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: memoryNode, API: apiServer, Containerd: ctrd,
			Config: map[string]any{"memoryThrottlingFactor": memoryThrottlingFactor}}
	})
	kubepods := func() string { return env.Nodelet.CgroupRoot + "/kubepods" }
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	start := func(ctx SpecContext, pod *corev1.Pod) *corev1.Pod {
		GinkgoHelper()
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		return utils.WaitForPod(ctx, env.Admin, pod.Namespace, pod.Name, memoryTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(utils.PodReady(p)).To(BeTrue(), "pod %s ready", pod.Name)
		})
	}
	// podCgroup is the pod's cgroup, under whichever QoS cgroup it is.
	podCgroup := func(p *corev1.Pod) string {
		GinkgoHelper()
		for _, parent := range []string{"", "/burstable", "/besteffort"} {
			if cg := kubepods() + parent + "/pod" + string(p.UID); len(utils.CgroupDirs(cg)) > 0 {
				return cg
			}
		}
		Fail("no cgroup for pod " + p.Name)
		return ""
	}
	file := func(controller, cgroup, name string) string {
		GinkgoHelper()
		v, err := utils.CgroupFile(controller, cgroup, name)
		Expect(err).NotTo(HaveOccurred())
		return v
	}

	It("bounds every huge page size of a pod's cgroup at the pod's request, 0 when it asks for none", func(ctx SpecContext) {
		if !utils.HugetlbController() {
			Skip("the host's hugetlb controller is not in the hierarchy its cgroup version uses (a cgroup v1 host that leaves hugetlb to its v2 hierarchy, as this kind of machine does): no cgroup can bound huge pages, and nodelet bounds none; hack/hugetlb-v1.sh runs the suite with one")
		}
		sizes := utils.HugePageSizes()
		Expect(sizes).NotTo(BeEmpty())
		ns := utils.NewNamespace(ctx, env.Admin)
		p := start(ctx, utils.BusyboxPod(ns, "none", memoryNode, "sleep", "3600"))
		cg := podCgroup(p)
		Expect(cg).To(Equal(kubepods() + "/besteffort/pod" + string(p.UID)))
		controller := "hugetlb"
		if utils.CgroupV2() {
			controller = ""
		}
		// The pod's bound holds its containers: containerd, by default
		// (disable_hugetlb_controller), sets none of its own.
		Expect(containerProcCgroup(ctx, p, controller)).To(HavePrefix(cg+"/"), "the container is under its pod's hugetlb cgroup")
		for _, size := range sizes {
			Expect(utils.HugetlbLimit(cg, size)).To(Equal("0"), "the pod's %s limit", size)
			Expect(utils.HugetlbLimit(kubepods()+"/besteffort", size)).NotTo(Equal("0"), "the QoS cgroup leaves %s unbounded", size)
		}
		if !hugePagesReserved {
			Skip("the host's huge page pool could not be reserved (vm.nr_hugepages): the limits are read back, no page is mapped")
		}
		By("a pod that asks for huge pages maps them; one that asks for none cannot")
		hp := corev1.ResourceName("hugepages-2Mi")
		Expect(slices.Contains(sizes, "2MB")).To(BeTrue(), "the host has 2 MiB pages")
		asks := hugePagesPod(ns, "asks", "2", "hold")
		asks.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: rl("memory", "32Mi", string(hp), "4Mi"), Limits: rl("memory", "32Mi", string(hp), "4Mi")}
		a := start(ctx, asks)
		Eventually(func() string { return podLog(env.Nodelet.PodLogsDir, a) }).WithTimeout(memoryTimeout).WithPolling(pollInterval).
			Should(ContainSubstring("mapped 2 huge pages"))
		acg := podCgroup(a)
		Expect(utils.HugetlbLimit(acg, "2MB")).To(Equal(strconv.Itoa(4 << 20)))
		Expect(utils.HugetlbLimit(kubepods(), "2MB")).To(Equal(strconv.Itoa(reservedHugePages*2<<20)), "kubepods holds the node's pool")

		Expect(env.Admin.Create(ctx, hugePagesPod(ns, "takes", "1"))).To(Succeed())
		t := utils.WaitForPod(ctx, env.Admin, ns, "takes", memoryTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed), "the container exits 1")
		})
		Expect(podLog(env.Nodelet.PodLogsDir, t)).To(Or(ContainSubstring("mapping 1 huge pages"), ContainSubstring("writing to 1 huge pages")))
	})

	It("bounds a container's memory and swap together at its memory limit on cgroup v1", func(ctx SpecContext) {
		if utils.CgroupV2() {
			Skip("cgroup v2: the next spec reads memory.swap.max")
		}
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "burstable", memoryNode, "sleep", "3600")
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: rl("memory", "16Mi"), Limits: rl("memory", "64Mi")}
		p := start(ctx, pod)
		ctr := containerProcCgroup(ctx, p, "memory")
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/memory", ctr, "memory.memsw.limit_in_bytes")); err != nil {
			Skip("the memory controller does not account swap here (no memory.memsw.limit_in_bytes): containers get no swap setting, as the kubelet's")
		}
		Expect(file("memory", ctr, "memory.limit_in_bytes")).To(Equal(strconv.Itoa(64 << 20)))
		Expect(file("memory", ctr, "memory.memsw.limit_in_bytes")).To(Equal(strconv.Itoa(64<<20)), "no swap above the memory limit")
	})

	It("gives containers no swap and throttles a Burstable one at memory.high on cgroup v2", func(ctx SpecContext) {
		if !utils.CgroupV2() {
			Skip("cgroup v1: memory.swap.max, memory.high and memory.min are cgroup v2 files; the unit tests of internal/kuberuntime/criconfig and internal/cgroups check their values")
		}
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "burstable", memoryNode, "sleep", "3600")
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: rl("memory", "64Mi"), Limits: rl("memory", "128Mi")}
		p := start(ctx, pod)
		ctr := containerProcCgroup(ctx, p, "")
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", ctr, "memory.swap.max")); err == nil {
			Expect(file("", ctr, "memory.swap.max")).To(Equal("0"), "NoSwap")
		}
		page := int64(os.Getpagesize())
		request, limit := float64(64<<20), float64(128<<20)
		high := int64(math.Floor((request+memoryThrottlingFactor*(limit-request))/float64(page))) * page
		Expect(file("", ctr, "memory.high")).To(Equal(strconv.FormatInt(high, 10)), "between the request and the limit")
		Expect(file("", ctr, "memory.min")).To(Equal("0"), "no reservation (memoryReservationPolicy None)")
		Expect(file("", ctr, "memory.max")).To(Equal(strconv.Itoa(128 << 20)))
	})
})

// hugePagesPod is a pod of utils.HugePagesImage mapping that many huge
// pages, not restarted.
func hugePagesPod(ns, name string, args ...string) *corev1.Pod {
	p := utils.BusyboxPod(ns, name, memoryNode)
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	p.Spec.Containers[0].Image = utils.HugePagesImage
	p.Spec.Containers[0].ImagePullPolicy = corev1.PullNever
	p.Spec.Containers[0].Args = args
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	return p
}

// podLog is what the pod's containers wrote to their logs.
func podLog(logsDir string, p *corev1.Pod) string {
	matches, _ := filepath.Glob(filepath.Join(logsDir, p.Namespace+"_"+p.Name+"_"+string(p.UID), "*", "*.log"))
	var out strings.Builder
	for _, m := range matches {
		data, _ := os.ReadFile(m)
		out.Write(data)
	}
	return out.String()
}

// reserveHugePages makes the host hold at least n huge pages of its
// default size (vm.nr_hugepages), put back as they were after the specs;
// false when it cannot.
func reserveHugePages(n int) bool {
	GinkgoHelper()
	const path = "/proc/sys/vm/nr_hugepages"
	read := func() int {
		data, err := os.ReadFile(path)
		if err != nil {
			return -1
		}
		v, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			return -1
		}
		return v
	}
	before := read()
	switch {
	case before < 0:
		return false
	case before >= n:
		return true
	}
	restore := func() { _ = os.WriteFile(path, []byte(strconv.Itoa(before)), 0o644) }
	if err := os.WriteFile(path, []byte(strconv.Itoa(n)), 0o644); err != nil {
		return false
	}
	DeferCleanup(restore)
	return read() >= n
}

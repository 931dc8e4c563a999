package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// evictionTimeout covers a pod starting, writing or allocating, being
	// measured (every evictionMonitoringInterval) and stopped.
	evictionTimeout = 90 * time.Second
	// evictionTransitionPeriod is the memory spec's
	// evictionPressureTransitionPeriod.
	evictionTransitionPeriod = 20 * time.Second
	// hogChunk is what the memory spec's BestEffort pod allocates, twice
	// (busybox awk's sprintf takes a width below 2^31).
	hogChunk = 1536 << 20
	// memoryMargin is how far, either way, the machine's available memory
	// may move because of other work while the memory spec runs (about a
	// minute): the threshold is set memoryMargin below what is available
	// when the node starts, so other work may take up to memoryMargin
	// before the hog runs, or after it is evicted, without a false pressure
	// (seen: 700Mi taken within 30 s while other builds ran), and may free
	// up to 2*hogChunk-memoryMargin while the hog runs without hiding it.
	// The machine has 24Gi; the hog never holds more than 3Gi.
	memoryMargin = 1536 << 20
)

// podEvent returns the message of the pod's Event of reason and type, or "".
func podEvent(ctx SpecContext, g Gomega, c client.Client, ns, name, reason, typ string) string {
	var events corev1.EventList
	g.Expect(c.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
	for _, e := range events.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason && e.Type == typ {
			return e.Message
		}
	}
	return ""
}

// expectEvicted waits until the pod is Failed with reason Evicted, a
// message msg matches, the DisruptionTarget condition saying the same, and
// a Warning Evicted Event.
func expectEvicted(ctx SpecContext, c client.Client, ns, name string, msg types.GomegaMatcher) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		p := utils.GetPod(ctx, c, ns, name)(g)
		g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
		g.Expect(p.Status.Reason).To(Equal("Evicted"))
		g.Expect(p.Status.Message).To(msg)
		g.Expect(p.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.DisruptionTarget),
			HaveField("Status", corev1.ConditionTrue),
			HaveField("Reason", "TerminationByKubelet"),
			HaveField("Message", msg))))
		g.Expect(podEvent(ctx, g, c, ns, name, "Evicted", corev1.EventTypeWarning)).To(msg)
	}).WithContext(ctx).WithTimeout(evictionTimeout).WithPolling(pollInterval).Should(Succeed())
}

func expectRunning(ctx SpecContext, c client.Client, ns, name string) {
	GinkgoHelper()
	utils.WaitForPod(ctx, c, ns, name, evictionTimeout, func(g Gomega, p *corev1.Pod) {
		g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		g.Expect(utils.PodReady(p)).To(BeTrue())
	})
}

// nodeCondition returns the node's condition of type t.
func nodeCondition(ctx SpecContext, g Gomega, c client.Client, node string, t corev1.NodeConditionType) corev1.NodeCondition {
	var n corev1.Node
	g.Expect(c.Get(ctx, client.ObjectKey{Name: node}, &n)).To(Succeed())
	for _, cond := range n.Status.Conditions {
		if cond.Type == t {
			return cond
		}
	}
	g.Expect(t).To(BeEmpty(), "the node has no %s condition", t)
	return corev1.NodeCondition{}
}

// availableMemory is memory.available as the kubelet measures it on this
// cgroup v1 machine: MemTotal minus the root memory cgroup's working set
// (usage minus total_inactive_file).
func availableMemory() int64 {
	GinkgoHelper()
	meminfo, err := os.ReadFile("/proc/meminfo")
	Expect(err).NotTo(HaveOccurred())
	var total int64
	for _, line := range strings.Split(string(meminfo), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			Expect(err).NotTo(HaveOccurred())
			total = kb * 1024
		}
	}
	usageData, err := os.ReadFile("/sys/fs/cgroup/memory/memory.usage_in_bytes")
	Expect(err).NotTo(HaveOccurred(), "this spec needs the cgroup v1 memory controller")
	usage, err := strconv.ParseInt(strings.TrimSpace(string(usageData)), 10, 64)
	Expect(err).NotTo(HaveOccurred())
	stat, err := os.ReadFile("/sys/fs/cgroup/memory/memory.stat")
	Expect(err).NotTo(HaveOccurred())
	var inactive int64 = -1
	sc := bufio.NewScanner(bytes.NewReader(stat))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == "total_inactive_file" {
			inactive, err = strconv.ParseInt(v, 10, 64)
			Expect(err).NotTo(HaveOccurred())
		}
	}
	Expect(total).To(BeNumerically(">", 0))
	Expect(inactive).To(BeNumerically(">=", 0))
	return total - (usage - inactive)
}

var _ = Describe("Eviction", func() {
	Describe("of a pod past its local storage limit", Ordered, func() {
		const node = "e2e-eviction-storage"
		env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
			return utils.NodeletOptions{NodeName: node, API: apiServer, Containerd: ctrd, Config: map[string]any{
				// Only the local storage limits are under test: no disk
				// threshold that the machine's own disk could meet.
				"evictionHard":               map[string]string{"memory.available": "100Mi"},
				"evictionMonitoringInterval": "1s",
			}}
		})

		It("evicts a pod writing past its emptyDir's sizeLimit and leaves the others alone", func(ctx SpecContext) {
			ns := utils.NewNamespace(ctx, env.Admin)
			Expect(env.Admin.Create(ctx, utils.BusyboxPod(ns, "quiet", node, "sleep", "3600"))).To(Succeed())
			expectRunning(ctx, env.Admin, ns, "quiet")

			writer := utils.BusyboxPod(ns, "writer", node, "sh", "-c",
				"dd if=/dev/zero of=/scratch/fill bs=1M count=2 && sync && sleep 3600")
			writer.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{
				EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("1Mi"))}}}}
			writer.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
			Expect(env.Admin.Create(ctx, writer)).To(Succeed())

			expectEvicted(ctx, env.Admin, ns, "writer", Equal(`Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `))
			p := utils.GetPod(ctx, env.Admin, ns, "writer")(Default)
			for _, cs := range p.Status.ContainerStatuses {
				Expect(cs.State.Terminated).NotTo(BeNil(), "container %s stopped", cs.Name)
			}

			Expect(env.Nodelet.Running()).To(BeTrue(), "nodelet keeps running")
			Consistently(func(g Gomega) {
				q := utils.GetPod(ctx, env.Admin, ns, "quiet")(g)
				g.Expect(q.Status.Phase).To(Equal(corev1.PodRunning))
				g.Expect(q.Status.ContainerStatuses).To(HaveLen(1))
				g.Expect(q.Status.ContainerStatuses[0].RestartCount).To(BeZero())
				g.Expect(q.Status.Conditions).NotTo(ContainElement(HaveField("Type", corev1.DisruptionTarget)))
			}).WithContext(ctx).WithTimeout(3 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

			metrics, err := env.Nodelet.Metrics(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(metrics).To(ContainSubstring(`kubelet_evictions{eviction_signal="emptydirfs.limit"} 1`))
		})
	})

	Describe("under memory pressure", Ordered, func() {
		const node = "e2e-eviction-memory"
		var (
			admin   client.Client
			nodelet *utils.Nodelet
		)
		BeforeAll(func(ctx SpecContext) {
			var err error
			admin, err = apiServer.AdminClient()
			Expect(err).NotTo(HaveOccurred())
			// The threshold follows the memory available now: a build of the
			// CSI sidecars going on beside (see BeforeSuite) would move it.
			_, err = utils.CSISidecars(ctx)
			Expect(err).NotTo(HaveOccurred())
		}, NodeTimeout(suiteSetupTimeout))
		var ns string
		JustAfterEach(func(ctx SpecContext) {
			if !CurrentSpecReport().Failed() || nodelet == nil {
				return
			}
			GinkgoWriter.Printf("memory.available now: %d\n", availableMemory())
			var pods corev1.PodList
			if err := admin.List(ctx, &pods, client.InNamespace(ns)); err == nil {
				for _, p := range pods.Items {
					GinkgoWriter.Printf("pod %s: %s %s %q %+v\n", p.Name, p.Status.Phase, p.Status.Reason, p.Status.Message, p.Status.ContainerStatuses)
				}
			}
			GinkgoWriter.Printf("nodelet log (%s):\n%s\n", nodelet.LogPath, nodelet.LogTail(300))
		})

		It("evicts the BestEffort pod using the most memory, keeps the Burstable one, reports MemoryPressure for its transition period and refuses BestEffort pods meanwhile", func(ctx SpecContext) {
			// The threshold is taken from what is available now, just
			// before the node and its pods start (see memoryMargin).
			available := availableMemory()
			threshold := available - memoryMargin
			GinkgoWriter.Printf("memory.available %d, threshold %d\n", available, threshold)
			Expect(threshold).To(BeNumerically(">", 4*hogChunk), "the machine has room for the hog")
			var err error
			nodelet, err = utils.StartNodelet(ctx, utils.NodeletOptions{NodeName: node, API: apiServer, Containerd: ctrd, Config: map[string]any{
				"evictionHard":                     map[string]string{"memory.available": strconv.FormatInt(threshold, 10)},
				"evictionMonitoringInterval":       "1s",
				"evictionPressureTransitionPeriod": evictionTransitionPeriod.String(),
				"nodeStatusUpdateFrequency":        "1s",
			}})
			if nodelet != nil {
				DeferCleanup(nodelet.Cleanup)
			}
			Expect(err).NotTo(HaveOccurred())
			ns = utils.NewNamespace(ctx, admin)

			small := utils.BusyboxPod(ns, "small", node, "sleep", "3600")
			small.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
			Expect(admin.Create(ctx, small)).To(Succeed())
			expectRunning(ctx, admin, ns, "small")
			Eventually(func(g Gomega) {
				g.Expect(nodeCondition(ctx, g, admin, node, corev1.NodeMemoryPressure).Status).To(Equal(corev1.ConditionFalse))
			}).WithContext(ctx).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())

			// busybox awk holds the string in its heap: anonymous memory
			// of the container's cgroup, in its working set.
			hog := utils.BusyboxPod(ns, "hog", node, "awk",
				fmt.Sprintf(`BEGIN { s = sprintf("%%%[1]ds", ""); t = sprintf("%%%[1]ds", ""); system("sleep 3600") }`, hogChunk))
			Expect(admin.Create(ctx, hog)).To(Succeed())

			Eventually(func(g Gomega) {
				c := nodeCondition(ctx, g, admin, node, corev1.NodeMemoryPressure)
				g.Expect(c.Status).To(Equal(corev1.ConditionTrue))
				g.Expect(c.Reason).To(Equal("KubeletHasInsufficientMemory"))
			}).WithContext(ctx).WithTimeout(evictionTimeout).WithPolling(pollInterval).Should(Succeed())
			expectEvicted(ctx, admin, ns, "hog", And(
				HavePrefix("The node was low on resource: memory. Threshold quantity: "),
				MatchRegexp(`Container main was using \d+(Ki|Mi|Gi)?, request is 0, has larger consumption of memory. $`)))
			// The pressure was last observed around the time the hog's
			// container was killed (its memory is freed then): its
			// finishedAt, not when its status was seen Failed, which comes
			// after the whole sandbox has stopped (seconds on containerd 2
			// on a loaded machine).
			evicted := time.Now()
			if t := utils.GetPod(ctx, admin, ns, "hog")(Default).Status.ContainerStatuses[0].State.Terminated; t != nil && !t.FinishedAt.IsZero() {
				evicted = t.FinishedAt.Time
			}

			// While the condition holds, a BestEffort pod is refused and a
			// Burstable one runs.
			Expect(admin.Create(ctx, utils.BusyboxPod(ns, "besteffort", node, "sleep", "3600"))).To(Succeed())
			burstable := utils.BusyboxPod(ns, "burstable", node, "sleep", "3600")
			burstable.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Mi")}
			Expect(admin.Create(ctx, burstable)).To(Succeed())
			Eventually(func(g Gomega) {
				p := utils.GetPod(ctx, admin, ns, "besteffort")(g)
				g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
				g.Expect(p.Status.Reason).To(Equal("Evicted"))
				g.Expect(p.Status.Message).To(Equal("Pod was rejected: The node had condition: [MemoryPressure]. "))
			}).WithContext(ctx).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())
			expectRunning(ctx, admin, ns, "burstable")
			Expect(nodeCondition(ctx, Default, admin, node, corev1.NodeMemoryPressure).Status).To(Equal(corev1.ConditionTrue),
				"the refusal was made under pressure")

			Eventually(func(g Gomega) {
				g.Expect(podEvent(ctx, g, admin, "default", node, "EvictionThresholdMet", corev1.EventTypeWarning)).To(Equal("Attempting to reclaim memory"))
			}).WithContext(ctx).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())

			// The pressure ends: False once the transition period has passed
			// since it was last observed, not at once.
			Eventually(func(g Gomega) {
				g.Expect(nodeCondition(ctx, g, admin, node, corev1.NodeMemoryPressure).Status).To(Equal(corev1.ConditionFalse))
			}).WithContext(ctx).WithTimeout(evictionTransitionPeriod + apiTimeout).WithPolling(pollInterval).Should(Succeed())
			// A few seconds of slack: the last observation came a little
			// before the kill (and finishedAt is whole seconds).
			Expect(time.Since(evicted)).To(BeNumerically(">=", evictionTransitionPeriod-5*time.Second),
				"MemoryPressure held for its transition period")
			s := utils.GetPod(ctx, admin, ns, "small")(Default)
			Expect(s.Status.Phase).To(Equal(corev1.PodRunning))
			Expect(s.Status.ContainerStatuses[0].RestartCount).To(BeZero())
			Expect(s.Status.Conditions).NotTo(ContainElement(HaveField("Type", corev1.DisruptionTarget)))

			metrics, err := nodelet.Metrics(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(metrics).To(ContainSubstring(`kubelet_evictions{eviction_signal="memory.available"} 1`))
		})
	})
})

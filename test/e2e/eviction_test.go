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
	"golang.org/x/sys/unix"
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
	expectEvictedWithin(ctx, c, ns, name, msg, evictionTimeout)
}

// expectEvictedWithin is expectEvicted with its own timeout.
func expectEvictedWithin(ctx SpecContext, c client.Client, ns, name string, msg types.GomegaMatcher, timeout time.Duration) {
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
	}).WithContext(ctx).WithTimeout(timeout).WithPolling(pollInterval).Should(Succeed())
}

// podEvicted reports whether the pod's status says it was evicted.
func podEvicted(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed && p.Status.Reason == "Evicted"
}

// freeInodes is the number of free inodes of the file system that holds
// path.
func freeInodes(path string) int64 {
	GinkgoHelper()
	var st unix.Statfs_t
	Expect(unix.Statfs(path, &st)).To(Succeed())
	return int64(st.Ffree) //nolint:gosec // far below 2^63
}

// scratchPod is a busybox pod running script with an emptyDir of
// sizeLimit limit ("" for none) at /scratch.
func scratchPod(ns, name, node, limit, script string) *corev1.Pod {
	p := utils.BusyboxPod(ns, name, node, "sh", "-c", script)
	ed := &corev1.EmptyDirVolumeSource{}
	if limit != "" {
		ed.SizeLimit = ptr.To(resource.MustParse(limit))
	}
	p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: ed}}}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	return p
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

		It("never evicts a critical pod for its local storage limits", func(ctx SpecContext) {
			ns := utils.NewNamespace(ctx, env.Admin)
			const script = "dd if=/dev/zero of=/scratch/fill bs=1M count=2 && sync && touch /scratch/written && sleep 3600"
			critical := scratchPod(ns, "critical", node, "1Mi", script)
			critical.Spec.PriorityClassName = "system-node-critical"
			critical.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Mi")}
			Expect(env.Admin.Create(ctx, critical)).To(Succeed())
			Expect(env.Admin.Create(ctx, scratchPod(ns, "ordinary", node, "1Mi", script))).To(Succeed())

			// Both wrote past their sizeLimit (and the critical one past its
			// ephemeral-storage limit); the rounds see both.
			expectEvicted(ctx, env.Admin, ns, "ordinary", Equal(`Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `))
			p := utils.GetPod(ctx, env.Admin, ns, "critical")(Default)
			Expect(p.Spec.Priority).To(HaveValue(BeNumerically(">=", 2000000000)), "the API server gave the class's priority")
			Consistently(func(g Gomega) {
				c := utils.GetPod(ctx, env.Admin, ns, "critical")(g)
				g.Expect(c.Status.Phase).To(Equal(corev1.PodRunning))
				g.Expect(c.Status.ContainerStatuses).To(HaveLen(1))
				g.Expect(c.Status.ContainerStatuses[0].RestartCount).To(BeZero())
				g.Expect(c.Status.Conditions).NotTo(ContainElement(HaveField("Type", corev1.DisruptionTarget)))
				g.Expect(podEvent(ctx, g, env.Admin, ns, "critical", "Evicted", corev1.EventTypeWarning)).To(BeEmpty())
			}).WithContext(ctx).WithTimeout(5 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
			Eventually(func() string { return env.Nodelet.LogTail(2000) }).WithContext(ctx).WithTimeout(evictionTimeout).WithPolling(pollInterval).
				Should(ContainSubstring("Not evicting a critical pod"), "a round measured it past its limits")
		})

		It("counts every file of an emptyDir: data behind 2^20 empty files is not hidden from its sizeLimit", func(ctx SpecContext) {
			// The walk used to stop at 2^20 entries: a pod that made that
			// many empty files first hid whatever it wrote after them.
			// Here 2^20 empty files (their directory takes about 24Mi) come
			// first in the walk's old (lexical) order, then 96Mi of data
			// past a 64Mi sizeLimit. Measured on a loaded 2-core machine:
			// about 30 s to make the files, 5 s to walk them.
			ns := utils.NewNamespace(ctx, env.Admin)
			hider := scratchPod(ns, "hider", node, "64Mi",
				"cd /scratch && seq -w 1 1048576 | xargs touch && dd if=/dev/zero of=zz-data bs=1M count=96 && sync && sleep 3600")
			Expect(env.Admin.Create(ctx, hider)).To(Succeed())
			expectEvictedWithin(ctx, env.Admin, ns, "hider", Equal(`Usage of EmptyDir volume "scratch" exceeds the limit "64Mi". `), 4*time.Minute)
			Expect(env.Nodelet.Running()).To(BeTrue(), "nodelet keeps running")
		})
	})

	// Serial: the threshold is a count of free inodes on the machine's
	// file system, which another spec making or removing a million files
	// (the sizeLimit walk's) would move past the margin.
	Describe("under inode pressure", Ordered, Serial, func() {
		const node = "e2e-eviction-inodes"
		var (
			admin   client.Client
			nodelet *utils.Nodelet
			ns      string
		)
		BeforeAll(func(ctx SpecContext) {
			var err error
			admin, err = apiServer.AdminClient()
			Expect(err).NotTo(HaveOccurred())
		})
		JustAfterEach(func(ctx SpecContext) {
			if !CurrentSpecReport().Failed() || nodelet == nil {
				return
			}
			GinkgoWriter.Printf("free inodes now: %d\n", freeInodes(nodelet.RootDir))
			var pods corev1.PodList
			if err := admin.List(ctx, &pods, client.InNamespace(ns)); err == nil {
				for _, p := range pods.Items {
					GinkgoWriter.Printf("pod %s: %s %s %q\n", p.Name, p.Status.Phase, p.Status.Reason, p.Status.Message)
				}
			}
			GinkgoWriter.Printf("nodelet log (%s):\n%s\n", nodelet.LogPath, nodelet.LogTail(300))
		})

		It("evicts the pod that made the most files first, not the one that wrote the most bytes", func(ctx SpecContext) {
			// The threshold is inodeMargin below the inodes free now, on
			// the file system of the node's rootDir (a temporary directory):
			// the hog's empty files cross it, other work on the machine
			// would have to make inodeMargin files meanwhile to.
			const inodeMargin = 200000
			threshold := freeInodes(os.TempDir()) - inodeMargin
			Expect(threshold).To(BeNumerically(">", 0), "the file system has room for the hog's files")
			var err error
			nodelet, err = utils.StartNodelet(ctx, utils.NodeletOptions{NodeName: node, API: apiServer, Containerd: ctrd, Config: map[string]any{
				"evictionHard":               map[string]string{"memory.available": "100Mi", "nodefs.inodesFree": strconv.FormatInt(threshold, 10)},
				"evictionMonitoringInterval": "1s",
				"nodeStatusUpdateFrequency":  "1s",
				// The pressure lasts: reclaim must not remove the suite's
				// test images once the pods are gone.
				"imageMinimumGCAge": "1h",
			}})
			if nodelet != nil {
				DeferCleanup(nodelet.Cleanup)
			}
			Expect(err).NotTo(HaveOccurred())
			ns = utils.NewNamespace(ctx, admin)

			// Bytes: 64Mi of data in a few inodes, running before the
			// pressure (under DiskPressure no pod is admitted).
			Expect(admin.Create(ctx, scratchPod(ns, "bytes", node, "",
				"dd if=/dev/zero of=/scratch/data bs=1M count=64 && sync && touch /scratch/written && sleep 3600"))).To(Succeed())
			Eventually(func(g Gomega) {
				p := utils.GetPod(ctx, admin, ns, "bytes")(g)
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
				g.Expect(nodeCondition(ctx, g, admin, node, corev1.NodeDiskPressure).Status).To(Equal(corev1.ConditionFalse))
			}).WithContext(ctx).WithTimeout(evictionTimeout).WithPolling(pollInterval).Should(Succeed())

			// The hog: empty files, twice the margin; a few megabytes of
			// directory blocks, far fewer bytes than the other pod's.
			Expect(admin.Create(ctx, scratchPod(ns, "hog", node, "",
				fmt.Sprintf("cd /scratch && seq 1 %d | xargs touch && sleep 3600", 2*inodeMargin)))).To(Succeed())

			// The manager evicts one pod a round and waits for it to stop
			// before the next; the hog's files stay until its pod is
			// deleted, so the pressure may go on and evict the other pod
			// next. What matters is the order: the hog first.
			Eventually(func(g Gomega) {
				hog := utils.GetPod(ctx, admin, ns, "hog")(g)
				other := utils.GetPod(ctx, admin, ns, "bytes")(g)
				if podEvicted(other) && !podEvicted(hog) {
					StopTrying("the pod holding bytes was evicted before the one holding inodes").
						Wrap(fmt.Errorf("%s: %s", other.Name, other.Status.Message)).Now()
				}
				g.Expect(podEvicted(hog)).To(BeTrue())
			}).WithContext(ctx).WithTimeout(2 * evictionTimeout).WithPolling(pollInterval).Should(Succeed())
			expectEvicted(ctx, admin, ns, "hog", And(
				HavePrefix("The node was low on resource: inodes. Threshold quantity: "),
				Not(ContainSubstring("Container"))))
			Expect(nodeCondition(ctx, Default, admin, node, corev1.NodeDiskPressure).Status).To(Equal(corev1.ConditionTrue))
			Eventually(func(g Gomega) {
				g.Expect(podEvent(ctx, g, admin, "default", node, "EvictionThresholdMet", corev1.EventTypeWarning)).To(Equal("Attempting to reclaim inodes"))
			}).WithContext(ctx).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())
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

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// resizeNode is the node the resize specs' nodelet runs.
	resizeNode = "e2e-resize"
	// resizeTimeout bounds a resize reaching the cgroups and the status,
	// a restart by the resize policy included; waits add it to a start.
	resizeTimeout = 30 * time.Second
)

// cgroupValues are a container's cgroup v1 settings, as read inside it.
type cgroupValues struct {
	Shares, Quota, MemoryLimit int64
}

var _ = Describe("In-place pod resize", Ordered, func() {
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: resizeNode, API: apiServer, Containerd: ctrd}
	})

	waitFor := func(ctx SpecContext, ns, name string, check func(Gomega, *corev1.Pod)) *corev1.Pod {
		GinkgoHelper()
		return utils.WaitForPod(ctx, env.Admin, ns, name, podStartTimeout+resizeTimeout, check)
	}
	// readCgroups reads the container's cpu.shares, cpu.cfs_quota_us and
	// memory.limit_in_bytes from inside it, as the conformance specs do.
	readCgroups := func(ctx SpecContext, rs internalapi.RuntimeService, p *corev1.Pod) (cgroupValues, error) {
		id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
		out, stderr, err := rs.ExecSync(ctx, id, []string{"cat",
			"/sys/fs/cgroup/cpu/cpu.shares", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}, 10*time.Second)
		if err != nil {
			return cgroupValues{}, fmt.Errorf("reading cgroups: %w (%s)", err, stderr)
		}
		var v []int64
		for _, f := range strings.Fields(string(out)) {
			n, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return cgroupValues{}, fmt.Errorf("cgroup value %q: %w", f, err)
			}
			v = append(v, n)
		}
		if len(v) != 3 {
			return cgroupValues{}, fmt.Errorf("cgroup values %q", out)
		}
		return cgroupValues{Shares: v[0], Quota: v[1], MemoryLimit: v[2]}, nil
	}
	resizeConditions := func(p *corev1.Pod) []corev1.PodCondition {
		var out []corev1.PodCondition
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress {
				out = append(out, c)
			}
		}
		return out
	}
	patchResize := func(ctx SpecContext, p *corev1.Pod, resources string) {
		GinkgoHelper()
		patch := fmt.Sprintf(`{"spec":{"containers":[{"name":"main","resources":%s}]}}`, resources)
		Expect(env.Admin.SubResource("resize").Patch(ctx, p, client.RawPatch(types.StrategicMergePatchType, []byte(patch)))).To(Succeed())
	}
	eventFor := func(ctx SpecContext, g Gomega, ns, name, reason, msg string) bool {
		var events corev1.EventList
		g.Expect(env.Admin.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason && strings.Contains(e.Message, msg) {
				return true
			}
		}
		return false
	}
	resources := func(cpuReq, cpuLim, memReq, memLim string) corev1.ResourceRequirements {
		r := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
		for _, q := range []struct {
			l    corev1.ResourceList
			name corev1.ResourceName
			v    string
		}{{r.Requests, corev1.ResourceCPU, cpuReq}, {r.Limits, corev1.ResourceCPU, cpuLim}, {r.Requests, corev1.ResourceMemory, memReq}, {r.Limits, corev1.ResourceMemory, memLim}} {
			if q.v != "" {
				q.l[q.name] = resource.MustParse(q.v)
			}
		}
		if len(r.Limits) == 0 {
			r.Limits = nil
		}
		return r
	}

	It("updates the cgroups of a running container in place, and restarts one whose resize policy asks", func(ctx SpecContext) {
		rs, _ := newCRIClients(ctx)
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "web", resizeNode, "sleep", "3600")
		pod.Spec.Containers[0].Resources = resources("100m", "200m", "32Mi", "64Mi")
		pod.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{
			{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired},
			{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer},
		}
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		p := waitFor(ctx, ns, "web", func(g Gomega, p *corev1.Pod) {
			g.Expect(utils.PodReady(p)).To(BeTrue())
			cs := p.Status.ContainerStatuses[0]
			g.Expect(cs.Resources).To(Equal(&pod.Spec.Containers[0].Resources))
			g.Expect(cs.AllocatedResources).To(Equal(pod.Spec.Containers[0].Resources.Requests))
		})
		Expect(readCgroups(ctx, rs, p)).To(Equal(cgroupValues{Shares: 102, Quota: 20000, MemoryLimit: 64 << 20}))
		firstID := p.Status.ContainerStatuses[0].ContainerID

		By("doubling cpu through the resize subresource's replace endpoint")
		p.Spec.Containers[0].Resources = resources("200m", "400m", "32Mi", "64Mi")
		Expect(env.Admin.SubResource("resize").Update(ctx, p)).To(Succeed())
		Expect(p.Generation).To(BeEquivalentTo(2))
		p = waitFor(ctx, ns, "web", func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.ObservedGeneration).To(BeEquivalentTo(2))
			g.Expect(resizeConditions(p)).To(BeEmpty())
			cs := p.Status.ContainerStatuses[0]
			g.Expect(cs.Resources.Requests.Cpu().String()).To(Equal("200m"))
			g.Expect(cs.Resources.Limits.Cpu().String()).To(Equal("400m"))
			g.Expect(cs.AllocatedResources.Cpu().String()).To(Equal("200m"))
			g.Expect(eventFor(ctx, g, ns, "web", "ResizeCompleted", `"generation":2`)).To(BeTrue())
		})
		cs := p.Status.ContainerStatuses[0]
		Expect(cs.ContainerID).To(Equal(firstID), "resized in place")
		Expect(cs.RestartCount).To(BeZero())
		Expect(readCgroups(ctx, rs, p)).To(Equal(cgroupValues{Shares: 204, Quota: 40000, MemoryLimit: 64 << 20}))

		By("raising the memory limit, whose resize policy restarts the container")
		patchResize(ctx, p, `{"limits":{"memory":"128Mi"}}`)
		p = waitFor(ctx, ns, "web", func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.ObservedGeneration).To(BeEquivalentTo(3))
			g.Expect(resizeConditions(p)).To(BeEmpty())
			g.Expect(utils.PodReady(p)).To(BeTrue())
			cs := p.Status.ContainerStatuses[0]
			g.Expect(cs.RestartCount).To(BeEquivalentTo(1))
			g.Expect(cs.Resources.Limits.Memory().String()).To(Equal("128Mi"))
		})
		Expect(p.Status.ContainerStatuses[0].ContainerID).NotTo(Equal(firstID))
		Expect(readCgroups(ctx, rs, p)).To(Equal(cgroupValues{Shares: 204, Quota: 40000, MemoryLimit: 128 << 20}))
	})

	It("declares the resizes it implements, so the API server lets a pod-level resize through", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			node := &corev1.Node{}
			g.Expect(env.Admin.Get(ctx, client.ObjectKey{Name: resizeNode}, node)).To(Succeed())
			g.Expect(node.Status.DeclaredFeatures).To(ConsistOf("InPlacePodLevelResourcesVerticalScaling", "InPlacePodVerticalScalingInitContainers"))
		}).WithContext(ctx).WithTimeout(podStartTimeout).Should(Succeed())

		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "pod-level", resizeNode, "sleep", "3600")
		r := resources("100m", "200m", "32Mi", "64Mi")
		pod.Spec.Resources = &r
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		p := waitFor(ctx, ns, "pod-level", func(g Gomega, p *corev1.Pod) {
			g.Expect(utils.PodReady(p)).To(BeTrue())
		})
		// The API server refuses this unless the node declares
		// InPlacePodLevelResourcesVerticalScaling.
		r = resources("100m", "400m", "32Mi", "64Mi")
		p.Spec.Resources = &r
		Expect(env.Admin.SubResource("resize").Update(ctx, p)).To(Succeed())
		waitFor(ctx, ns, "pod-level", func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.ObservedGeneration).To(BeEquivalentTo(2))
			g.Expect(resizeConditions(p)).To(BeEmpty())
			g.Expect(utils.PodReady(p)).To(BeTrue())
		})
	})

	It("refuses to lower a memory limit below what the container uses, and keeps it running", func(ctx SpecContext) {
		rs, _ := newCRIClients(ctx)
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "shrink", resizeNode, "sleep", "3600")
		pod.Spec.Containers[0].Resources = resources("100m", "", "32Mi", "64Mi")
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		p := waitFor(ctx, ns, "shrink", func(g Gomega, p *corev1.Pod) { g.Expect(utils.PodReady(p)).To(BeTrue()) })

		patchResize(ctx, p, `{"requests":{"memory":"8Ki"},"limits":{"memory":"10Ki"}}`)
		p = waitFor(ctx, ns, "shrink", func(g Gomega, p *corev1.Pod) {
			conds := resizeConditions(p)
			g.Expect(conds).To(HaveLen(1))
			g.Expect(conds[0].Type).To(Equal(corev1.PodResizeInProgress))
			g.Expect(conds[0].Reason).To(Equal(corev1.PodReasonError))
			g.Expect(conds[0].Message).To(MatchRegexp(`memory limit \(\d+\) below current usage`))
			g.Expect(conds[0].ObservedGeneration).To(BeEquivalentTo(2))
			g.Expect(eventFor(ctx, g, ns, "shrink", "ResizeError", "below current usage")).To(BeTrue())
		})
		Expect(p.Status.ContainerStatuses[0].Resources.Limits.Memory().String()).To(Equal("64Mi"), "the status shows what runs")
		Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeZero())
		Expect(readCgroups(ctx, rs, p)).To(HaveField("MemoryLimit", BeEquivalentTo(64<<20)))

		By("going back to the old limit")
		patchResize(ctx, p, `{"requests":{"memory":"32Mi"},"limits":{"memory":"64Mi"}}`)
		waitFor(ctx, ns, "shrink", func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.ObservedGeneration).To(BeEquivalentTo(3))
			g.Expect(resizeConditions(p)).To(BeEmpty())
			g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeZero())
		})
	})

	It("defers a resize that does not fit next to the node's other pods, across a restart, until room is made", func(ctx SpecContext) {
		rs, _ := newCRIClients(ctx)
		ns := utils.NewNamespace(ctx, env.Admin)
		node := &corev1.Node{}
		Expect(env.Admin.Get(ctx, client.ObjectKey{Name: resizeNode}, node)).To(Succeed())
		allocatable := node.Status.Allocatable.Cpu().MilliValue()
		var pods corev1.PodList
		Expect(env.Admin.List(ctx, &pods)).To(Succeed())
		free := allocatable
		for _, p := range pods.Items {
			if p.Spec.NodeName == resizeNode && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				for _, c := range p.Spec.Containers {
					free -= c.Resources.Requests.Cpu().MilliValue()
				}
			}
		}
		Expect(free).To(BeNumerically(">", 500))

		// The filler leaves 300m: the pod fits with 100m, not with 400m.
		filler := utils.BusyboxPod(ns, "filler", resizeNode, "sleep", "3600")
		filler.Spec.TerminationGracePeriodSeconds = new(int64)
		filler.Spec.Containers[0].Resources = resources(fmt.Sprintf("%dm", free-300), "", "", "")
		pod := utils.BusyboxPod(ns, "grow", resizeNode, "sleep", "3600")
		pod.Spec.Containers[0].Resources = resources("100m", "", "", "")
		Expect(env.Admin.Create(ctx, filler)).To(Succeed())
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		waitFor(ctx, ns, "filler", func(g Gomega, p *corev1.Pod) { g.Expect(utils.PodReady(p)).To(BeTrue()) })
		p := waitFor(ctx, ns, "grow", func(g Gomega, p *corev1.Pod) { g.Expect(utils.PodReady(p)).To(BeTrue()) })
		id := p.Status.ContainerStatuses[0].ContainerID

		patchResize(ctx, p, `{"requests":{"cpu":"400m"}}`)
		deferred := func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.ObservedGeneration).To(BeEquivalentTo(2))
			conds := resizeConditions(p)
			g.Expect(conds).To(HaveLen(1))
			g.Expect(conds[0].Type).To(Equal(corev1.PodResizePending))
			g.Expect(conds[0].Reason).To(Equal(corev1.PodReasonDeferred))
			g.Expect(conds[0].Message).To(MatchRegexp(`^Node didn't have enough resource: cpu, requested: 400, used: \d+, capacity: ` + strconv.FormatInt(allocatable, 10) + `$`))
			g.Expect(conds[0].ObservedGeneration).To(BeEquivalentTo(2))
			cs := p.Status.ContainerStatuses[0]
			g.Expect(cs.Resources.Requests.Cpu().String()).To(Equal("100m"), "the pod keeps its size")
			g.Expect(cs.AllocatedResources.Cpu().String()).To(Equal("100m"))
			g.Expect(cs.ContainerID).To(Equal(id))
		}
		p = waitFor(ctx, ns, "grow", func(g Gomega, p *corev1.Pod) {
			deferred(g, p)
			g.Expect(eventFor(ctx, g, ns, "grow", "ResizeDeferred", "Node didn't have enough resource")).To(BeTrue())
		})
		Expect(readCgroups(ctx, rs, p)).To(HaveField("Shares", BeEquivalentTo(102)))

		By("restarting nodelet: the allocation is in the pod's checkpoint")
		ckpt := filepath.Join(env.Nodelet.RootDir, "checkpoints", "pod-"+string(p.UID))
		info, err := os.Stat(ckpt)
		Expect(err).NotTo(HaveOccurred())
		Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o600)))
		data, err := os.ReadFile(ckpt)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(data)).To(ContainSubstring(`"allocated":{"main":{"requests":{"cpu":"100m"}}}`))
		Expect(env.Nodelet.Kill()).To(Succeed())
		Expect(env.Nodelet.Restart(ctx)).To(Succeed())
		Consistently(func(g Gomega) {
			deferred(g, utils.GetPod(ctx, env.Admin, ns, "grow")(g))
		}).WithTimeout(5 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

		By("deleting the filler")
		Expect(env.Admin.Delete(ctx, filler)).To(Succeed())
		p = waitFor(ctx, ns, "grow", func(g Gomega, p *corev1.Pod) {
			g.Expect(resizeConditions(p)).To(BeEmpty())
			cs := p.Status.ContainerStatuses[0]
			g.Expect(cs.Resources.Requests.Cpu().String()).To(Equal("400m"))
			g.Expect(cs.AllocatedResources.Cpu().String()).To(Equal("400m"))
			g.Expect(cs.ContainerID).To(Equal(id))
			g.Expect(eventFor(ctx, g, ns, "grow", "ResizeCompleted", `"generation":2`)).To(BeTrue())
		})
		Expect(readCgroups(ctx, rs, p)).To(HaveField("Shares", BeEquivalentTo(409)))
	})
})

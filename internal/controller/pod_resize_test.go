package controller_test

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

var _ = Describe("In-place pod resize on the CRI fakes", func() {
	// resize patches one container's resources through the resize
	// subresource.
	resize := func(ctx context.Context, pod *corev1.Pod, container, resources string) {
		GinkgoHelper()
		patch := fmt.Sprintf(`{"spec":{"containers":[{"name":%q,"resources":%s}]}}`, container, resources)
		Expect(admin.SubResource("resize").Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, []byte(patch)))).To(Succeed())
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
	hasEvent := func(ctx context.Context, g Gomega, ns, name, reason, msg string) bool {
		var events corev1.EventList
		g.Expect(admin.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason && strings.Contains(e.Message, msg) {
				return true
			}
		}
		return false
	}
	cpu := func(p *corev1.Pod) string {
		r := p.Status.ContainerStatuses[0].Resources
		if r == nil {
			return "<nil>"
		}
		return r.Requests.Cpu().String()
	}

	It("resizes in place, restarts by the resize policy, and defers what does not fit until room is made", func(ctx SpecContext) {
		a := startFakeRuntimeAgent(110)
		ns := "fake-" + nodeName()
		Expect(utils.CreateNamespace(ctx, admin, ns)).To(Succeed())
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: a.node}}
		Expect(admin.Create(ctx, node)).To(Succeed())
		node.Status.Allocatable = corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourcePods: resource.MustParse("110"),
		}
		node.Status.Capacity = node.Status.Allocatable
		Expect(admin.Status().Update(ctx, node)).To(Succeed())

		filler := utils.BusyboxPod(ns, "filler", a.node, "sleep", "3600")
		filler.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
		web := utils.BusyboxPod(ns, "web", a.node, "sleep", "3600")
		web.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
		}
		web.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{
			{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer},
		}
		Expect(admin.Create(ctx, filler)).To(Succeed())
		Expect(admin.Create(ctx, web)).To(Succeed())
		Eventually(func(g Gomega) {
			p := utils.GetPod(ctx, admin, ns, "web")(g)
			g.Expect(utils.PodReady(p)).To(BeTrue())
			cs := p.Status.ContainerStatuses[0]
			g.Expect(cs.Resources).To(Equal(&web.Spec.Containers[0].Resources))
			g.Expect(cs.AllocatedResources).To(Equal(web.Spec.Containers[0].Resources.Requests))
			g.Expect(utils.PodReady(utils.GetPod(ctx, admin, ns, "filler")(g))).To(BeTrue())
		}).WithTimeout(fakePodTimeout).Should(Succeed())

		By("raising the cpu request in place")
		resize(ctx, web, "main", `{"requests":{"cpu":"400m"}}`)
		Eventually(func(g Gomega) {
			p := utils.GetPod(ctx, admin, ns, "web")(g)
			g.Expect(p.Generation).To(BeEquivalentTo(2))
			g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
			g.Expect(resizeConditions(p)).To(BeEmpty())
			g.Expect(cpu(p)).To(Equal("400m"))
			g.Expect(p.Status.ContainerStatuses[0].AllocatedResources.Cpu().String()).To(Equal("400m"))
			g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeZero())
			g.Expect(hasEvent(ctx, g, ns, "web", "ResizeStarted", `"generation":2`)).To(BeTrue())
			g.Expect(hasEvent(ctx, g, ns, "web", "ResizeCompleted", `"generation":2`)).To(BeTrue())
		}).WithTimeout(fakePodTimeout).Should(Succeed())
		Expect(a.calls("UpdateContainerResources")).To(Equal(1))

		By("raising the memory limit, whose policy restarts the container")
		resize(ctx, web, "main", `{"limits":{"memory":"192Mi"}}`)
		Eventually(func(g Gomega) {
			p := utils.GetPod(ctx, admin, ns, "web")(g)
			g.Expect(p.Status.ObservedGeneration).To(BeEquivalentTo(3))
			g.Expect(resizeConditions(p)).To(BeEmpty())
			cs := p.Status.ContainerStatuses[0]
			g.Expect(cs.RestartCount).To(BeEquivalentTo(1))
			g.Expect(cs.State.Running).NotTo(BeNil())
			g.Expect(cs.Resources.Limits.Memory().String()).To(Equal("192Mi"))
		}).WithTimeout(fakePodTimeout).Should(Succeed())
		Expect(a.calls("UpdateContainerResources")).To(Equal(1), "a restart needs no update")

		By("deferring a resize that does not fit next to the filler")
		resize(ctx, web, "main", `{"requests":{"cpu":"600m"}}`)
		Eventually(func(g Gomega) {
			p := utils.GetPod(ctx, admin, ns, "web")(g)
			g.Expect(p.Status.ObservedGeneration).To(BeEquivalentTo(4))
			conds := resizeConditions(p)
			g.Expect(conds).To(HaveLen(1))
			g.Expect(conds[0].Type).To(Equal(corev1.PodResizePending))
			g.Expect(conds[0].Reason).To(Equal(corev1.PodReasonDeferred))
			g.Expect(conds[0].Message).To(Equal("Node didn't have enough resource: cpu, requested: 600, used: 500, capacity: 1000"))
			g.Expect(conds[0].ObservedGeneration).To(BeEquivalentTo(4))
			g.Expect(cpu(p)).To(Equal("400m"), "the pod keeps its size")
			g.Expect(p.Status.ContainerStatuses[0].AllocatedResources.Cpu().String()).To(Equal("400m"))
			g.Expect(hasEvent(ctx, g, ns, "web", "ResizeDeferred", "Node didn't have enough resource")).To(BeTrue())
		}).WithTimeout(fakePodTimeout).Should(Succeed())

		By("allocating it once the filler is gone")
		Expect(admin.Delete(ctx, filler, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func(g Gomega) {
			p := utils.GetPod(ctx, admin, ns, "web")(g)
			g.Expect(resizeConditions(p)).To(BeEmpty())
			g.Expect(cpu(p)).To(Equal("600m"))
			g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeEquivalentTo(1))
		}).WithTimeout(fakePodTimeout).Should(Succeed())
		Expect(a.calls("UpdateContainerResources")).To(Equal(2))
	})
})

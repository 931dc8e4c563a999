package e2e

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// devicesNode is the node of the extended resource and resource claim
	// specs.
	devicesNode = "e2e-devices"
	// dongle is the extended resource the specs give the Node, as an
	// operator advertises one without a device plugin.
	dongle corev1.ResourceName = "example.com/dongle"
	// claimRetryTimeout covers a pod worker's retry after a claim changed
	// (its back-off is at most 30 s) and the Event.
	claimRetryTimeout = 90 * time.Second
	// claimRefusedFor is how long a pod with an unprepared claim is
	// watched not starting.
	claimRefusedFor = 5 * time.Second
)

var _ = Describe("Extended resources and resource claims", Ordered, func() {
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: devicesNode, API: apiServer, Containerd: ctrd}
	})

	// eventsFor returns the messages of the pod's Events of reason.
	eventsFor := func(ctx SpecContext, g Gomega, ns, name, reason string) []string {
		var events corev1.EventList
		g.Expect(env.Admin.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		var out []string
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason {
				out = append(out, e.Message)
			}
		}
		return out
	}
	// sandboxesOf lists the runtime's sandboxes of the pod.
	sandboxesOf := func(ctx SpecContext, g Gomega, uid string) []*runtimeapi.PodSandbox {
		rs, _ := newCRIClients(ctx)
		sbs, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
			LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid}})
		g.Expect(err).NotTo(HaveOccurred())
		return sbs
	}
	requesting := func(ns, name string, res corev1.ResourceList) *corev1.Pod {
		p := utils.BusyboxPod(ns, name, devicesNode, "sleep", "3600")
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: res, Limits: res}
		return p
	}
	expectRunning := func(ctx SpecContext, ns, name string) {
		GinkgoHelper()
		utils.WaitForPod(ctx, env.Admin, ns, name, podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		})
	}
	expectRejected := func(ctx SpecContext, ns, name, reason, msg string) {
		GinkgoHelper()
		p := utils.WaitForPod(ctx, env.Admin, ns, name, podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
		})
		Expect(p.Status.Reason).To(Equal(reason))
		Expect(p.Status.Message).To(Equal(msg))
		Expect(sandboxesOf(ctx, Default, string(p.UID))).To(BeEmpty(), "a rejected pod gets no sandbox")
	}

	It("admits pods for the extended resources and huge pages the Node has, and no more", func(ctx SpecContext) {
		By("advertising two dongles on the Node, as an operator does")
		node := &corev1.Node{}
		Eventually(func(g Gomega) {
			g.Expect(env.Admin.Get(ctx, client.ObjectKey{Name: devicesNode}, node)).To(Succeed())
			g.Expect(node.Status.Allocatable).To(HaveKey(corev1.ResourcePods), "the Node's status written")
		}).WithContext(ctx).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(Succeed())
		orig := node.DeepCopy()
		node.Status.Capacity[dongle] = resource.MustParse("2")
		node.Status.Allocatable[dongle] = resource.MustParse("2")
		Expect(env.Admin.Status().Patch(ctx, node, client.MergeFrom(orig))).To(Succeed())
		Consistently(func(g Gomega) {
			n := &corev1.Node{}
			g.Expect(env.Admin.Get(ctx, client.ObjectKey{Name: devicesNode}, n)).To(Succeed())
			g.Expect(n.Status.Allocatable).To(HaveKeyWithValue(dongle, resource.MustParse("2")), "nodelet keeps the advertised resource")
		}).WithContext(ctx).WithTimeout(3 * time.Second).WithPolling(pollInterval).Should(Succeed())

		ns := utils.NewNamespace(ctx, env.Admin)
		one := corev1.ResourceList{dongle: resource.MustParse("1")}
		By("running a pod on each dongle")
		for _, name := range []string{"dongle-a", "dongle-b"} {
			createPod(ctx, env.Admin, requesting(ns, name, one))
		}
		expectRunning(ctx, ns, "dongle-a")
		expectRunning(ctx, ns, "dongle-b")

		By("rejecting a third, with the kubelet's reason and message")
		createPod(ctx, env.Admin, requesting(ns, "dongle-c", one))
		expectRejected(ctx, ns, "dongle-c", "OutOfexample.com/dongle",
			"Pod was rejected: Node didn't have enough resource: example.com/dongle, requested: 1, used: 2, capacity: 2")

		By("rejecting huge pages of a size the node has none of")
		createPod(ctx, env.Admin, requesting(ns, "huge", corev1.ResourceList{
			"hugepages-1Gi": resource.MustParse("1Gi"), corev1.ResourceMemory: resource.MustParse("16Mi"),
		}))
		expectRejected(ctx, ns, "huge", "OutOfhugepages-1Gi",
			"Pod was rejected: Node didn't have enough resource: hugepages-1Gi, requested: 1073741824, used: 0, capacity: 0")

		By("admitting a new pod once a dongle's pod is deleted")
		Expect(env.Admin.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dongle-a"}})).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(env.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dongle-a"}, &corev1.Pod{})).NotTo(Succeed())
		}).WithContext(ctx).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(Succeed())
		createPod(ctx, env.Admin, requesting(ns, "dongle-d", one))
		expectRunning(ctx, ns, "dongle-d")
	})

	It("never starts a pod whose ResourceClaim is not prepared on the node", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "claimed", devicesNode, "sleep", "3600")
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("gpu")}}
		pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
		createPod(ctx, env.Admin, pod)

		// expectRefused waits for a FailedPrepareDynamicResources Event
		// containing msg, then sees the pod stay Pending without a sandbox.
		expectRefused := func(msg string) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				msgs := eventsFor(ctx, g, ns, "claimed", "FailedPrepareDynamicResources")
				g.Expect(msgs).To(ContainElement(And(HavePrefix("Failed to prepare dynamic resources: prepare dynamic resources: "),
					ContainSubstring(msg))))
			}).WithContext(ctx).WithTimeout(claimRetryTimeout).WithPolling(pollInterval).Should(Succeed())
			Consistently(func(g Gomega) {
				p := utils.GetPod(ctx, env.Admin, ns, "claimed")(g)
				g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
				g.Expect(sandboxesOf(ctx, g, string(p.UID))).To(BeEmpty(), "no sandbox without the claim")
			}).WithContext(ctx).WithTimeout(claimRefusedFor).WithPolling(pollInterval).Should(Succeed())
		}

		By("waiting while the claim does not exist")
		expectRefused("fetch ResourceClaim gpu: ")

		By("waiting while the claim exists but is not reserved for the pod")
		claim := &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gpu"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.e2e.nodelet.test"},
			}}}},
		}
		Expect(env.Admin.Create(ctx, claim)).To(Succeed())
		expectRefused("is not allowed to use ResourceClaim gpu")

		By("waiting while the driver that allocated the claim is not on the node")
		p := utils.GetPod(ctx, env.Admin, ns, "claimed")(Default)
		claim.Status = resourceapi.ResourceClaimStatus{
			Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
				Results: []resourceapi.DeviceRequestAllocationResult{{
					Request: "gpu", Driver: "gpu.e2e.nodelet.test", Pool: devicesNode, Device: "gpu-0",
				}},
			}},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: p.Name, UID: p.UID}},
		}
		Expect(env.Admin.Status().Update(ctx, claim)).To(Succeed())
		expectRefused("DRA driver gpu.e2e.nodelet.test is not registered")

		By("deleting the pod that never started")
		Expect(env.Admin.Delete(ctx, p)).To(Succeed())
		Eventually(func(g Gomega) bool {
			err := env.Admin.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{})
			return err != nil && strings.Contains(err.Error(), "not found")
		}).WithContext(ctx).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(BeTrue())
	})
})

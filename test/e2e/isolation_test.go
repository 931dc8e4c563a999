package e2e

import (
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/test/utils"
)

const (
	// isolationNode is the node the isolation specs' nodelet runs.
	isolationNode = "e2e-isolation"
	// isolationTimeout covers a sandbox, a container and a readiness probe,
	// or a refusal and its Event.
	isolationTimeout = 60 * time.Second
	// isolationRefusedFor is how long a refused pod is watched staying
	// refused.
	isolationRefusedFor = 5 * time.Second
)

var _ = Describe("Pod isolation requests", Ordered, func() {
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: isolationNode, API: apiServer, Containerd: ctrd}
	})

	// eventFor returns the message of the pod's Event of reason, or "".
	eventFor := func(ctx SpecContext, g Gomega, ns, name, reason string) string {
		var events corev1.EventList
		g.Expect(env.Admin.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason {
				return e.Message
			}
		}
		return ""
	}
	expectReady := func(ctx SpecContext, ns, name string) *corev1.Pod {
		GinkgoHelper()
		return utils.WaitForPod(ctx, env.Admin, ns, name, isolationTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(utils.PodReady(p)).To(BeTrue(), "pod %s ready", name)
		})
	}
	// expectSandboxRefused waits for the kubelet's FailedCreatePodSandBox
	// Event and the PodReadyToStartContainers condition saying msg, then
	// checks that the pod stays Pending without any sandbox.
	expectSandboxRefused := func(ctx SpecContext, ns, name, msg string) {
		GinkgoHelper()
		want := "Failed to create pod sandbox: " + msg
		Eventually(func(g Gomega) {
			g.Expect(eventFor(ctx, g, ns, name, "FailedCreatePodSandBox")).To(Equal(want))
			p := utils.GetPod(ctx, env.Admin, ns, name)(g)
			g.Expect(p.Status.Conditions).To(ContainElement(And(
				HaveField("Type", corev1.PodReadyToStartContainers),
				HaveField("Status", corev1.ConditionFalse),
				HaveField("Message", want))))
		}).WithContext(ctx).WithTimeout(isolationTimeout).WithPolling(pollInterval).Should(Succeed())
		rs, _ := newCRIClients(ctx)
		Consistently(func(g Gomega) {
			p := utils.GetPod(ctx, env.Admin, ns, name)(g)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
			sandboxes, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
				LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(p.UID)}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sandboxes).To(BeEmpty(), "no sandbox for a refused pod")
		}).WithContext(ctx).WithTimeout(isolationRefusedFor).WithPolling(pollInterval).Should(Succeed())
	}
	runtimeClass := func(ctx SpecContext, name, handler string) {
		GinkgoHelper()
		rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: handler}
		Expect(env.Admin.Create(ctx, rc)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(env.Admin.Delete(ctx, rc))).To(Succeed())
		})
	}

	// userNamespaces reports whether the runtime's default handler says it
	// runs pods in user namespaces (Status runtime_handlers features), as
	// nodelet reads it.
	userNamespaces := func(ctx SpecContext) bool {
		GinkgoHelper()
		rs, _ := newCRIClients(ctx)
		st, err := rs.Status(ctx, false)
		Expect(err).NotTo(HaveOccurred())
		return cri.FeaturesFromStatus(st).UserNamespaces("")
	}
	// execIn runs command in the pod's first container and returns its
	// standard output.
	execIn := func(ctx SpecContext, p *corev1.Pod, command ...string) string {
		GinkgoHelper()
		rs, _ := newCRIClients(ctx)
		id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
		stdout, stderr, err := rs.ExecSync(ctx, id, command, criTimeout)
		Expect(err).NotTo(HaveOccurred(), "%v: %s", command, stderr)
		return string(stdout)
	}

	It("refuses a pod with hostUsers: false on a runtime without user namespaces, and keeps running others", func(ctx SpecContext) {
		if userNamespaces(ctx) {
			Skip("the runtime's default handler reports user namespaces (containerd 2 on this kernel: runtime handler feature user_namespaces): it has no refusal to show; the next spec runs such a pod")
		}
		ns := utils.NewNamespace(ctx, env.Admin)
		userns := utils.BusyboxPod(ns, "userns", isolationNode, "sleep", "3600")
		userns.Spec.HostUsers = ptr.To(false)
		userns.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)}
		Expect(env.Admin.Create(ctx, userns)).To(Succeed())
		expectSandboxRefused(ctx, ns, "userns", "can't set `spec.hostUsers: false`, runtime does not support user namespaces")

		By("running another pod next to it")
		Expect(env.Admin.Create(ctx, utils.BusyboxPod(ns, "other", isolationNode, "sleep", "3600"))).To(Succeed())
		expectReady(ctx, ns, "other")
		Expect(env.Nodelet.Running()).To(BeTrue(), "nodelet keeps running")
	})

	It("runs a pod with hostUsers: false in a user namespace of its own on a runtime with them", func(ctx SpecContext) {
		if !userNamespaces(ctx) {
			Skip("the runtime's default handler does not report user namespaces (containerd 1.6 reports no runtime handler features at all): the previous spec checks the refusal")
		}
		ns := utils.NewNamespace(ctx, env.Admin)
		userns := utils.BusyboxPod(ns, "userns", isolationNode, "sleep", "3600")
		userns.Spec.HostUsers = ptr.To(false)
		userns.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)}
		Expect(env.Admin.Create(ctx, userns)).To(Succeed())
		var ready *corev1.Pod
		denied := ""
		Eventually(func(g Gomega) {
			p := utils.GetPod(ctx, env.Admin, ns, "userns")(g)
			if utils.PodReady(p) {
				ready = p
				return
			}
			// runc 1.5 sets up a user-namespaced pod's rootfs with a
			// propagation remount that a host may deny: then no runtime
			// runs such a pod there, whatever the agent.
			if msg := eventFor(ctx, g, ns, "userns", "FailedCreatePodSandBox"); strings.Contains(msg, "remount-propagation") && strings.Contains(msg, "permission denied") {
				denied = msg
				return
			}
			g.Expect(utils.PodReady(p)).To(BeTrue(), "pod userns ready")
		}).WithContext(ctx).WithTimeout(isolationTimeout).WithPolling(pollInterval).Should(Succeed())
		if denied != "" {
			Skip("the runtime reports user namespaces, but runc cannot set up a user-namespaced rootfs on this host: " + denied)
		}

		By("root in the pod is an unprivileged range of the host's IDs")
		fields := strings.Fields(execIn(ctx, ready, "cat", "/proc/self/uid_map"))
		Expect(fields).To(HaveLen(3), "one mapping")
		Expect(fields[0]).To(Equal("0"))
		Expect(fields[1]).NotTo(Equal("0"), "container root is not the host's root")
		Expect(fields[2]).To(Equal("65536"))
		Expect(strings.Fields(execIn(ctx, ready, "id", "-u"))).To(Equal([]string{"0"}))
	})

	It("runs a pod on its RuntimeClass's handler, not on a handler named like the class", func(ctx SpecContext) {
		runtimeClass(ctx, "sandboxed", utils.SecondRuntimeHandler)
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "sandboxed", isolationNode, "sleep", "3600")
		pod.Spec.RuntimeClassName = ptr.To("sandboxed")
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		ready := expectReady(ctx, ns, "sandboxed")

		rs, _ := newCRIClients(ctx)
		sandboxes, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
			LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(ready.UID)}})
		Expect(err).NotTo(HaveOccurred())
		Expect(sandboxes).To(HaveLen(1))
		Expect(sandboxes[0].RuntimeHandler).To(Equal(utils.SecondRuntimeHandler))
		status, err := rs.PodSandboxStatus(ctx, sandboxes[0].Id, false)
		Expect(err).NotTo(HaveOccurred())
		Expect(status.GetStatus().GetRuntimeHandler()).To(Equal(utils.SecondRuntimeHandler))
	})

	It("refuses the sandbox of a pod whose RuntimeClass is gone, and starts it once the class is back", func(ctx SpecContext) {
		// The API server refuses to create a pod naming a missing class:
		// the class goes after the pod is created and before it is bound.
		runtimeClass(ctx, "transient", utils.SecondRuntimeHandler)
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "classless", "", "sleep", "3600")
		pod.Spec.RuntimeClassName = ptr.To("transient")
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		Expect(env.Admin.Delete(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "transient"}})).To(Succeed())
		Eventually(func(g Gomega) {
			err := env.Admin.Get(ctx, client.ObjectKey{Name: "transient"}, &nodev1.RuntimeClass{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "class deleted: %v", err)
		}).WithContext(ctx).WithTimeout(isolationTimeout).Should(Succeed())
		binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "classless"},
			Target: corev1.ObjectReference{Kind: "Node", Name: isolationNode}}
		Expect(env.Admin.SubResource("binding").Create(ctx, pod, binding)).To(Succeed())
		expectSandboxRefused(ctx, ns, "classless", `runtimeclass.node.k8s.io "transient" not found`)

		By("creating the class again: the pod is retried and starts on its handler")
		runtimeClass(ctx, "transient", utils.SecondRuntimeHandler)
		expectReady(ctx, ns, "classless")
	})

	It("refuses a pod with supplementalGroupsPolicy: Strict on a runtime without it", func(ctx SpecContext) {
		if utils.IsContainerd2() {
			Skip("containerd 2 reports the supplemental_groups_policy runtime feature: it has no refusal to show; the next spec runs such a pod")
		}
		ns := utils.NewNamespace(ctx, env.Admin)
		strict := utils.BusyboxPod(ns, "strict", isolationNode, "sleep", "3600")
		strict.Spec.SecurityContext = &corev1.PodSecurityContext{
			RunAsUser: ptr.To[int64](1000), SupplementalGroups: []int64{4000},
			SupplementalGroupsPolicy: ptr.To(corev1.SupplementalGroupsPolicyStrict),
		}
		merge := utils.BusyboxPod(ns, "merge", isolationNode, "sleep", "3600")
		merge.Spec.SecurityContext = &corev1.PodSecurityContext{
			RunAsUser: ptr.To[int64](1000), SupplementalGroups: []int64{4000},
			SupplementalGroupsPolicy: ptr.To(corev1.SupplementalGroupsPolicyMerge),
		}
		Expect(env.Admin.Create(ctx, strict)).To(Succeed())
		Expect(env.Admin.Create(ctx, merge)).To(Succeed())
		const msg = "SupplementalGroupsPolicy=Strict is not supported in this node"
		utils.WaitForPod(ctx, env.Admin, ns, "strict", isolationTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(p.Status.Reason).To(Equal("SupplementalGroupsPolicyNotSupported"))
			g.Expect(p.Status.Message).To(Equal("Pod was rejected: " + msg))
			g.Expect(eventFor(ctx, g, ns, "strict", "SupplementalGroupsPolicyNotSupported")).To(Equal(msg))
		})
		expectReady(ctx, ns, "merge")
		// Nothing of the refused pod reached the runtime.
		rs, _ := newCRIClients(ctx)
		sandboxes, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
			LabelSelector: map[string]string{"io.kubernetes.pod.namespace": ns}})
		Expect(err).NotTo(HaveOccurred())
		names := make([]string, 0, len(sandboxes))
		for _, s := range sandboxes {
			names = append(names, s.GetMetadata().GetName())
		}
		Expect(strings.Join(names, ",")).To(Equal("merge"))
	})

	It("runs a pod with supplementalGroupsPolicy: Strict on a runtime with it, and reports the container's user", func(ctx SpecContext) {
		if !utils.IsContainerd2() {
			Skip("containerd 1.6 has no supplemental_groups_policy runtime feature: the previous spec checks the refusal")
		}
		ns := utils.NewNamespace(ctx, env.Admin)
		for _, policy := range []corev1.SupplementalGroupsPolicy{corev1.SupplementalGroupsPolicyStrict, corev1.SupplementalGroupsPolicyMerge} {
			name := strings.ToLower(string(policy))
			pod := utils.BusyboxPod(ns, name, isolationNode, "sleep", "3600")
			pod.Spec.SecurityContext = &corev1.PodSecurityContext{
				RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](3000), SupplementalGroups: []int64{4000},
				SupplementalGroupsPolicy: ptr.To(policy),
			}
			Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		}
		for _, name := range []string{"strict", "merge"} {
			ready := expectReady(ctx, ns, name)
			user := ready.Status.ContainerStatuses[0].User
			Expect(user).NotTo(BeNil(), "pod %s: containerStatuses[0].user", name)
			Expect(user.Linux).NotTo(BeNil())
			Expect(user.Linux.UID).To(BeEquivalentTo(1000))
			Expect(user.Linux.GID).To(BeEquivalentTo(3000))
			Expect(user.Linux.SupplementalGroups).To(ContainElement(int64(4000)))
			By("the reported groups are the process's (" + name + ")")
			groups := map[int64]bool{}
			for _, f := range strings.Fields(execIn(ctx, ready, "id", "-G")) {
				g, err := strconv.ParseInt(f, 10, 64)
				Expect(err).NotTo(HaveOccurred())
				groups[g] = true
			}
			reported := map[int64]bool{user.Linux.GID: true}
			for _, g := range user.Linux.SupplementalGroups {
				reported[g] = true
			}
			Expect(groups).To(Equal(reported))
		}
	})
})

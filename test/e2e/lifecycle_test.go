package e2e

import (
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// lifecycleNode is the node the lifecycle specs' nodelet runs.
	lifecycleNode = "e2e-lifecycle"
	// postStartRestartTimeout covers a failed hook, the kill and the first
	// restart after the crash-loop back-off.
	postStartRestartTimeout = 90 * time.Second
	// deadlineTimeout covers a 5 s active deadline, a 5 s grace period and
	// the sidecar stopping after the main container.
	deadlineTimeout = 45 * time.Second
)

var _ = Describe("Lifecycle hooks and deadlines", Ordered, func() {
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: lifecycleNode, API: apiServer, Containerd: ctrd}
	})

	// eventFor reports whether the pod has an Event of reason whose message
	// contains msg.
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
	// stopsSlowly is a shell command that runs until SIGTERM and then takes
	// about two seconds to exit.
	stopsSlowly := []string{"sh", "-c", "trap 'sleep 2; exit 0' TERM; while true; do sleep 1; done"}

	It("restarts a container whose postStart hook fails, with a FailedPostStartHook Event", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "hook-fails", lifecycleNode, "sleep", "3600")
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{
			Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "exit 1"}},
		}}
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(eventFor(ctx, g, ns, "hook-fails", "FailedPostStartHook", "PostStartHook failed")).To(BeTrue(), "a FailedPostStartHook Event")
			g.Expect(eventFor(ctx, g, ns, "hook-fails", "Killing", "FailedPostStartHook")).To(BeTrue(), "a Killing Event")
			p := utils.GetPod(ctx, env.Admin, ns, "hook-fails")(g)
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			cs := p.Status.ContainerStatuses[0]
			g.Expect(cs.RestartCount).To(BeNumerically(">=", 1))
			g.Expect(utils.PodReady(p)).To(BeFalse())
		}).WithTimeout(postStartRestartTimeout).WithPolling(pollInterval).Should(Succeed())
	})

	It("runs a postStart hook before the pod is Ready", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "hook-works", lifecycleNode, "sleep", "3600")
		c := &pod.Spec.Containers[0]
		c.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{
			Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "echo done > /tmp/poststart"}},
		}}
		c.ReadinessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/poststart"}}},
			PeriodSeconds: 1,
		}
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			p := utils.GetPod(ctx, env.Admin, ns, "hook-works")(g)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(utils.PodReady(p)).To(BeTrue())
			g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeZero())
		}).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(Succeed())
	})

	It("fails a pod past its activeDeadlineSeconds with DeadlineExceeded", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "deadline", lifecycleNode, stopsSlowly...)
		pod.Spec.ActiveDeadlineSeconds = ptr.To[int64](5)
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			p := utils.GetPod(ctx, env.Admin, ns, "deadline")(g)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(p.Status.Reason).To(Equal("DeadlineExceeded"))
			g.Expect(p.Status.Message).To(Equal("Pod was active on the node longer than the specified deadline"))
			g.Expect(eventFor(ctx, g, ns, "deadline", "DeadlineExceeded", "longer than the specified deadline")).To(BeTrue())
		}).WithTimeout(deadlineTimeout).WithPolling(pollInterval).Should(Succeed())
		Consistently(func(g Gomega) {
			p := utils.GetPod(ctx, env.Admin, ns, "deadline")(g)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(p.Status.Reason).To(Equal("DeadlineExceeded"))
		}).WithTimeout(3 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	})

	It("stops a sidecar after the main container when the deadline passes", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "deadline-sidecar", lifecycleNode, stopsSlowly...)
		pod.Spec.ActiveDeadlineSeconds = ptr.To[int64](5)
		pod.Spec.InitContainers = []corev1.Container{{
			Name:            "sidecar",
			Image:           utils.BusyboxImage,
			ImagePullPolicy: corev1.PullIfNotPresent,
			RestartPolicy:   ptr.To(corev1.ContainerRestartPolicyAlways),
			Command:         []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"},
		}}
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		var p *corev1.Pod
		Eventually(func(g Gomega) {
			p = utils.GetPod(ctx, env.Admin, ns, "deadline-sidecar")(g)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(p.Status.Reason).To(Equal("DeadlineExceeded"))
			g.Expect(p.Status.InitContainerStatuses).To(HaveLen(1))
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(p.Status.InitContainerStatuses[0].State.Terminated).NotTo(BeNil())
			g.Expect(p.Status.ContainerStatuses[0].State.Terminated).NotTo(BeNil())
		}).WithTimeout(deadlineTimeout).WithPolling(pollInterval).Should(Succeed())
		main := p.Status.ContainerStatuses[0].State.Terminated.FinishedAt.Time
		sidecar := p.Status.InitContainerStatuses[0].State.Terminated.FinishedAt.Time
		// The main container takes about 2 s to exit, the sidecar none: had
		// both been stopped at once, the sidecar would have finished first.
		Expect(sidecar).NotTo(BeTemporally("<", main), "sidecar finished %v, main %v", sidecar, main)
	})

	It("runs a pod with a 253-character name", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		name := strings.Repeat("a", 253)
		pod := utils.BusyboxPod(ns, name, lifecycleNode, "sleep", "3600")
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			p := utils.GetPod(ctx, env.Admin, ns, name)(g)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(utils.PodReady(p)).To(BeTrue())
		}).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(Succeed())

		entries, err := os.ReadDir(env.Nodelet.PodLogsDir)
		Expect(err).NotTo(HaveOccurred())
		var dirs []string
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ns+"_") {
				dirs = append(dirs, e.Name())
			}
		}
		Expect(dirs).To(HaveLen(1))
		Expect(dirs[0]).To(HaveLen(255), "the shortened log directory name")

		data, err := os.ReadFile(env.Nodelet.LogPath)
		Expect(err).NotTo(HaveOccurred())
		for _, line := range strings.Split(string(data), "\n") {
			Expect(line).NotTo(ContainSubstring("file name too long"))
			if strings.Contains(line, ns) {
				Expect(strings.ToLower(line)).NotTo(ContainSubstring("error"), "an error logged for the pod")
				// klog's error lines start with E and the date (E1125).
				Expect(line).NotTo(MatchRegexp(`^E\d{4} `), "an error logged for the pod")
			}
		}
	})
})

package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// probeNode is the node the probe specs' nodelet runs.
	probeNode = "e2e-probes"
	// livenessRestartTimeout covers two liveness kills with the 10 s
	// back-off before the second restart.
	livenessRestartTimeout = 90 * time.Second
)

var _ = Describe("Probes", Ordered, func() {
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: probeNode, API: apiServer, Containerd: ctrd}
	})

	execProbe := func(periodSeconds, failureThreshold int32, command ...string) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: command}},
			PeriodSeconds:    periodSeconds,
			FailureThreshold: failureThreshold,
		}
	}
	readyCondition := func(p *corev1.Pod) *corev1.PodCondition {
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == corev1.PodReady {
				return &p.Status.Conditions[i]
			}
		}
		return nil
	}

	It("makes a pod Ready when its exec readiness probe succeeds", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "ready", probeNode, "sleep", "3600")
		pod.Spec.Containers[0].ReadinessProbe = execProbe(1, 3, "true")
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			p := utils.GetPod(ctx, env.Admin, ns, "ready")(g)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(utils.PodReady(p)).To(BeTrue())
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(p.Status.ContainerStatuses[0].Ready).To(BeTrue())
		}).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(Succeed())
	})

	It("keeps a pod not Ready until its readiness probe passes", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "later", probeNode, "sh", "-c", "sleep 3; touch /tmp/ready; exec sleep 3600")
		pod.Spec.Containers[0].ReadinessProbe = execProbe(1, 3, "cat", "/tmp/ready")
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		sawRunningNotReady := false
		var p *corev1.Pod
		Eventually(func(g Gomega) {
			p = utils.GetPod(ctx, env.Admin, ns, "later")(g)
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			if p.Status.ContainerStatuses[0].State.Running != nil && !utils.PodReady(p) {
				sawRunningNotReady = true
			}
			g.Expect(utils.PodReady(p)).To(BeTrue())
		}).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(Succeed())
		Expect(sawRunningNotReady).To(BeTrue(), "the pod never showed running but not ready")
		started := p.Status.ContainerStatuses[0].State.Running.StartedAt.Time
		readyAt := readyCondition(p).LastTransitionTime.Time
		// Both are whole seconds; the file appears 3 s after the start.
		Expect(readyAt.Sub(started)).To(BeNumerically(">=", 3*time.Second), "started %v, ready %v", started, readyAt)
	})

	It("restarts a container whose liveness probe fails", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "unhealthy", probeNode, "sleep", "3600")
		pod.Spec.Containers[0].LivenessProbe = execProbe(1, 1, "false")
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			p := utils.GetPod(ctx, env.Admin, ns, "unhealthy")(g)
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeNumerically(">=", 2))
		}).WithTimeout(livenessRestartTimeout).WithPolling(pollInterval).Should(Succeed())
		Eventually(func(g Gomega) {
			var events corev1.EventList
			g.Expect(env.Admin.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
			var messages []string
			for _, e := range events.Items {
				if e.InvolvedObject.Name == "unhealthy" {
					messages = append(messages, e.Type+" "+e.Reason+": "+e.Message)
				}
			}
			g.Expect(messages).To(ContainElement(HavePrefix("Warning Unhealthy: Liveness probe failed")))
			g.Expect(messages).To(ContainElement(MatchRegexp(`^Normal Killing: .*Container main failed liveness probe`)))
		}).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())
	}, SpecTimeout(livenessRestartTimeout+apiTimeout))
})

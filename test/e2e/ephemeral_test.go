package e2e

import (
	"bytes"
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// ephemeralNode is the node the ephemeral container specs' nodelet runs.
	ephemeralNode = "e2e-ephemeral"
	// notRestartedFor is how long an exited ephemeral container is watched
	// for a restart: past the first crash-loop back-off (10 s) a regular
	// container would have had.
	notRestartedFor = 13 * time.Second
)

var _ = Describe("Ephemeral containers", Ordered, func() {
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: ephemeralNode, API: apiServer, Containerd: ctrd}
	})

	// addEphemeral adds ec to the pod through the pods/ephemeralcontainers
	// subresource, as kubectl debug does.
	addEphemeral := func(ctx SpecContext, ns, name string, ec corev1.EphemeralContainer) {
		GinkgoHelper()
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p := &corev1.Pod{}
			if err := env.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
				return err
			}
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, ec)
			return env.Admin.SubResource("ephemeralcontainers").Update(ctx, p)
		})).To(Succeed())
	}
	ephemeralStatus := func(p *corev1.Pod, name string) *corev1.ContainerStatus {
		for i := range p.Status.EphemeralContainerStatuses {
			if p.Status.EphemeralContainerStatuses[i].Name == name {
				return &p.Status.EphemeralContainerStatuses[i]
			}
		}
		return nil
	}
	// kubectl runs kubectl as the admin and returns its stdout.
	kubectl := func(ctx context.Context, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, kubectlTimeout)
		defer cancel()
		cmd, err := apiServer.Kubectl(ctx, args...)
		if err != nil {
			return "", err
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return stdout.String(), fmt.Errorf("kubectl %v: %w: %s", args, err, stderr.String())
		}
		return stdout.String(), nil
	}
	running := func(ctx SpecContext, ns, name string) *corev1.Pod {
		GinkgoHelper()
		return utils.WaitForPod(ctx, env.Admin, ns, name, podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(utils.PodReady(p)).To(BeTrue())
		})
	}

	It("runs an ephemeral container once in its target's process namespace, serves its log and exec, and adopts it after a restart", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		Expect(env.Admin.Create(ctx, utils.BusyboxPod(ns, "debugged", ephemeralNode, "sleep", "3600"))).To(Succeed())
		before := running(ctx, ns, "debugged")

		By("adding a debugger that targets the main container")
		addEphemeral(ctx, ns, "debugged", corev1.EphemeralContainer{
			EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name:            "debugger",
				Image:           utils.BusyboxImage,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"sh", "-c", "while true; do echo polo; sleep 1; done"},
				Stdin:           true,
				TTY:             true,
			},
			TargetContainerName: "main",
		})
		p := utils.WaitForPod(ctx, env.Admin, ns, "debugged", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			cs := ephemeralStatus(p, "debugger")
			g.Expect(cs).NotTo(BeNil())
			g.Expect(cs.State.Running).NotTo(BeNil(), "state %+v", cs.State)
			g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
		})
		debugger := *ephemeralStatus(p, "debugger")
		Expect(p.Generation).To(BeEquivalentTo(2))
		Expect(debugger.ContainerID).To(HavePrefix("containerd://"))
		Expect(debugger.ImageID).NotTo(BeEmpty())
		Expect(debugger.Image).To(Equal(utils.BusyboxImage))
		Expect(debugger.RestartCount).To(BeZero())
		Expect(debugger.Ready).To(BeFalse())
		Expect(utils.PodReady(p)).To(BeTrue(), "the pod's readiness does not change")
		Expect(p.Status.ContainerStatuses[0].ContainerID).To(Equal(before.Status.ContainerStatuses[0].ContainerID))

		By("execing into it through the node API: it sees the target's processes")
		Eventually(func() (string, error) {
			return kubectl(ctx, "exec", "-n", ns, "debugged", "-c", "debugger", "--", "cat", "/proc/1/cmdline")
		}).WithTimeout(apiTimeout).WithPolling(time.Second).Should(Equal("sleep\x003600\x00"))
		Expect(kubectl(ctx, "exec", "-n", ns, "debugged", "-c", "debugger", "--", "echo", "marco")).To(Equal("marco\n"))

		By("reading its log through the node API")
		Eventually(func() (string, error) {
			return kubectl(ctx, "logs", "-n", ns, "debugged", "-c", "debugger")
		}).WithTimeout(apiTimeout).WithPolling(time.Second).Should(ContainSubstring("polo"))

		By("adopting it after nodelet is killed: no restart and no status write")
		p = utils.GetPod(ctx, env.Admin, ns, "debugged")(Default)
		Expect(env.Nodelet.Kill()).To(Succeed())
		Expect(env.Nodelet.Restart(ctx)).To(Succeed())
		Consistently(func(g Gomega) {
			now := utils.GetPod(ctx, env.Admin, ns, "debugged")(g)
			g.Expect(now.ResourceVersion).To(Equal(p.ResourceVersion), "the pod was written")
			g.Expect(ephemeralStatus(now, "debugger").ContainerID).To(Equal(debugger.ContainerID))
		}).WithTimeout(8 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		rs, _ := newCRIClients(ctx)
		instances := func(name string) []*runtimeapi.Container {
			GinkgoHelper()
			list, err := rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{
				"io.kubernetes.pod.uid": string(p.UID), "io.kubernetes.container.name": name,
			}})
			Expect(err).NotTo(HaveOccurred())
			return list
		}
		Expect(instances("debugger")).To(HaveLen(1))
		Expect(instances("debugger")[0].State).To(Equal(runtimeapi.ContainerState_CONTAINER_RUNNING))

		By("never restarting one that exits")
		addEphemeral(ctx, ns, "debugged", corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name:            "oneshot",
			Image:           utils.BusyboxImage,
			ImagePullPolicy: corev1.PullIfNotPresent,
			Command:         []string{"sh", "-c", "echo done; exit 3"},
		}})
		p = utils.WaitForPod(ctx, env.Admin, ns, "debugged", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			cs := ephemeralStatus(p, "oneshot")
			g.Expect(cs).NotTo(BeNil())
			g.Expect(cs.State.Terminated).NotTo(BeNil(), "state %+v", cs.State)
		})
		oneshot := *ephemeralStatus(p, "oneshot")
		Expect(oneshot.State.Terminated.ExitCode).To(BeEquivalentTo(3))
		Expect(oneshot.State.Terminated.Reason).To(Equal("Error"))
		Expect(kubectl(ctx, "logs", "-n", ns, "debugged", "-c", "oneshot")).To(Equal("done\n"))
		Consistently(func(g Gomega) {
			now := utils.GetPod(ctx, env.Admin, ns, "debugged")(g)
			cs := ephemeralStatus(now, "oneshot")
			g.Expect(cs.State.Terminated).NotTo(BeNil())
			g.Expect(cs.ContainerID).To(Equal(oneshot.ContainerID))
			g.Expect(cs.RestartCount).To(BeZero())
			g.Expect(now.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(utils.PodReady(now)).To(BeTrue())
			g.Expect(ephemeralStatus(now, "debugger").State.Running).NotTo(BeNil())
		}).WithTimeout(notRestartedFor).WithPolling(time.Second).Should(Succeed())
		Expect(instances("oneshot")).To(HaveLen(1))

		By("stopping it with the pod")
		Expect(env.Admin.Delete(ctx, p)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(env.Admin.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}))
		}).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(BeTrue())
		Expect(instances("debugger")).To(BeEmpty())
		Expect(instances("oneshot")).To(BeEmpty())
	}, SpecTimeout(4*podStartTimeout+notRestartedFor))

	It("shows an ephemeral container's image pull failure and leaves the pod Ready", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		Expect(env.Admin.Create(ctx, utils.BusyboxPod(ns, "pullfail", ephemeralNode, "sleep", "3600"))).To(Succeed())
		running(ctx, ns, "pullfail")
		addEphemeral(ctx, ns, "pullfail", corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name:            "broken",
			Image:           "127.0.0.1:1/missing:1",
			ImagePullPolicy: corev1.PullIfNotPresent,
		}})
		utils.WaitForPod(ctx, env.Admin, ns, "pullfail", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			cs := ephemeralStatus(p, "broken")
			g.Expect(cs).NotTo(BeNil())
			g.Expect(cs.State.Waiting).NotTo(BeNil())
			g.Expect(cs.State.Waiting.Reason).To(Equal("ImagePullBackOff"))
			g.Expect(cs.State.Waiting.Message).To(HavePrefix(`Back-off pulling image "127.0.0.1:1/missing:1"`))
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(utils.PodReady(p)).To(BeTrue())
		})
		Eventually(func(g Gomega) {
			var events corev1.EventList
			g.Expect(env.Admin.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
			var failed []string
			for _, e := range events.Items {
				if e.InvolvedObject.FieldPath == "spec.ephemeralContainers{broken}" && e.Reason == "Failed" {
					failed = append(failed, e.Message)
				}
			}
			g.Expect(failed).To(ContainElement(HavePrefix(`Failed to pull image "127.0.0.1:1/missing:1"`)))
		}).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())
	})
})

package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// terminationNode is the node the termination specs' nodelet runs.
	terminationNode = "e2e-termination"
	// pullStartTimeout bounds nodelet starting a pull of a new pod's image.
	pullStartTimeout = 30 * time.Second
	// lastStateWatch is how long a restarted container's lastState must
	// stay reported.
	lastStateWatch = 65 * time.Second
)

// hangingRegistry accepts connections on loopback and never answers: a
// pull from it never completes.
type hangingRegistry struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startHangingRegistry() *hangingRegistry {
	GinkgoHelper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	h := &hangingRegistry{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.conns = append(h.conns, c)
			h.mu.Unlock()
		}
	}()
	// Plain HTTP, so the pull waits for a response that never comes
	// rather than failing a TLS handshake.
	Expect(ctrd.AddInsecureRegistry(h.host())).To(Succeed())
	DeferCleanup(h.close)
	return h
}

func (h *hangingRegistry) host() string { return h.l.Addr().String() }

func (h *hangingRegistry) image(name string) string { return h.host() + "/" + name + ":1" }

func (h *hangingRegistry) close() {
	_ = h.l.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		_ = c.Close()
	}
}

var _ = Describe("Pod termination", Ordered, func() {
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: terminationNode, API: apiServer, Containerd: ctrd}
	})
	var hang *hangingRegistry
	BeforeAll(func() { hang = startHangingRegistry() })

	waitFor := func(ctx SpecContext, ns, name string, timeout time.Duration, check func(Gomega, *corev1.Pod)) *corev1.Pod {
		GinkgoHelper()
		return utils.WaitForPod(ctx, env.Admin, ns, name, timeout, check)
	}
	gone := func(ctx SpecContext, ns, name string) func() bool {
		return func() bool {
			err := env.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{})
			return apierrors.IsNotFound(err)
		}
	}
	pulling := func(ctx SpecContext, ns, name string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			var events corev1.EventList
			g.Expect(env.Admin.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
			found := false
			for _, e := range events.Items {
				found = found || (e.InvolvedObject.Name == name && e.Reason == "Pulling")
			}
			g.Expect(found).To(BeTrue(), "a Pulling event for %s", name)
		}).WithTimeout(pullStartTimeout).WithPolling(pollInterval).Should(Succeed())
	}
	containersOf := func(ctx SpecContext, uid string) []*runtimeapi.Container {
		GinkgoHelper()
		rs, _ := newCRIClients(ctx)
		list, err := rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{kubetypes.KubernetesPodUIDLabel: uid}})
		Expect(err).NotTo(HaveOccurred())
		return list
	}

	It("cancels a pull that never completes when the pod is deleted, and starts nothing", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "stuck", terminationNode, "sleep", "3600")
		pod.Spec.Containers[0].Image = hang.image("never")
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		pulling(ctx, ns, "stuck")

		deleted := time.Now()
		Expect(env.Admin.Delete(ctx, pod)).To(Succeed())
		grace := time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
		Eventually(gone(ctx, ns, "stuck")).WithTimeout(grace + 5*time.Second).WithPolling(pollInterval).Should(BeTrue())
		GinkgoWriter.Printf("deleted during a hanging pull: gone after %v\n", time.Since(deleted))
		Expect(containersOf(ctx, string(pod.UID))).To(BeEmpty(), "no container of the deleted pod was created")
	})

	It("writes a terminal status before deleting a pod that has a finalizer, and removes it once the finalizer goes", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "held", terminationNode, "sleep", "3600")
		pod.Finalizers = []string{"e2e.nodelet.io/hold"}
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		waitFor(ctx, ns, "held", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(utils.PodReady(p)).To(BeTrue())
		})

		Expect(env.Admin.Delete(ctx, pod)).To(Succeed())
		terminal := func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(BeElementOf(corev1.PodFailed, corev1.PodSucceeded))
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
					g.Expect(c.Status).To(Equal(corev1.ConditionFalse), "condition %s", c.Type)
				}
			}
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(p.Status.ContainerStatuses[0].State.Terminated).NotTo(BeNil())
			g.Expect(p.Status.ContainerStatuses[0].Ready).To(BeFalse())
		}
		waitFor(ctx, ns, "held", podStartTimeout, terminal)
		Consistently(func(g Gomega) {
			terminal(g, utils.GetPod(ctx, env.Admin, ns, "held")(g))
		}).WithTimeout(3 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

		p := utils.GetPod(ctx, env.Admin, ns, "held")(Default)
		orig := p.DeepCopy()
		p.Finalizers = nil
		Expect(env.Admin.Patch(ctx, p, client.MergeFrom(orig))).To(Succeed())
		Eventually(gone(ctx, ns, "held")).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(BeTrue())
	})

	It("releases the host port and everything else of a pod force-deleted while it waits for its image", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		withPort := func(name, image string) *corev1.Pod {
			p := utils.BusyboxPod(ns, name, terminationNode, "sleep", "3600")
			p.Spec.Containers[0].Image = image
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 18080}}
			p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
				PeriodSeconds: 1,
			}
			return p
		}
		old := withPort("old", hang.image("never-either"))
		Expect(env.Admin.Create(ctx, old)).To(Succeed())
		pulling(ctx, ns, "old")
		uid := string(old.UID)
		podDir := filepath.Join(env.Nodelet.RootDir, "pods", uid)
		Expect(podDir).To(BeADirectory(), "the pod's directory exists while it waits")

		Expect(env.Admin.Delete(ctx, old, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(gone(ctx, ns, "old")).WithTimeout(apiTimeout).Should(BeTrue())

		By("removing the old pod's directory, mounts and checkpoint")
		Eventually(func(g Gomega) {
			g.Expect(podDir).NotTo(BeAnExistingFile())
			g.Expect(filepath.Join(env.Nodelet.RootDir, "checkpoints", "pod-"+uid)).NotTo(BeAnExistingFile())
			mounts, err := os.ReadFile("/proc/self/mountinfo")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(mounts)).NotTo(ContainSubstring(uid))
			logs, err := os.ReadDir(env.Nodelet.PodLogsDir)
			if err == nil {
				for _, e := range logs {
					g.Expect(e.Name()).NotTo(HaveSuffix(uid))
				}
			}
		}).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(Succeed())

		By("running a new pod on the same host port")
		Expect(env.Admin.Create(ctx, withPort("new", utils.BusyboxImage))).To(Succeed())
		waitFor(ctx, ns, "new", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "reason %q: %s", p.Status.Reason, p.Status.Message)
			g.Expect(utils.PodReady(p)).To(BeTrue())
		})
		metrics, err := env.Nodelet.Metrics(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(metrics).NotTo(ContainSubstring(fmt.Sprintf("pod_uid=%q", uid)), "no probe of the old pod is counted any more")
	})

	It("keeps the last state of a restarted container", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		// Exits with 3 the first time, then runs: one restart.
		pod := utils.BusyboxPod(ns, "once", terminationNode, "sh", "-c",
			"if [ -e /data/ran ]; then exec sleep 3600; fi; touch /data/ran; exit 3")
		pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		hasLastState := func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			cs := p.Status.ContainerStatuses[0]
			g.Expect(cs.RestartCount).To(BeEquivalentTo(1))
			g.Expect(cs.State.Running).NotTo(BeNil())
			g.Expect(cs.LastTerminationState.Terminated).NotTo(BeNil(), "lastState.terminated")
			g.Expect(cs.LastTerminationState.Terminated.ExitCode).To(BeEquivalentTo(3))
		}
		waitFor(ctx, ns, "once", crashLoopTimeout, hasLastState)
		Consistently(func(g Gomega) {
			hasLastState(g, utils.GetPod(ctx, env.Admin, ns, "once")(g))
		}).WithTimeout(lastStateWatch).WithPolling(2 * time.Second).Should(Succeed())
	})

	It("starts, restarts and deletes a pod promptly while 16 pods wait on pulls that never complete", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		for i := range 16 {
			p := utils.BusyboxPod(ns, fmt.Sprintf("waits-%d", i), terminationNode, "sleep", "3600")
			p.Spec.Containers[0].Image = hang.image(fmt.Sprintf("never-%d", i))
			Expect(env.Admin.Create(ctx, p)).To(Succeed())
		}
		pulling(ctx, ns, "waits-0")

		start := time.Now()
		pod := utils.BusyboxPod(ns, "busy", terminationNode, "sh", "-c", "sleep 1; exit 1")
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		waitFor(ctx, ns, "busy", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeNumerically(">=", 1))
		})
		restarted := time.Since(start)
		// Started, ran 1 s, exited, and restarted after the 10 s back-off.
		Expect(restarted).To(BeNumerically("<", 30*time.Second))

		start = time.Now()
		Expect(env.Admin.Delete(ctx, pod)).To(Succeed())
		Eventually(gone(ctx, ns, "busy")).WithTimeout(15 * time.Second).WithPolling(pollInterval).Should(BeTrue())
		GinkgoWriter.Printf("beside 16 hanging pulls: restarted after %v, gone %v after its delete\n", restarted, time.Since(start))
		for i := range 16 {
			p := utils.GetPod(ctx, env.Admin, ns, fmt.Sprintf("waits-%d", i))(Default)
			Expect(env.Admin.Delete(ctx, p, client.GracePeriodSeconds(0))).To(Succeed())
		}
	})

	It("never lets a stale update of a deleted pod's name start anything", func(ctx SpecContext) {
		// A pod and a namesake with another UID: only the newer runs.
		ns := utils.NewNamespace(ctx, env.Admin)
		first := utils.BusyboxPod(ns, "twin", terminationNode, "sleep", "3600")
		first.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		Expect(env.Admin.Create(ctx, first)).To(Succeed())
		waitFor(ctx, ns, "twin", podStartTimeout, func(g Gomega, p *corev1.Pod) { g.Expect(utils.PodReady(p)).To(BeTrue()) })
		Expect(env.Admin.Delete(ctx, first, client.GracePeriodSeconds(0))).To(Succeed())
		second := utils.BusyboxPod(ns, "twin", terminationNode, "sleep", "3600")
		Eventually(func() error { return env.Admin.Create(ctx, second) }).WithTimeout(apiTimeout).Should(Succeed())
		waitFor(ctx, ns, "twin", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.UID).To(Equal(second.UID))
			g.Expect(utils.PodReady(p)).To(BeTrue())
		})
		Eventually(func() []*runtimeapi.Container {
			var live []*runtimeapi.Container
			for _, c := range containersOf(ctx, string(first.UID)) {
				if c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
					live = append(live, c)
				}
			}
			return live
		}).WithTimeout(apiTimeout).Should(BeEmpty(), "the first pod's containers are stopped")
	})
})

package e2e

import (
	"os"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/internal/shutdown/logindtest"
	"github.com/nodelet/nodelet/test/utils"
)

// The node shutdown manager against a stand-in systemd-logind on a private
// bus, which nodelet reaches through DBUS_SYSTEM_BUS_ADDRESS: nothing of
// the machine's own D-Bus or logind is touched.
var _ = Describe("Graceful node shutdown", Ordered, func() {
	const (
		node = "e2e-shutdown"
		// regularPeriod and criticalPeriod are shutdownGracePeriod minus
		// shutdownGracePeriodCriticalPods, and the latter.
		regularPeriod  = 10 * time.Second
		criticalPeriod = 10 * time.Second
		// slack covers a status write and the seconds the API keeps.
		slack = 3 * time.Second
	)
	var logind *logindtest.Logind
	var busAddress string
	BeforeAll(func() {
		// A socket path must be short: not under GinkgoT().TempDir().
		dir, err := os.MkdirTemp("", "bus")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, dir)
		bus, err := logindtest.StartBus(dir)
		Expect(err).NotTo(HaveOccurred(), "starting a private dbus-daemon (hack/install-deps.sh installs it)")
		DeferCleanup(bus.Stop)
		busAddress = bus.Address
		// Long enough for the grace period: nodelet writes no logind
		// drop-in on this machine.
		logind, err = logindtest.StartLogind(bus.Address, logindtest.Options{InhibitDelayMax: time.Minute})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(logind.Close)
	})
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: node, API: apiServer, Containerd: ctrd,
			Env: []string{"DBUS_SYSTEM_BUS_ADDRESS=" + busAddress},
			Config: map[string]any{
				"shutdownGracePeriod":             (regularPeriod + criticalPeriod).String(),
				"shutdownGracePeriodCriticalPods": criticalPeriod.String(),
			}}
	})

	// stoppingPod runs until SIGTERM, then exits after delay seconds.
	stoppingPod := func(ns, name, class string, delay int) *corev1.Pod {
		p := utils.BusyboxPod(ns, name, node, "sh", "-c",
			"trap 'sleep "+strconv.Itoa(delay)+"; exit 0' TERM; while true; do sleep 1; done")
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
		p.Spec.PriorityClassName = class
		return p
	}
	// expectShutDown waits until the pod is Failed as the kubelet reports
	// a pod stopped for a node shutdown, and returns when its container
	// finished.
	expectShutDown := func(ctx SpecContext, ns, name string, timeout time.Duration) time.Time {
		GinkgoHelper()
		var finished time.Time
		utils.WaitForPod(ctx, env.Admin, ns, name, timeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(p.Status.Reason).To(Equal("Terminated"))
			g.Expect(p.Status.Message).To(Equal("Pod was terminated in response to imminent node shutdown."))
			g.Expect(p.Status.Conditions).To(ContainElement(And(
				HaveField("Type", corev1.DisruptionTarget),
				HaveField("Status", corev1.ConditionTrue),
				HaveField("Reason", "TerminationByKubelet"),
				HaveField("Message", "Pod was terminated in response to imminent node shutdown."))))
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			t := p.Status.ContainerStatuses[0].State.Terminated
			g.Expect(t).NotTo(BeNil())
			finished = t.FinishedAt.Time
		})
		return finished
	}
	nodeEvent := func(ctx SpecContext, g Gomega, reason, message string) bool {
		var events corev1.EventList
		g.Expect(env.Admin.List(ctx, &events)).To(Succeed())
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == node && e.Reason == reason && e.Message == message {
				return true
			}
		}
		return false
	}

	It("stops regular pods, then critical ones, before it lets the machine go down", func(ctx SpecContext) {
		By("waiting for nodelet's inhibitor lock")
		Eventually(func(g Gomega) {
			held := logind.Held()
			g.Expect(held).To(HaveLen(1))
			g.Expect(*held[0]).To(And(HaveField("What", "shutdown"), HaveField("Mode", "delay"), HaveField("Who", "nodelet")))
		}).WithContext(ctx).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())
		lock := logind.Held()[0]

		ns := utils.NewNamespace(ctx, env.Admin)
		high := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-high"}, Value: 1000}
		Expect(env.Admin.Create(ctx, high)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(env.Admin.Delete(ctx, high))).To(Succeed()) })
		// Both regular pods stop at once; the critical one takes 3s once
		// told, so that it still runs when they have stopped.
		Expect(env.Admin.Create(ctx, stoppingPod(ns, "low", "", 0))).To(Succeed())
		Expect(env.Admin.Create(ctx, stoppingPod(ns, "high", high.Name, 0))).To(Succeed())
		Expect(env.Admin.Create(ctx, stoppingPod(ns, "critical", "system-cluster-critical", 3))).To(Succeed())
		for _, name := range []string{"low", "high", "critical"} {
			expectRunning(ctx, env.Admin, ns, name)
		}
		Expect(utils.GetPod(ctx, env.Admin, ns, "critical")(Default).Spec.Priority).To(HaveValue(BeNumerically(">=", 2000000000)))

		By("announcing the shutdown")
		announced := time.Now().Truncate(time.Second)
		Expect(logind.PrepareForShutdown(true)).To(Succeed())

		By("seeing the regular pods stopped first, within their period")
		lowDone := expectShutDown(ctx, ns, "low", regularPeriod+slack)
		highDone := expectShutDown(ctx, ns, "high", regularPeriod+slack)
		critical := utils.GetPod(ctx, env.Admin, ns, "critical")(Default)
		Expect(critical.Status.Phase).To(Equal(corev1.PodRunning), "the critical pod runs while the regular ones have stopped")
		Expect(lock.ReleasedAt()).To(BeZero(), "the lock is held while pods run")
		Expect(lowDone).To(BeTemporally("<=", announced.Add(regularPeriod+slack)))
		Expect(highDone).To(BeTemporally("<=", announced.Add(regularPeriod+slack)))

		By("seeing the node NotReady, its Shutdown event, and a new pod rejected")
		Eventually(func(g Gomega) {
			ready := nodeCondition(ctx, g, env.Admin, node, corev1.NodeReady)
			g.Expect(ready.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(ready.Message).To(ContainSubstring("node is shutting down"))
			g.Expect(nodeEvent(ctx, g, "Shutdown", "Shutdown manager detected shutdown event")).To(BeTrue())
		}).WithContext(ctx).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())
		Expect(env.Admin.Create(ctx, stoppingPod(ns, "late", "system-node-critical", 0))).To(Succeed())
		utils.WaitForPod(ctx, env.Admin, ns, "late", apiTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(p.Status.Reason).To(Equal("NodeShutdown"))
			g.Expect(p.Status.Message).To(Equal("Pod was rejected: Pod was rejected as the node is shutting down."))
		})

		By("seeing the critical pod stopped after them, within the whole period")
		criticalDone := expectShutDown(ctx, ns, "critical", regularPeriod+criticalPeriod+slack)
		Expect(criticalDone).To(BeTemporally(">=", lowDone.Add(2*time.Second)))
		Expect(criticalDone).To(BeTemporally(">=", highDone.Add(2*time.Second)))
		Expect(criticalDone).To(BeTemporally("<=", announced.Add(regularPeriod+criticalPeriod+slack)))

		By("seeing the lock released once every pod has stopped")
		Eventually(lock.Released()).WithContext(ctx).WithTimeout(apiTimeout).Should(BeClosed())
		Expect(lock.ReleasedAt()).To(BeTemporally(">=", criticalDone))
		Expect(lock.ReleasedAt()).To(BeTemporally("<=", announced.Add(regularPeriod+criticalPeriod+slack)))
		Expect(env.Nodelet.Running()).To(BeTrue())

		By("cancelling the shutdown: the lock is taken again and pods run again")
		Expect(logind.PrepareForShutdown(false)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(logind.Held()).To(HaveLen(1))
			g.Expect(nodeCondition(ctx, g, env.Admin, node, corev1.NodeReady).Status).To(Equal(corev1.ConditionTrue))
			g.Expect(nodeEvent(ctx, g, "Shutdown", "Shutdown manager detected shutdown cancellation")).To(BeTrue())
		}).WithContext(ctx).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())
		Expect(env.Admin.Create(ctx, stoppingPod(ns, "after", "", 0))).To(Succeed())
		expectRunning(ctx, env.Admin, ns, "after")
	}, SpecTimeout(3*podStartTimeout+3*apiTimeout))
})

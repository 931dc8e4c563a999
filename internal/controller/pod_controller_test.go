package controller_test

import (
	"context"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fakeruntime "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/agent"
	"github.com/nodelet/nodelet/internal/checkpoint"
	"github.com/nodelet/nodelet/internal/controller"
	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/kuberuntime/status"
	"github.com/nodelet/nodelet/internal/metrics"
	"github.com/nodelet/nodelet/test/utils"
)

// fakePodTimeout bounds a pod reaching a state on the fake runtime, where
// every CRI call returns at once.
const fakePodTimeout = 20 * time.Second

// fakeRuntimeAgent is the pod reconciler of one node, as a node user under
// the Node authorizer, over the CRI fakes of k8s.io/cri-api.
type fakeRuntimeAgent struct {
	node    string
	rs      *fakeruntime.FakeRuntimeService
	rootDir string
}

func startFakeRuntimeAgent(maxPods int32) *fakeRuntimeAgent {
	GinkgoHelper()
	a := &fakeRuntimeAgent{node: nodeName(), rs: fakeruntime.NewFakeRuntimeService(), rootDir: GinkgoT().TempDir()}
	cfg := &v1alpha1.NodeletConfiguration{
		NodeName:   a.node,
		RootDir:    a.rootDir,
		PodLogsDir: filepath.Join(a.rootDir, "logs"),
		// Links beside the logs, never in the machine's /var/log/containers.
		ContainerLogLinksDir: ptr.To(filepath.Join(a.rootDir, "containers")),
		MaxPods:              maxPods,
		HealthzBindAddress:   "0",
		MetricsBindAddress:   "0",
		ResolvConf:           ptr.To(""),
		// No periodic relist or sync: every sync is caused by an event.
		RelistPeriod:  metav1.Duration{Duration: time.Hour},
		SyncFrequency: metav1.Duration{Duration: time.Hour},
		// A fake runtime runs no process: no cgroups are made on the machine.
		CgroupsPerQOS: ptr.To(false),
		// The eviction manager measures this machine's disks and memory,
		// which these specs are not about: a disk under the kubelet's 15%
		// imagefs default must not evict their pods.
		EvictionHard: map[string]string{
			"memory.available":  "1Mi",
			"nodefs.available":  "1%",
			"imagefs.available": "1%",
		},
	}
	v1alpha1.SetDefaults(cfg)
	Expect(v1alpha1.Validate(cfg)).To(BeEmpty())
	rt, err := cri.New(a.rs, fakeruntime.NewFakeImageService(), cri.Options{NodeName: a.node})
	Expect(err).NotTo(HaveOccurred())
	store, err := checkpoint.NewFileStore(filepath.Join(a.rootDir, "checkpoints"))
	Expect(err).NotTo(HaveOccurred())
	mgr, err := agent.NewManager(nodeConfig(a.node), cfg)
	Expect(err).NotTo(HaveOccurred())
	Expect(controller.Default.Setup(mgr, &controller.Deps{Config: cfg, Runtime: rt, Checkpoints: store}, []string{"pod"})).To(Succeed())
	runManager(mgr)
	return a
}

func (a *fakeRuntimeAgent) calls(name string) int {
	n := 0
	for _, c := range a.rs.GetCalls() {
		if c == name {
			n++
		}
	}
	return n
}

func (a *fakeRuntimeAgent) sandboxes() int {
	list, err := a.rs.ListPodSandbox(context.Background(), nil)
	Expect(err).NotTo(HaveOccurred())
	return len(list)
}

var _ = Describe("Pod reconciler on the CRI fakes", func() {
	getPod := func(ctx context.Context, ns, name string) func(Gomega) *corev1.Pod {
		return utils.GetPod(ctx, admin, ns, name)
	}
	newNS := func(ctx context.Context) string {
		GinkgoHelper()
		ns := "fake-" + nodeName()
		Expect(utils.CreateNamespace(ctx, admin, ns)).To(Succeed())
		return ns
	}

	It("runs a pod, rejects one over maxPods, and does not sync again on its own status write", func(ctx SpecContext) {
		a := startFakeRuntimeAgent(1)
		ns := newNS(ctx)
		Expect(admin.Create(ctx, utils.BusyboxPod(ns, "first", a.node, "sleep", "3600"))).To(Succeed())
		Eventually(func(g Gomega) {
			p := getPod(ctx, ns, "first")(g)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(utils.PodReady(p)).To(BeTrue())
		}).WithTimeout(fakePodTimeout).Should(Succeed())

		By("leaving the pod alone once its status is written")
		// Every sync observes the sandbox; the echo of the status patch
		// must not cause one.
		// The syncs of the pod's start (its events and status writes) may
		// still be landing when it reads Ready: wait for a quiet second
		// first. A sync loop on the echo never gets one.
		var settled int
		Eventually(func() bool {
			before := a.calls("PodSandboxStatus")
			time.Sleep(time.Second)
			settled = a.calls("PodSandboxStatus")
			return settled > 0 && settled == before
		}).WithTimeout(fakePodTimeout).Should(BeTrue())
		Consistently(func() int { return a.calls("PodSandboxStatus") }).WithTimeout(2 * time.Second).Should(Equal(settled))

		By("rejecting a second pod with OutOfpods")
		Expect(admin.Create(ctx, utils.BusyboxPod(ns, "second", a.node, "sleep", "3600"))).To(Succeed())
		Eventually(func(g Gomega) {
			p := getPod(ctx, ns, "second")(g)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(p.Status.Reason).To(Equal("OutOfpods"))
		}).WithTimeout(fakePodTimeout).Should(Succeed())
		Expect(a.sandboxes()).To(Equal(1), "the rejected pod got no sandbox")
	})

	It("deletes a deleted pod from the API server once it stopped, and frees its slot", func(ctx SpecContext) {
		a := startFakeRuntimeAgent(1)
		ns := newNS(ctx)
		pod := utils.BusyboxPod(ns, "going", a.node, "sleep", "3600")
		Expect(admin.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) { g.Expect(utils.PodReady(getPod(ctx, ns, "going")(g))).To(BeTrue()) }).
			WithTimeout(fakePodTimeout).Should(Succeed())
		writes := checkpointWrites()
		Expect(admin.Delete(ctx, pod)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}))
		}).WithTimeout(fakePodTimeout).Should(BeTrue())
		// The API delete and the removal of the pod's checkpoint are two
		// steps of its tear-down; the first one may be seen first.
		Eventually(a.sandboxes).WithTimeout(fakePodTimeout).Should(BeZero())
		Eventually(func() string { return filepath.Join(a.rootDir, "checkpoints", "pod-"+string(pod.UID)) }).
			WithTimeout(fakePodTimeout).ShouldNot(BeAnExistingFile())
		// One write, the termination's start; the update the final delete
		// causes and the pod's disappearance remove nothing again.
		Consistently(func() uint64 { return checkpointWrites() - writes }).WithTimeout(2 * time.Second).Should(BeNumerically("==", 1))

		By("admitting a new pod in the freed slot")
		Expect(admin.Create(ctx, utils.BusyboxPod(ns, "next", a.node, "sleep", "3600"))).To(Succeed())
		Eventually(func(g Gomega) { g.Expect(utils.PodReady(getPod(ctx, ns, "next")(g))).To(BeTrue()) }).
			WithTimeout(fakePodTimeout).Should(Succeed())
	})

	It("writes a status patch that the API server refuses for another pod of the same name", func(ctx SpecContext) {
		ns := newNS(ctx)
		pod := utils.BusyboxPod(ns, "renamed", "no-such-node", "sleep", "3600")
		Expect(admin.Create(ctx, pod)).To(Succeed())
		running := corev1.PodStatus{Phase: corev1.PodRunning}
		patch, err := status.Patch(pod.UID+"-gone", pod.Status, running)
		Expect(err).NotTo(HaveOccurred())
		err = admin.Status().Patch(ctx, pod.DeepCopy(), client.RawPatch(types.StrategicMergePatchType, patch))
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "a patch naming another UID: %v", err)
		Expect(err.Error()).To(ContainSubstring("metadata.uid"))
		Expect(getPod(ctx, ns, "renamed")(Default).Status.Phase).To(Equal(corev1.PodPending))

		patch, err = status.Patch(pod.UID, pod.Status, running)
		Expect(err).NotTo(HaveOccurred())
		Expect(admin.Status().Patch(ctx, pod.DeepCopy(), client.RawPatch(types.StrategicMergePatchType, patch))).To(Succeed())
		Expect(getPod(ctx, ns, "renamed")(Default).Status.Phase).To(Equal(corev1.PodRunning))
	})

	It("removes everything of a pod force-deleted from the API server", func(ctx SpecContext) {
		a := startFakeRuntimeAgent(110)
		ns := newNS(ctx)
		pod := utils.BusyboxPod(ns, "forced", a.node, "sleep", "3600")
		Expect(admin.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) { g.Expect(utils.PodReady(getPod(ctx, ns, "forced")(g))).To(BeTrue()) }).
			WithTimeout(fakePodTimeout).Should(Succeed())
		Expect(a.sandboxes()).To(Equal(1))
		Expect(admin.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(a.sandboxes).WithTimeout(fakePodTimeout).Should(BeZero())
		Eventually(func(g Gomega) {
			g.Expect(filepath.Join(a.rootDir, "checkpoints", "pod-"+string(pod.UID))).NotTo(BeAnExistingFile())
			g.Expect(filepath.Join(a.rootDir, "pods", string(pod.UID))).NotTo(BeAnExistingFile())
		}).WithTimeout(fakePodTimeout).Should(Succeed())
	})
})

// checkpointWrites is the number of durable checkpoint writes so far, of
// every agent of the suite.
func checkpointWrites() uint64 {
	GinkgoHelper()
	m := &dto.Metric{}
	Expect(metrics.CheckpointWriteDuration.Write(m)).To(Succeed())
	return m.GetHistogram().GetSampleCount()
}

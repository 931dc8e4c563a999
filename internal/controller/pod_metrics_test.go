package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	gm "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeruntime "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/metrics"
)

// startDurations returns how many pod start durations were observed and
// their sum, in seconds.
func startDurations(g gm.Gomega) (uint64, float64) {
	m := &dto.Metric{}
	g.Expect(metrics.PodStartDuration.Write(m)).To(gm.Succeed())
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// startObserved returns what observe added to the pod start durations:
// their number and sum.
func startObserved(g gm.Gomega, observe func()) (uint64, float64) {
	n0, s0 := startDurations(g)
	observe()
	n1, s1 := startDurations(g)
	return n1 - n0, s1 - s0
}

func podWithStatus(uid types.UID, phase corev1.PodPhase, states ...corev1.ContainerState) (*corev1.Pod, corev1.PodStatus) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: string(uid), Namespace: "ns", UID: uid}}
	status := corev1.PodStatus{Phase: phase}
	for i, s := range states {
		status.ContainerStatuses = append(status.ContainerStatuses, corev1.ContainerStatus{Name: string(rune('a' + i)), State: s})
	}
	return pod, status
}

var (
	runningState = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	waitingState = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	exitedState  = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
)

func newTestPodMetrics() *podMetrics {
	return &podMetrics{firstSeen: map[types.UID]time.Time{}, started: map[types.UID]bool{}}
}

func TestPodMetricsStartDurationIsFromFirstSeenToEveryContainerRunning(t *testing.T) {
	g := gm.NewWithT(t)
	m := newTestPodMetrics()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m.seen("a", t0)
	m.seen("a", t0.Add(time.Second)) // every sync sees it again

	for _, tc := range []struct {
		name   string
		phase  corev1.PodPhase
		states []corev1.ContainerState
	}{
		{"pending", corev1.PodPending, []corev1.ContainerState{waitingState, waitingState}},
		{"pending with its containers running", corev1.PodPending, []corev1.ContainerState{runningState, runningState}},
		{"unknown with its containers running", corev1.PodUnknown, []corev1.ContainerState{runningState, runningState}},
		{"running, one container still waiting", corev1.PodRunning, []corev1.ContainerState{runningState, waitingState}},
		{"running, one container exited", corev1.PodRunning, []corev1.ContainerState{runningState, exitedState}},
		{"running without container statuses", corev1.PodRunning, nil},
		{"succeeded", corev1.PodSucceeded, []corev1.ContainerState{exitedState}},
	} {
		pod, status := podWithStatus("a", tc.phase, tc.states...)
		n, _ := startObserved(g, func() { m.observeStart(pod, status, t0.Add(2*time.Second)) })
		g.Expect(n).To(gm.BeZero(), tc.name)
	}
	g.Expect(m.firstSeen).To(gm.HaveKeyWithValue(types.UID("a"), t0), "still waiting to start")

	pod, status := podWithStatus("a", corev1.PodRunning, runningState, runningState)
	n, sum := startObserved(g, func() { m.observeStart(pod, status, t0.Add(3500*time.Millisecond)) })
	g.Expect(n).To(gm.BeEquivalentTo(1))
	g.Expect(sum).To(gm.BeNumerically("~", 3.5, 1e-9), "from the first time it was seen")
	g.Expect(m.firstSeen).To(gm.BeEmpty())
	g.Expect(m.started).To(gm.HaveKeyWithValue(types.UID("a"), true))

	// Once per pod: later syncs, a restart of its containers, and seeing it
	// again do not observe it again.
	n, _ = startObserved(g, func() {
		m.observeStart(pod, status, t0.Add(10*time.Second))
		m.seen("a", t0.Add(11*time.Second))
		m.observeStart(pod, status, t0.Add(12*time.Second))
	})
	g.Expect(n).To(gm.BeZero())
	g.Expect(m.firstSeen).To(gm.BeEmpty(), "a started pod is not tracked again")
}

func TestPodMetricsStartIsNotObservedForAPodNotSeenStarting(t *testing.T) {
	g := gm.NewWithT(t)
	m := newTestPodMetrics()
	// Running already when first synced, e.g. after nodelet restarted: the
	// time it took is unknown.
	pod, status := podWithStatus("b", corev1.PodRunning, runningState)
	n, _ := startObserved(g, func() { m.observeStart(pod, status, time.Now()) })
	g.Expect(n).To(gm.BeZero())
	g.Expect(m.started).To(gm.BeEmpty())
}

func TestPodMetricsPodsAreTrackedApart(t *testing.T) {
	g := gm.NewWithT(t)
	m := newTestPodMetrics()
	t0 := time.Unix(1000, 0)
	m.seen("a", t0)
	m.seen("b", t0.Add(time.Second))
	a, aStatus := podWithStatus("a", corev1.PodRunning, runningState)
	b, bStatus := podWithStatus("b", corev1.PodRunning, runningState)
	n, sum := startObserved(g, func() {
		m.observeStart(b, bStatus, t0.Add(5*time.Second))
		m.observeStart(a, aStatus, t0.Add(6*time.Second))
	})
	g.Expect(n).To(gm.BeEquivalentTo(2))
	g.Expect(sum).To(gm.BeNumerically("~", 4+6, 1e-9))
}

func TestPodMetricsForgetDropsEverythingKept(t *testing.T) {
	g := gm.NewWithT(t)
	m := newTestPodMetrics()
	t0 := time.Unix(1000, 0)
	m.seen("started", t0)
	pod, status := podWithStatus("started", corev1.PodRunning, runningState)
	m.observeStart(pod, status, t0.Add(time.Second))
	m.seen("waiting", t0)

	m.forget("started")
	m.forget("waiting")
	m.forget("never-seen")
	g.Expect(m.firstSeen).To(gm.BeEmpty())
	g.Expect(m.started).To(gm.BeEmpty())

	// Forgotten, a pod is tracked anew.
	m.seen("started", t0.Add(time.Minute))
	n, sum := startObserved(g, func() { m.observeStart(pod, status, t0.Add(time.Minute+2*time.Second)) })
	g.Expect(n).To(gm.BeEquivalentTo(1))
	g.Expect(sum).To(gm.BeNumerically("~", 2, 1e-9))
}

// stateFixture is a node's pods in a fake cache and its containers in the
// CRI fake, with objects of another node in the same runtime.
type stateFixture struct {
	rs     *fakeruntime.FakeRuntimeService
	rt     *cri.Client
	reader client.Reader
	// listErr makes the reader fail.
	listErr error
}

const metricsNode = "node-m"

func newStateFixture(t *testing.T, pods ...client.Object) *stateFixture {
	t.Helper()
	ctx := context.Background()
	f := &stateFixture{rs: fakeruntime.NewFakeRuntimeService()}
	rt, err := cri.New(f.rs, fakeruntime.NewFakeImageService(), cri.Options{NodeName: metricsNode})
	if err != nil {
		t.Fatal(err)
	}
	f.rt = rt
	f.reader = fakeclient.NewClientBuilder().WithObjects(pods...).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if f.listErr != nil {
				return f.listErr
			}
			return c.List(ctx, list, opts...)
		},
	}).Build()

	sandbox := func(uid string) string {
		id, err := rt.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: uid, Namespace: "ns", Uid: uid}}, "")
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	container := func(sb, name string, state runtimeapi.ContainerState) {
		id, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: "busybox"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		f.rs.Lock()
		f.rs.Containers[id].State = state
		f.rs.Unlock()
	}
	// Two ready sandboxes and a stopped one.
	a, b, stopped := sandbox("a"), sandbox("b"), sandbox("stopped")
	if err := rt.StopPodSandbox(ctx, stopped); err != nil {
		t.Fatal(err)
	}
	container(a, "created", runtimeapi.ContainerState_CONTAINER_CREATED)
	container(a, "running1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	container(b, "running2", runtimeapi.ContainerState_CONTAINER_RUNNING)
	container(b, "running3", runtimeapi.ContainerState_CONTAINER_RUNNING)
	container(stopped, "exited", runtimeapi.ContainerState_CONTAINER_EXITED)
	container(stopped, "lost", runtimeapi.ContainerState_CONTAINER_UNKNOWN)

	// Another node's ready sandbox and running container in the same
	// runtime, which are not counted.
	other, err := f.rs.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "other", Namespace: "ns", Uid: "other"},
		Labels:   cri.OwnerLabels("node-other")}, "")
	if err != nil {
		t.Fatal(err)
	}
	id, err := f.rs.CreateContainer(ctx, other, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "other"}, Image: &runtimeapi.ImageSpec{Image: "busybox"},
		Labels: cri.OwnerLabels("node-other")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.rs.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	return f
}

func statePod(name string, phase corev1.PodPhase, priority *int32, conds ...corev1.PodCondition) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)},
		Spec:       corev1.PodSpec{NodeName: metricsNode, Priority: priority},
		Status:     corev1.PodStatus{Phase: phase, Conditions: conds},
	}
}

func resizeCondition(t corev1.PodConditionType, status corev1.ConditionStatus, reason string) corev1.PodCondition {
	return corev1.PodCondition{Type: t, Status: status, Reason: reason}
}

func TestPodMetricsReadState(t *testing.T) {
	g := gm.NewWithT(t)
	f := newStateFixture(t,
		statePod("pending", corev1.PodPending, nil),
		statePod("running", corev1.PodRunning, nil),
		statePod("deferred", corev1.PodRunning, nil,
			resizeCondition(corev1.PodResizePending, corev1.ConditionTrue, "Deferred")),
		statePod("deferred-critical", corev1.PodRunning, ptr.To[int32](2000001000),
			resizeCondition(corev1.PodResizePending, corev1.ConditionTrue, "Deferred")),
		statePod("infeasible-low", corev1.PodRunning, ptr.To[int32](-5),
			resizeCondition(corev1.PodResizePending, corev1.ConditionTrue, "Infeasible")),
		statePod("resizing", corev1.PodRunning, nil,
			resizeCondition(corev1.PodResizeInProgress, corev1.ConditionTrue, "")),
		statePod("resizing-and-deferred", corev1.PodRunning, ptr.To[int32](0),
			resizeCondition(corev1.PodResizeInProgress, corev1.ConditionTrue, ""),
			resizeCondition(corev1.PodResizePending, corev1.ConditionTrue, "Deferred")),
		statePod("no-longer-resizing", corev1.PodRunning, nil,
			resizeCondition(corev1.PodResizeInProgress, corev1.ConditionFalse, ""),
			resizeCondition(corev1.PodResizePending, corev1.ConditionFalse, "Deferred")),
		statePod("done", corev1.PodSucceeded, nil),
	)

	s := readState(context.Background(), f.reader, f.rt)
	g.Expect(s.PodsByPhase).To(gm.Equal(map[string]int{"Pending": 1, "Running": 7, "Succeeded": 1, "Failed": 0}))
	g.Expect(s.RunningPods).To(gm.Equal(ptr.To(2)), "the ready sandboxes of this node")
	g.Expect(s.ContainersByState).To(gm.Equal(map[string]int{"created": 1, "running": 3, "exited": 1, "unknown": 1}))
	g.Expect(s.PendingResizes).To(gm.Equal(map[metrics.PendingResize]int{
		{Reason: "deferred", PriorityBucket: "normal"}:          2,
		{Reason: "deferred", PriorityBucket: "system-critical"}: 1,
		{Reason: "infeasible", PriorityBucket: "low"}:           1,
	}))
	g.Expect(s.InProgressResizes).To(gm.Equal(ptr.To(2)))
}

func TestPodMetricsReadStateOfAnEmptyNode(t *testing.T) {
	g := gm.NewWithT(t)
	rs := fakeruntime.NewFakeRuntimeService()
	rt, err := cri.New(rs, fakeruntime.NewFakeImageService(), cri.Options{NodeName: metricsNode})
	g.Expect(err).NotTo(gm.HaveOccurred())
	s := readState(context.Background(), fakeclient.NewClientBuilder().Build(), rt)
	// Zeros, not missing series: the phases and states are all reported.
	g.Expect(s.PodsByPhase).To(gm.Equal(map[string]int{"Pending": 0, "Running": 0, "Succeeded": 0, "Failed": 0}))
	g.Expect(s.RunningPods).To(gm.Equal(ptr.To(0)))
	g.Expect(s.ContainersByState).To(gm.Equal(map[string]int{"created": 0, "running": 0, "exited": 0, "unknown": 0}))
	g.Expect(s.PendingResizes).To(gm.BeEmpty())
	g.Expect(s.PendingResizes).NotTo(gm.BeNil())
	g.Expect(s.InProgressResizes).To(gm.Equal(ptr.To(0)))
}

func TestPodMetricsReadStateLeavesOutWhatCannotBeRead(t *testing.T) {
	g := gm.NewWithT(t)
	ctx := context.Background()
	f := newStateFixture(t, statePod("running", corev1.PodRunning, nil))

	f.listErr = errors.New("cache not synced")
	s := readState(ctx, f.reader, f.rt)
	g.Expect(s.PodsByPhase).To(gm.BeNil())
	g.Expect(s.PendingResizes).To(gm.BeNil())
	g.Expect(s.InProgressResizes).To(gm.BeNil())
	g.Expect(s.RunningPods).To(gm.Equal(ptr.To(2)), "the runtime still is")
	g.Expect(s.ContainersByState).NotTo(gm.BeNil())

	f.listErr = nil
	f.rs.InjectError("ListPodSandbox", errors.New("runtime down"))
	f.rs.InjectError("ListContainers", errors.New("runtime down"))
	s = readState(ctx, f.reader, f.rt)
	g.Expect(s.RunningPods).To(gm.BeNil())
	g.Expect(s.ContainersByState).To(gm.BeNil())
	g.Expect(s.PodsByPhase).To(gm.HaveKeyWithValue("Running", 1), "the cache still is")
}

func TestPodMetricsNewPodMetricsReportsTheNodeOnScrapes(t *testing.T) {
	g := gm.NewWithT(t)
	f := newStateFixture(t, statePod("running", corev1.PodRunning, nil), statePod("pending", corev1.PodPending, nil))
	m := newPodMetrics(f.reader, f.rt)
	t.Cleanup(func() { metrics.SetStateSource(nil) })
	g.Expect(m.firstSeen).NotTo(gm.BeNil())
	g.Expect(m.started).NotTo(gm.BeNil())

	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(gm.HaveOccurred())
	got := map[string]float64{}
	for _, fam := range families {
		for _, metric := range fam.GetMetric() {
			key := fam.GetName()
			for _, l := range metric.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			got[key] = metric.GetGauge().GetValue()
		}
	}
	g.Expect(got).To(gm.HaveKeyWithValue("kubelet_running_pods", 2.0))
	g.Expect(got).To(gm.HaveKeyWithValue("kubelet_running_containers container_state=running", 3.0))
	g.Expect(got).To(gm.HaveKeyWithValue("kubelet_running_containers container_state=unknown", 1.0))
	g.Expect(got).To(gm.HaveKeyWithValue("nodelet_pods phase=Running", 1.0))
	g.Expect(got).To(gm.HaveKeyWithValue("nodelet_pods phase=Pending", 1.0))
	g.Expect(got).To(gm.HaveKeyWithValue("nodelet_pods phase=Failed", 0.0))
	g.Expect(got).To(gm.HaveKeyWithValue("kubelet_pod_in_progress_resizes", 0.0))
}

// Start times kept for pods that went without a worker (deleted while
// nodelet was down, say) are noted for housekeeping, which forgets them.
func TestHousekeepingForgetsPodMetrics(t *testing.T) {
	g := gm.NewWithT(t)
	r := &PodReconciler{Metrics: newTestPodMetrics()}
	t0 := time.Unix(1000, 0)
	r.Metrics.seen("waiting", t0)
	r.Metrics.seen("started", t0)
	pod, status := podWithStatus("started", corev1.PodRunning, runningState)
	r.Metrics.observeStart(pod, status, t0.Add(time.Second))
	r.written.Store(types.UID("written"), true)

	g.Expect(r.notedUIDs()).To(gm.ConsistOf(types.UID("waiting"), types.UID("started"), types.UID("written")))
	for _, uid := range r.notedUIDs() {
		r.forget(uid)
	}
	g.Expect(r.notedUIDs()).To(gm.BeEmpty())
	g.Expect(r.Metrics.firstSeen).To(gm.BeEmpty())
	g.Expect(r.Metrics.started).To(gm.BeEmpty())
}

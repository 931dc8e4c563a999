package executor

import (
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeruntime "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
	"github.com/nodelet/nodelet/internal/kuberuntime/planner"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/nodeinfo"
)

const fakeNode = "node-a"

// noVolumes is a VolumeManager for pods without volumes.
type noVolumes struct{}

func (noVolumes) SetUp(context.Context, *v1.Pod) error                 { return nil }
func (noVolumes) Refresh(context.Context, *v1.Pod) error               { return nil }
func (noVolumes) Update(context.Context, *v1.Pod, []string) error      { return nil }
func (noVolumes) WriteEtcHosts(*v1.Pod, []string) error                { return nil }
func (noVolumes) TearDown(context.Context, types.UID) error            { return nil }
func (noVolumes) NextRefresh(types.UID) (time.Time, bool)              { return time.Time{}, false }
func (noVolumes) TerminationMessagePath(*v1.Pod, string, int32) string { return "" }
func (noVolumes) Mounts(*v1.Pod, *v1.Container, int32, []criconfig.EnvVar) ([]*runtimeapi.Mount, error) {
	return nil, nil
}

// presentImages finds every image present.
type presentImages struct{}

func (presentImages) EnsureImage(_ context.Context, _ *v1.Pod, c *v1.Container, _ []*v1.Secret, _ *runtimeapi.PodSandboxConfig) (string, error) {
	return c.Image, nil
}

func newFakeExecutor(t *testing.T) (*Executor, *fakeruntime.FakeRuntimeService) {
	t.Helper()
	rs := fakeruntime.NewFakeRuntimeService()
	rt, err := cri.New(rs, fakeruntime.NewFakeImageService(), cri.Options{NodeName: fakeNode})
	if err != nil {
		t.Fatal(err)
	}
	return &Executor{
		Runtime:     rt,
		Images:      presentImages{},
		ImageReason: func(err error) (string, string) { return state.ReasonErrImagePull, err.Error() },
		Volumes:     noVolumes{},
		Recorder:    record.NewFakeRecorder(100),
		Sandbox:     criconfig.SandboxOptions{PodLogsDir: t.TempDir(), ExtraLabels: cri.OwnerLabels(fakeNode)},
		Node:        func(context.Context) (nodeinfo.Facts, error) { return nodeinfo.Facts{}, nil },
		ServiceEnv:  func(context.Context, *v1.Pod) (map[string]string, error) { return nil, nil },
	}, rs
}

func fakePod(containers ...string) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-1"}}
	pod.Spec.RestartPolicy = v1.RestartPolicyAlways
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	for _, c := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: c, Image: "busybox:1"})
	}
	return pod
}

// runPod starts pod through its first plan and returns its observed runtime.
func runPod(t *testing.T, ctx context.Context, e *Executor, pod *v1.Pod, st *state.PodState) state.PodRuntime {
	t.Helper()
	g := NewWithT(t)
	a := planner.ComputePodActions(pod, state.PodRuntime{}, *st, planner.Inputs{Now: time.Now()})
	g.Expect(e.Sync(ctx, pod, state.PodRuntime{}, st, a, func() error { return nil })).To(Succeed())
	obs, err := e.Observe(ctx, pod)
	g.Expect(err).NotTo(HaveOccurred())
	return obs.Runtime
}

func TestSyncStartsThePlanAndTerminateStopsEverything(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e, rs := newFakeExecutor(t)
	pod := fakePod("app", "web")
	st := state.NewPodState(pod.UID)
	rt := runPod(t, ctx, e, pod, &st)
	g.Expect(rt.Sandboxes).To(HaveLen(1))
	g.Expect(rt.Containers).To(HaveLen(2))
	for _, c := range rt.Containers {
		g.Expect(c.State).To(Equal(state.ContainerRunning))
	}

	st.BeginTermination(1, time.Now())
	for range 3 {
		done, _, err := e.Terminate(ctx, pod, rt, &st, func() error { return nil })
		g.Expect(err).NotTo(HaveOccurred())
		if done {
			break
		}
		obs, err := e.Observe(ctx, pod)
		g.Expect(err).NotTo(HaveOccurred())
		rt = obs.Runtime
	}
	g.Expect(rt.Containers).To(HaveEach(HaveField("State", state.ContainerExited)))
	g.Expect(rt.Sandboxes).To(HaveEach(HaveField("Ready", false)))
	g.Expect(rs.GetCalls()).To(ContainElement("StopPodSandbox"))

	g.Expect(e.RemovePod(ctx, pod, rt)).To(Succeed())
	sandboxes, err := rs.ListPodSandbox(ctx, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sandboxes).To(BeEmpty())
}

func TestSidecarsStopAfterTheMainContainers(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e, rs := newFakeExecutor(t)
	pod := fakePod("app")
	pod.Spec.InitContainers = []v1.Container{{Name: "proxy", Image: "busybox:1", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)}}
	st := state.NewPodState(pod.UID)
	// The sidecar first, then (once it runs) the app.
	for range 3 {
		obs, err := e.Observe(ctx, pod)
		g.Expect(err).NotTo(HaveOccurred())
		a := planner.ComputePodActions(pod, obs.Runtime, st, planner.Inputs{Now: time.Now()})
		g.Expect(e.Sync(ctx, pod, obs.Runtime, &st, a, func() error { return nil })).To(Succeed())
	}
	obs, err := e.Observe(ctx, pod)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(obs.Runtime.Containers).To(HaveLen(2))

	st.BeginTermination(30, time.Now())
	done, requeue, err := e.Terminate(ctx, pod, obs.Runtime, &st, func() error { return nil })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(done).To(BeFalse())
	g.Expect(requeue).To(BeZero(), "the main container stopped: no waiting")
	obs, err = e.Observe(ctx, pod)
	g.Expect(err).NotTo(HaveOccurred())
	states := map[string]state.ContainerState{}
	for _, c := range obs.Runtime.Containers {
		states[c.Name] = c.State
	}
	g.Expect(states).To(Equal(map[string]state.ContainerState{
		"app": state.ContainerExited, "proxy": state.ContainerRunning,
	}), "the sidecar waits for the main container")
	_, _, err = e.Terminate(ctx, pod, obs.Runtime, &st, func() error { return nil })
	g.Expect(err).NotTo(HaveOccurred())
	stops := 0
	for _, c := range rs.GetCalls() {
		if c == "StopContainer" {
			stops++
		}
	}
	g.Expect(stops).To(Equal(2))
}

func TestACancelledSyncStartsNothing(t *testing.T) {
	g := NewWithT(t)
	e, rs := newFakeExecutor(t)
	pod := fakePod("app")
	st := state.NewPodState(pod.UID)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a := planner.ComputePodActions(pod, state.PodRuntime{}, st, planner.Inputs{Now: time.Now()})
	g.Expect(e.Sync(ctx, pod, state.PodRuntime{}, &st, a, func() error { return nil })).NotTo(Succeed())
	g.Expect(slices.Contains(rs.GetCalls(), "StartContainer")).To(BeFalse())
	g.Expect(st.Containers["app"].Waiting).To(BeNil(), "a cancellation is not the container's failure")
}

func TestEphemeralContainersRunOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e, rs := newFakeExecutor(t)
	pod := fakePod("app")
	st := state.NewPodState(pod.UID)
	rt := runPod(t, ctx, e, pod, &st)

	ephemeral := func(name, target string) v1.EphemeralContainer {
		return v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: name, Image: "busybox:1"}, TargetContainerName: target}
	}
	pod.Spec.EphemeralContainers = []v1.EphemeralContainer{ephemeral("debugger", "app"), ephemeral("lost", "missing")}
	sync := func() plan.PodActions {
		a := planner.ComputePodActions(pod, rt, st, planner.Inputs{Now: time.Now()})
		g.Expect(e.Sync(ctx, pod, rt, &st, a, func() error { return nil })).To(Succeed())
		obs, err := e.Observe(ctx, pod)
		g.Expect(err).NotTo(HaveOccurred())
		rt = obs.Runtime
		return a
	}
	g.Expect(sync().EphemeralContainersToStart).To(HaveLen(2))
	names := map[string]state.ContainerState{}
	var debuggerID string
	for _, c := range rt.Containers {
		names[c.Name] = c.State
		if c.Name == "debugger" {
			debuggerID = c.ID
			g.Expect(c.Attempt).To(BeZero())
		}
	}
	g.Expect(names).To(Equal(map[string]state.ContainerState{"app": state.ContainerRunning, "debugger": state.ContainerRunning}))
	g.Expect(st.Containers["lost"].Waiting).To(HaveField("Reason", state.ReasonCreateContainerConfigError))
	g.Expect(st.Containers["lost"].Waiting).To(HaveField("Message", "unable to find target container missing"))

	// Only the one that never existed is tried again.
	a := sync()
	g.Expect(a.EphemeralContainersToStart).To(HaveLen(1))
	g.Expect(a.EphemeralContainersToStart[0].Name).To(Equal("lost"))

	// One that exited is never restarted.
	g.Expect(rs.StopContainer(ctx, debuggerID, 0)).To(Succeed())
	obs, err := e.Observe(ctx, pod)
	g.Expect(err).NotTo(HaveOccurred())
	rt = obs.Runtime
	for range 2 {
		a = sync()
		g.Expect(a.EphemeralContainersToStart).To(ConsistOf(HaveField("Name", "lost")))
	}
	creates := 0
	for _, c := range rs.GetCalls() {
		if c == "CreateContainer" {
			creates++
		}
	}
	g.Expect(creates).To(Equal(2), "app and debugger, each once")
}

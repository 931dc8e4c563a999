package executor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/nodeinfo"
)

const fakeNode = "node-a"

// noVolumes is a VolumeManager for pods without volumes.
type noVolumes struct{}

func (noVolumes) SetUp(context.Context, *v1.Pod) error                         { return nil }
func (noVolumes) Refresh(context.Context, *v1.Pod) error                       { return nil }
func (noVolumes) Update(context.Context, *v1.Pod, []string) error              { return nil }
func (noVolumes) WriteEtcHosts(*v1.Pod, []string) error                        { return nil }
func (noVolumes) TearDown(context.Context, types.UID) error                    { return nil }
func (noVolumes) NextRefresh(types.UID) (time.Time, bool)                      { return time.Time{}, false }
func (noVolumes) TerminationMessagePath(*v1.Pod, string, int32) string         { return "" }
func (noVolumes) Devices(*v1.Pod, *v1.Container) ([]*runtimeapi.Device, error) { return nil, nil }
func (noVolumes) Mounts(*v1.Pod, *v1.Container, int32, []criconfig.EnvVar, map[string]string) ([]*runtimeapi.Mount, error) {
	return nil, nil
}
func (noVolumes) OpenVolumeFile(_ *v1.Pod, volume, _ string) (*os.File, error) {
	return nil, fmt.Errorf("pod has no emptyDir volume %q", volume)
}

// presentImages finds every image present.
type presentImages struct{}

func (presentImages) EnsureImage(_ context.Context, _ *v1.Pod, c *v1.Container, _ []*v1.Secret, _ *runtimeapi.PodSandboxConfig) (string, *runtimeapi.Image, error) {
	return c.Image, nil, nil
}

func (presentImages) EnsureVolumeImage(_ context.Context, _ *v1.Pod, _ *v1.Container, vol *v1.ImageVolumeSource, _ []*v1.Secret, _ *runtimeapi.PodSandboxConfig) (string, error) {
	return "sha256:" + vol.Reference, nil
}

func newFakeExecutor(t *testing.T) (*Executor, *fakeruntime.FakeRuntimeService) {
	t.Helper()
	rs := fakeruntime.NewFakeRuntimeService()
	return newFakeExecutorOn(t, rs), rs
}

// newFakeExecutorOn is an executor on the fake runtime rs: a process of its
// own, as after a restart.
func newFakeExecutorOn(t *testing.T, rs *fakeruntime.FakeRuntimeService) *Executor {
	t.Helper()
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
	}
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

// startPlan is the plan of a pod's first start: a new sandbox, then its
// init and regular containers, as the planner lists them for the executor.
func startPlan(pod *v1.Pod) plan.PodActions {
	a := plan.PodActions{KillPod: true, CreateSandbox: true}
	for i, c := range pod.Spec.InitContainers {
		a.InitContainersToStart = append(a.InitContainersToStart, plan.ContainerStart{Name: c.Name, Index: i, Init: true, KillGracePeriodSeconds: 1})
	}
	for i, c := range pod.Spec.Containers {
		a.ContainersToStart = append(a.ContainersToStart, plan.ContainerStart{Name: c.Name, Index: i, KillGracePeriodSeconds: 1})
	}
	return a
}

func noSave() error { return nil }

// runPod starts pod with its first plan and returns its observed runtime.
func runPod(t *testing.T, ctx context.Context, e *Executor, pod *v1.Pod, st *state.PodState) state.PodRuntime {
	t.Helper()
	g := NewWithT(t)
	g.Expect(e.Start(ctx, pod, state.PodRuntime{}, st, startPlan(pod), noSave)).To(Succeed())
	obs, err := e.Observe(ctx, pod)
	g.Expect(err).NotTo(HaveOccurred())
	return obs.Runtime
}

// byName returns the state of each container of rt by name.
func byName(rt state.PodRuntime) map[string]state.ContainerState {
	out := map[string]state.ContainerState{}
	for _, c := range rt.Containers {
		out[c.Name] = c.State
	}
	return out
}

func idOf(rt state.PodRuntime, name string) string {
	if c := rt.Latest(name); c != nil {
		return c.ID
	}
	return ""
}

func count(calls []string, call string) int {
	n := 0
	for _, c := range calls {
		if c == call {
			n++
		}
	}
	return n
}

func TestStartRunsThePlanAndTerminateStopsEverything(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e, rs := newFakeExecutor(t)
	pod := fakePod("app", "web")
	st := state.NewPodState(pod.UID)
	rt := runPod(t, ctx, e, pod, &st)
	g.Expect(rt.Sandboxes).To(HaveLen(1))
	g.Expect(st.SandboxID).To(Equal(rt.Sandboxes[0].ID), "the sandbox is recorded")
	g.Expect(byName(rt)).To(Equal(map[string]state.ContainerState{"app": state.ContainerRunning, "web": state.ContainerRunning}))
	for _, name := range []string{"app", "web"} {
		g.Expect(st.Containers[name].Created).To(BeTrue(), "the start of %s is recorded", name)
	}

	st.BeginTermination(1, time.Now())
	stop := plan.TerminationPlan{Stop: []plan.ContainerStop{
		{ContainerID: idOf(rt, "app"), Name: "app", Timeout: 1}, {ContainerID: idOf(rt, "web"), Name: "web", Timeout: 1},
	}}
	g.Expect(e.Terminate(ctx, pod, rt, stop, &st, noSave)).To(Succeed())
	obs, err := e.Observe(ctx, pod)
	g.Expect(err).NotTo(HaveOccurred())
	rt = obs.Runtime
	g.Expect(rt.Containers).To(HaveEach(HaveField("State", state.ContainerExited)))
	g.Expect(rt.Sandboxes).To(HaveEach(HaveField("Ready", true)), "sandboxes stop only when the plan says so")

	g.Expect(e.Terminate(ctx, pod, rt, plan.TerminationPlan{StopSandboxes: []string{rt.Sandboxes[0].ID}}, &st, noSave)).To(Succeed())
	obs, err = e.Observe(ctx, pod)
	g.Expect(err).NotTo(HaveOccurred())
	rt = obs.Runtime
	g.Expect(rt.Sandboxes).To(HaveEach(HaveField("Ready", false)))
	g.Expect(count(rs.GetCalls(), "StopContainer")).To(Equal(2))

	g.Expect(e.RemovePod(ctx, pod, rt)).To(Succeed())
	sandboxes, err := rs.ListPodSandbox(ctx, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sandboxes).To(BeEmpty())
	g.Expect(count(rs.GetCalls(), "StopPodSandbox")).To(Equal(1), "the sandbox this process stopped is removed without a second stop")
}

// A sandbox is stopped before its removal unless this process stopped it
// and the runtime shows it stopped: one another agent stopped, or one this
// process saw die, is stopped again (for the runtime, that is where the
// pod's network goes).
func TestRemovePodStopsSandboxesItHasNotStopped(t *testing.T) {
	cases := []struct {
		name          string
		stopFirst     bool
		observedReady bool
		wantStops     int
	}{
		{name: "never stopped", wantStops: 1},
		{name: "stopped by this process", stopFirst: true, wantStops: 1},
		{name: "stopped, yet shown ready", stopFirst: true, observedReady: true, wantStops: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			e, rs := newFakeExecutor(t)
			pod := fakePod("app")
			st := state.NewPodState(pod.UID)
			rt := runPod(t, ctx, e, pod, &st)
			g.Expect(rt.Sandboxes).To(HaveLen(1))
			st.BeginTermination(1, time.Now())
			tp := plan.TerminationPlan{Stop: []plan.ContainerStop{{ContainerID: idOf(rt, "app"), Name: "app", Timeout: 1}}}
			if tc.stopFirst {
				tp.StopSandboxes = []string{rt.Sandboxes[0].ID}
			}
			g.Expect(e.Terminate(ctx, pod, rt, tp, &st, noSave)).To(Succeed())
			obs, err := e.Observe(ctx, pod)
			g.Expect(err).NotTo(HaveOccurred())
			rt = obs.Runtime
			if tc.observedReady {
				rt.Sandboxes[0].Ready = true
			}
			g.Expect(e.RemovePod(ctx, pod, rt)).To(Succeed())
			g.Expect(count(rs.GetCalls(), "StopPodSandbox")).To(Equal(tc.wantStops))
			g.Expect(count(rs.GetCalls(), "RemovePodSandbox")).To(Equal(1))
			_, left := e.stopped.Load(rt.Sandboxes[0].ID)
			g.Expect(left).To(BeFalse(), "a removed sandbox is forgotten")
		})
	}
}

func TestTerminateStopsWhatThePlanListsAfterItsHooks(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e, rs := newFakeExecutor(t)
	drain := &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"drain"}}}
	pod := fakePod("app")
	pod.Spec.InitContainers = []v1.Container{{Name: "proxy", Image: "busybox:1", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)}}
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: drain}
	st := state.NewPodState(pod.UID)
	rt := runPod(t, ctx, e, pod, &st)
	g.Expect(byName(rt)).To(Equal(map[string]state.ContainerState{"app": state.ContainerRunning, "proxy": state.ContainerRunning}))

	st.BeginTermination(30, time.Now())
	app := idOf(rt, "app")
	saves := 0
	save := func() error { saves++; return nil }
	step := plan.TerminationPlan{
		PreStop: []plan.PreStopHook{{ContainerID: app, Name: "app", Handler: drain, Timeout: 30}},
		Stop:    []plan.ContainerStop{{ContainerID: app, Name: "app", Timeout: 30}},
	}
	g.Expect(e.Terminate(ctx, pod, rt, step, &st, save)).To(Succeed())
	obs, err := e.Observe(ctx, pod)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(byName(obs.Runtime)).To(Equal(map[string]state.ContainerState{
		"app": state.ContainerExited, "proxy": state.ContainerRunning,
	}), "what the plan does not list keeps running")
	g.Expect(st.Terminating.PreStopDone).To(Equal([]string{app}), "the hook that ran is recorded")
	g.Expect(saves).To(Equal(1), "and saved")
	calls := rs.GetCalls()
	g.Expect(slices.Index(calls, "ExecSync")).To(BeNumerically("<", slices.Index(calls, "StopContainer")), "the hook runs before the stop")

	step = plan.TerminationPlan{Stop: []plan.ContainerStop{{ContainerID: idOf(obs.Runtime, "proxy"), Name: "proxy", Timeout: 30}}}
	g.Expect(e.Terminate(ctx, pod, obs.Runtime, step, &st, save)).To(Succeed())
	g.Expect(count(rs.GetCalls(), "StopContainer")).To(Equal(2))
	g.Expect(count(rs.GetCalls(), "ExecSync")).To(Equal(1), "no hook without the plan listing one")
	g.Expect(saves).To(Equal(1), "nothing new to save")

	// A container already gone is no error.
	g.Expect(e.Terminate(ctx, pod, obs.Runtime, plan.TerminationPlan{Stop: []plan.ContainerStop{{ContainerID: "gone", Name: "app"}}}, &st, save)).To(Succeed())

	// What the plan lists to remove is removed, and not stopped.
	stops := count(rs.GetCalls(), "StopContainer")
	step = plan.TerminationPlan{Remove: []string{idOf(obs.Runtime, "proxy"), "gone"}}
	g.Expect(step.StopsAnything()).To(BeTrue())
	g.Expect(e.Terminate(ctx, pod, obs.Runtime, step, &st, save)).To(Succeed())
	g.Expect(count(rs.GetCalls(), "StopContainer")).To(Equal(stops))
	obs, err = e.Observe(ctx, pod)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(byName(obs.Runtime)).NotTo(HaveKey("proxy"))
}

func TestACancelledStartStartsNothing(t *testing.T) {
	g := NewWithT(t)
	e, rs := newFakeExecutor(t)
	pod := fakePod("app")
	st := state.NewPodState(pod.UID)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g.Expect(e.Start(ctx, pod, state.PodRuntime{}, &st, startPlan(pod), noSave)).NotTo(Succeed())
	g.Expect(slices.Contains(rs.GetCalls(), "StartContainer")).To(BeFalse())
	g.Expect(st.Containers["app"].Waiting).To(BeNil(), "a cancellation is not the container's failure")
}

func TestStartWaitsForTheGate(t *testing.T) {
	g := NewWithT(t)
	e, rs := newFakeExecutor(t)
	e.Gate = NewStartGate(1)
	e.Gate.slow = time.Hour
	release := hold(t, e.Gate, "another pod")
	pod := fakePod("app")

	// Deleted while waiting: nothing is created and the state is clean.
	st := state.NewPodState(pod.UID)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() { errc <- e.Start(ctx, pod, state.PodRuntime{}, &st, startPlan(pod), noSave) }()
	waiting(t, e.Gate, 1)
	cancel()
	g.Expect(<-errc).To(MatchError(context.Canceled))
	g.Expect(rs.GetCalls()).NotTo(ContainElement("RunPodSandbox"))
	g.Expect(st.SandboxID).To(BeEmpty())
	g.Expect(st.SandboxFailure).To(BeNil(), "a cancellation is not the sandbox's failure")

	// Once the slot is free, the pod starts.
	st = state.NewPodState(pod.UID)
	errc2 := make(chan error)
	go func() { errc2 <- e.Start(context.Background(), pod, state.PodRuntime{}, &st, startPlan(pod), noSave) }()
	waiting(t, e.Gate, 1)
	release()
	g.Expect(<-errc2).To(Succeed())
	g.Expect(rs.GetCalls()).To(ContainElements("RunPodSandbox", "CreateContainer", "StartContainer"))
	g.Expect(e.Gate.free).To(Equal(1), "every slot is given back")

	// A removed pod loses its place.
	obs, err := e.Observe(context.Background(), pod)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e.Terminate(context.Background(), pod, obs.Runtime, plan.TerminationPlan{}, &st, noSave)).To(Succeed())
	g.Expect(e.RemovePod(context.Background(), pod, obs.Runtime)).To(Succeed())
	g.Expect(e.Gate.places).NotTo(HaveKey(pod.UID))
}

func TestStartDoesNothingForAPlanWithoutAStartStep(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e, rs := newFakeExecutor(t)
	pod := fakePod("app")
	st := state.NewPodState(pod.UID)
	for _, a := range []plan.PodActions{
		{Done: true},
		{KillPod: true, ContainersToStart: []plan.ContainerStart{{Name: "app"}}},
	} {
		g.Expect(e.Start(ctx, pod, state.PodRuntime{}, &st, a, noSave)).To(Succeed())
	}
	g.Expect(rs.GetCalls()).To(BeEmpty())
}

func TestStartOfEphemeralContainersAndRestarts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e, rs := newFakeExecutor(t)
	pod := fakePod("app")
	st := state.NewPodState(pod.UID)
	rt := runPod(t, ctx, e, pod, &st)
	sandbox, app := rt.Sandboxes[0].ID, idOf(rt, "app")

	ephemeral := func(name, target string) v1.EphemeralContainer {
		return v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: name, Image: "busybox:1"}, TargetContainerName: target}
	}
	pod.Spec.EphemeralContainers = []v1.EphemeralContainer{ephemeral("debugger", "app"), ephemeral("lost", "missing")}
	a := plan.PodActions{SandboxID: sandbox, EphemeralContainersToStart: []plan.ContainerStart{
		{Name: "debugger", Index: 0, Ephemeral: true, TargetID: app},
		{Name: "lost", Index: 1, Ephemeral: true},
	}}
	g.Expect(e.Start(ctx, pod, rt, &st, a, noSave)).To(Succeed())
	obs, err := e.Observe(ctx, pod)
	g.Expect(err).NotTo(HaveOccurred())
	rt = obs.Runtime
	g.Expect(byName(rt)).To(Equal(map[string]state.ContainerState{"app": state.ContainerRunning, "debugger": state.ContainerRunning}))
	g.Expect(rt.Latest("debugger").SandboxID).To(Equal(sandbox), "started in the plan's sandbox")
	g.Expect(st.Containers["lost"].Waiting).To(HaveField("Reason", state.ReasonCreateContainerConfigError))
	g.Expect(st.Containers["lost"].Waiting).To(HaveField("Message", "unable to find target container missing"))

	// A restart: the plan's kill first, then the start with its restart count.
	g.Expect(rs.StopContainer(ctx, app, 0)).To(Succeed())
	a = plan.PodActions{
		SandboxID:         sandbox,
		ContainersToKill:  map[string]plan.ContainerKill{idOf(rt, "debugger"): {Name: "debugger", Message: "Stopping container debugger", GracePeriodSeconds: 1}},
		ContainersToStart: []plan.ContainerStart{{Name: "app", RestartCount: 1, PrevFinishedAt: time.Now()}},
	}
	g.Expect(e.Start(ctx, pod, rt, &st, a, noSave)).To(Succeed())
	obs, err = e.Observe(ctx, pod)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(obs.Runtime.Latest("app")).To(HaveField("Attempt", uint32(1)))
	g.Expect(obs.Runtime.Latest("app")).To(HaveField("State", state.ContainerRunning))
	g.Expect(obs.Runtime.Latest("debugger")).To(HaveField("State", state.ContainerExited))
	g.Expect(st.Containers["app"].RestartCount).To(Equal(uint32(1)))
	g.Expect(st.Containers["app"].CrashBackOff.Delay).To(Equal(state.InitialBackOff), "a restart advances the crash-loop back-off")
	g.Expect(count(rs.GetCalls(), "CreateContainer")).To(Equal(3), "app twice and debugger once")
}

func TestCollectGarbageRemovesWhatThePlanLists(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e, rs := newFakeExecutor(t)
	pod := fakePod("app", "web")
	st := state.NewPodState(pod.UID)
	rt := runPod(t, ctx, e, pod, &st)
	g.Expect(rs.StopContainer(ctx, idOf(rt, "app"), 0)).To(Succeed())
	logFile := filepath.Join(t.TempDir(), "0.log")
	g.Expect(os.WriteFile(logFile, []byte("bye\n"), 0o600)).To(Succeed())
	dead := *rt.Latest("app")
	dead.LogPath = logFile
	gone := state.Container{ID: "gone", Name: "old", LogPath: filepath.Join(t.TempDir(), "missing.log")}
	// A second sandbox, and the first one dead.
	old := rt.Sandboxes[0].ID
	g.Expect(e.Start(ctx, pod, rt, &st, plan.PodActions{KillPod: true, CreateSandbox: true, Attempt: 1}, noSave)).To(Succeed())
	g.Expect(rs.StopPodSandbox(ctx, old)).To(Succeed())

	g.Expect(e.CollectGarbage(ctx, plan.Garbage{Containers: []state.Container{dead, gone}, Sandboxes: []string{old}})).To(Succeed())
	obs, err := e.Observe(ctx, pod)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(byName(obs.Runtime)).To(Equal(map[string]state.ContainerState{"web": state.ContainerRunning}), "only the listed container goes")
	g.Expect(obs.Runtime.Sandboxes).To(ConsistOf(HaveField("Attempt", uint32(1))), "only the listed sandbox goes")
	g.Expect(logFile).NotTo(BeAnExistingFile(), "with its log")
	g.Expect(e.CollectGarbage(ctx, plan.Garbage{})).To(Succeed())
}

func TestAPodsFirstStartIsSavedOncePerContainer(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		st    func(uid types.UID) state.PodState
		saves int
	}{
		// The first sandbox is recorded with the container's start: a
		// restart in between adopts it from its labels.
		{"first sandbox", state.NewPodState, 1},
		{"a sandbox again", func(uid types.UID) state.PodState {
			st := state.NewPodState(uid)
			st.RecordSandbox("old", 0)
			return st
		}, 2},
		{"after a failed sandbox", func(uid types.UID) state.PodState {
			st := state.NewPodState(uid)
			st.RecordSandboxFailure("no", time.Now())
			return st
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			e, _ := newFakeExecutor(t)
			pod := fakePod("app")
			st := tc.st(pod.UID)
			type snapshot struct {
				sandboxID string
				failure   *state.WaitingReason
				created   bool
			}
			var saved []snapshot
			save := func() error {
				saved = append(saved, snapshot{st.SandboxID, st.SandboxFailure, st.Containers["app"].Created})
				return nil
			}
			g.Expect(e.Start(ctx, pod, state.PodRuntime{}, &st, startPlan(pod), save)).To(Succeed())
			g.Expect(saved).To(HaveLen(tc.saves))
			last := saved[len(saved)-1]
			g.Expect(last.sandboxID).NotTo(BeEmpty())
			g.Expect(last.sandboxID).NotTo(Equal("old"))
			g.Expect(last.failure).To(BeNil())
			g.Expect(last.created).To(BeTrue(), "the last save has everything")
		})
	}
}

// statusImages finds every image present and hands over img as the status
// it read.
type statusImages struct{ img *runtimeapi.Image }

func (s statusImages) EnsureImage(_ context.Context, _ *v1.Pod, c *v1.Container, _ []*v1.Secret, _ *runtimeapi.PodSandboxConfig) (string, *runtimeapi.Image, error) {
	return c.Image, s.img, nil
}

func (statusImages) EnsureVolumeImage(_ context.Context, _ *v1.Pod, _ *v1.Container, vol *v1.ImageVolumeSource, _ []*v1.Secret, _ *runtimeapi.PodSandboxConfig) (string, error) {
	return vol.Reference, nil
}

// The image's user comes from the status the image manager read to decide
// on a pull; the executor asks the runtime only when it was handed none.
func TestTheImageUserComesFromTheStatusReadForThePull(t *testing.T) {
	for _, tc := range []struct {
		name            string
		handed          *runtimeapi.Image
		wantStatusCalls int
		wantStarted     bool
	}{
		{name: "a status with a non-root user handed over", handed: &runtimeapi.Image{Id: "busybox:1", Uid: &runtimeapi.Int64Value{Value: 1000}}, wantStarted: true},
		{name: "none handed over: the runtime's image runs as root", wantStatusCalls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			e, rs := newFakeExecutor(t)
			is := fakeruntime.NewFakeImageService()
			is.SetFakeImages([]string{"busybox:1"})
			rt, err := cri.New(rs, is, cri.Options{NodeName: fakeNode})
			g.Expect(err).NotTo(HaveOccurred())
			e.Runtime, e.Images = rt, statusImages{img: tc.handed}
			pod := fakePod("app")
			pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}
			st := state.NewPodState(pod.UID)

			g.Expect(e.Start(ctx, pod, state.PodRuntime{}, &st, startPlan(pod), noSave)).To(Succeed())

			g.Expect(count(is.Called, "ImageStatus")).To(Equal(tc.wantStatusCalls))
			if tc.wantStarted {
				g.Expect(count(rs.GetCalls(), "StartContainer")).To(Equal(1))
				return
			}
			g.Expect(st.Containers["app"].Waiting).To(HaveField("Message", ContainSubstring("image will run as root")))
			g.Expect(count(rs.GetCalls(), "CreateContainer")).To(Equal(0))
		})
	}
}

func TestReobserveSeesWhatObserveSeesWithoutListing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e, rs := newFakeExecutor(t)
	pod := fakePod("app", "web")
	st := state.NewPodState(pod.UID)
	before, err := e.Observe(ctx, pod)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e.Start(ctx, pod, before.Runtime, &st, startPlan(pod), noSave)).To(Succeed())

	n := len(rs.GetCalls())
	again, err := e.Reobserve(ctx, pod, before, &st)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rs.GetCalls()[n:]).To(ConsistOf("PodSandboxStatus", "ContainerStatus", "ContainerStatus"), "nothing is listed")
	listed, err := e.Observe(ctx, pod)
	g.Expect(err).NotTo(HaveOccurred())
	// The fake runtime lists containers in map order: compare by ID.
	byID := func(a, b state.Container) int { return strings.Compare(a.ID, b.ID) }
	slices.SortFunc(again.Runtime.Containers, byID)
	slices.SortFunc(listed.Runtime.Containers, byID)
	g.Expect(again.Runtime).To(Equal(listed.Runtime), "the sandbox and containers the start created, in their states")
	g.Expect(byName(again.Runtime)).To(Equal(map[string]state.ContainerState{"app": state.ContainerRunning, "web": state.ContainerRunning}))

	// A stopped container shows stopped; a removed one is left out.
	e.Runtime = notFoundRuntime{e.Runtime}
	g.Expect(rs.StopContainer(ctx, idOf(again.Runtime, "app"), 0)).To(Succeed())
	g.Expect(rs.StopContainer(ctx, idOf(again.Runtime, "web"), 0)).To(Succeed())
	g.Expect(rs.RemoveContainer(ctx, idOf(again.Runtime, "web"))).To(Succeed())
	after, err := e.Reobserve(ctx, pod, again, &st)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(byName(after.Runtime)).To(Equal(map[string]state.ContainerState{"app": state.ContainerExited}))
	g.Expect(after.Runtime.Sandboxes).To(HaveLen(1))
}

func TestReobserveListsWhenOtherPodsOfTheNameHaveObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e, rs := newFakeExecutor(t)
	old := fakePod("app")
	oldState := state.NewPodState(old.UID)
	runPod(t, ctx, e, old, &oldState)

	pod := fakePod("app")
	pod.UID = "uid-2"
	st := state.NewPodState(pod.UID)
	before, err := e.Observe(ctx, pod)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(before.StaleSandboxes).To(HaveLen(1))
	n := len(rs.GetCalls())
	again, err := e.Reobserve(ctx, pod, before, &st)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rs.GetCalls()[n:]).To(ContainElements("ListPodSandbox", "ListContainers"))
	g.Expect(again.StaleSandboxes).To(HaveLen(1), "the other pod's objects are found again")
}

// notFoundRuntime answers a status read of an object the fake runtime does
// not have as containerd does, with the gRPC NotFound code (the fake's
// error is a plain one).
type notFoundRuntime struct{ cri.Runtime }

func (r notFoundRuntime) ContainerStatus(ctx context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	st, err := r.Runtime.ContainerStatus(ctx, id)
	if err != nil && strings.Contains(err.Error(), "not found") {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	return st, err
}

func TestObserveListsContainersOnlyWhenASandboxIsListed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e, rs := newFakeExecutor(t)
	spendFirstLook(e)
	pod := fakePod("app")
	obs, err := e.Observe(ctx, pod)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(obs.Runtime.Empty()).To(BeTrue())
	g.Expect(rs.GetCalls()).To(Equal([]string{"ListPodSandbox"}), "no sandbox of the name, so no container of it")

	st := state.NewPodState(pod.UID)
	runPod(t, ctx, e, pod, &st)
	n := len(rs.GetCalls())
	obs, err = e.Observe(ctx, pod)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rs.GetCalls()[n:]).To(ContainElements("ListPodSandbox", "ListContainers"))
	g.Expect(byName(obs.Runtime)).To(Equal(map[string]state.ContainerState{"app": state.ContainerRunning}))
}

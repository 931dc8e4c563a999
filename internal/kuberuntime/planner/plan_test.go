package planner

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
	"github.com/nodelet/nodelet/internal/kuberuntime/podtest"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/kuberuntime/statetest"
	"github.com/nodelet/nodelet/internal/podspec"
)

func TestPodStateRecords(t *testing.T) {
	pod := podtest.NewPod(podtest.Inits("setup"))
	st := state.NewPodState(pod.UID)
	st.RecordSandbox("s1", 2)
	st.RecordStart("app", 0, time.Time{}, 0, podtest.At(0))
	st.RecordFailure("app", state.ReasonCreateContainerConfigError, `configmap "cfg" not found`, podtest.At(time.Second))
	if got := nextRestartCount(state.PodRuntime{}, st, "app"); got != 0 {
		t.Errorf("after a failure before creation the next restart count is %d, want 0", got)
	}
	if !st.StartFailed() {
		t.Error("StartFailed is false after a CreateContainerConfigError")
	}
	st.RecordStart("app", 0, time.Time{}, 0, podtest.At(2*time.Second))
	if st.StartFailed() {
		t.Error("StartFailed is still true after a start")
	}
	if got := nextRestartCount(state.PodRuntime{}, st, "app"); got != 1 {
		t.Errorf("after a start the next restart count is %d, want 1", got)
	}
	if st.Containers["app"].Waiting != nil {
		t.Error("a start clears the recorded failure")
	}
	st.Containers["gone"] = state.ContainerRecord{}
	st.Forget(pod)
	if _, ok := st.Containers["gone"]; ok {
		t.Error("Forget kept a container no longer in the spec")
	}
	st.RecordStatus(v1.PodStatus{Phase: v1.PodRunning})

	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var back state.PodState
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	if diff := cmp.Diff(st, back); diff != "" {
		t.Errorf("JSON round trip (-want +got):\n%s", diff)
	}
}

// planSummary is the part of PodActions a table compares.
type planSummary struct {
	KillPod, CreateSandbox bool
	Attempt                uint32
	Init, Start, Kill      []string
	Ephemeral              []string
	BackingOff             map[string]string
	Done                   bool
}

func summarize(a plan.PodActions) planSummary {
	s := planSummary{KillPod: a.KillPod, CreateSandbox: a.CreateSandbox, Done: a.Done}
	if a.CreateSandbox {
		s.Attempt = a.Attempt
	}
	for _, c := range a.InitContainersToStart {
		s.Init = append(s.Init, c.Name)
	}
	for _, c := range a.ContainersToStart {
		s.Start = append(s.Start, c.Name)
	}
	for _, c := range a.EphemeralContainersToStart {
		s.Ephemeral = append(s.Ephemeral, c.Name)
	}
	for _, k := range a.ContainersToKill {
		s.Kill = append(s.Kill, k.Name)
	}
	slices.Sort(s.Kill)
	if len(a.BackingOff) > 0 {
		s.BackingOff = map[string]string{}
		for name, b := range a.BackingOff {
			s.BackingOff[name] = b.Reason
		}
	}
	return s
}

func TestComputePodActions(t *testing.T) {
	pod := podtest.NewPod()
	withInits := podtest.NewPod(podtest.Inits("init1", "init2"))
	withSidecar := podtest.NewPod(podtest.Sidecars("proxy"), podtest.Inits("setup"))
	sidecarLast := podtest.NewPod(podtest.Inits("setup"), podtest.Sidecars("proxy"))
	onFailure := podtest.NewPod(podtest.Policy(v1.RestartPolicyOnFailure))
	never := podtest.NewPod(podtest.Policy(v1.RestartPolicyNever))
	changed := podtest.NewPod(podtest.Modify("app", func(c *v1.Container) { c.Image = "busybox:2" }))
	probed := podtest.NewPod(podtest.Modify("app", func(c *v1.Container) { c.LivenessProbe = &v1.Probe{} }))
	startupSidecar := podtest.NewPod(podtest.Sidecars("proxy"), podtest.Inits("setup"), podtest.Modify("proxy", func(c *v1.Container) { c.StartupProbe = &v1.Probe{} }))
	ready := []state.Sandbox{statetest.Sandbox("s1", 0)}
	crashBackOff := state.PodState{Containers: map[string]state.ContainerRecord{
		"app": {RestartCount: 1, Created: true, CrashBackOff: state.BackOff{Delay: 10 * time.Second, Updated: podtest.At(0)}},
	}}
	imageBackOff := state.PodState{Containers: map[string]state.ContainerRecord{
		"app": {ImageBackOff: state.BackOff{Delay: 10 * time.Second, Updated: podtest.At(0)}, Waiting: &state.WaitingReason{Reason: state.ReasonErrImagePull, At: podtest.At(0)}},
	}}
	debug := podtest.NewPod(podtest.Ephemerals("debugger"))
	debugInits := podtest.NewPod(podtest.Inits("init1", "init2"), podtest.Ephemerals("debugger"))
	debugNever := podtest.NewPod(podtest.Policy(v1.RestartPolicyNever), podtest.Ephemerals("debugger"))
	debugRunning := statetest.Runtime(ready, statetest.Running(debug, "app", "s1", 0))
	created := func(name string) state.PodState {
		return state.PodState{Containers: map[string]state.ContainerRecord{name: {Created: true, LastStart: podtest.At(0)}}}
	}
	changedOld := statetest.Running(changed, "app", "s1", 0)
	changedOld.Hash = podspec.ContainerHash(&pod.Spec.Containers[0])

	tests := []struct {
		name string
		in   statetest.Scene
		want planSummary
	}{
		{name: "fresh pod creates a sandbox and starts its container",
			in: statetest.Scene{Pod: pod}, want: planSummary{KillPod: true, CreateSandbox: true, Start: []string{"app"}}},
		{name: "fresh pod with init containers starts only the first",
			in: statetest.Scene{Pod: withInits}, want: planSummary{KillPod: true, CreateSandbox: true, Init: []string{"init1"}}},
		{name: "running pod needs nothing",
			in: statetest.Scene{Pod: pod, RT: statetest.Runtime(ready, statetest.Running(pod, "app", "s1", 0))}, want: planSummary{}},
		{name: "container created in the sandbox is started",
			in: statetest.Scene{Pod: pod, RT: statetest.Runtime(ready)}, want: planSummary{Start: []string{"app"}}},
		{name: "crashed under Always restarts",
			in:   statetest.Scene{Pod: pod, RT: statetest.Runtime(ready, statetest.Exited(pod, "app", "s1", 0, 1, podtest.At(0))), Now: podtest.At(time.Second)},
			want: planSummary{Start: []string{"app"}}},
		{name: "succeeded under Always restarts",
			in:   statetest.Scene{Pod: pod, RT: statetest.Runtime(ready, statetest.Exited(pod, "app", "s1", 0, 0, podtest.At(0))), Now: podtest.At(time.Second)},
			want: planSummary{Start: []string{"app"}}},
		{name: "crashed under OnFailure restarts",
			in:   statetest.Scene{Pod: onFailure, RT: statetest.Runtime(ready, statetest.Exited(onFailure, "app", "s1", 0, 2, podtest.At(0))), Now: podtest.At(time.Second)},
			want: planSummary{Start: []string{"app"}}},
		{name: "succeeded under OnFailure stops the sandbox",
			in:   statetest.Scene{Pod: onFailure, RT: statetest.Runtime(ready, statetest.Exited(onFailure, "app", "s1", 0, 0, podtest.At(0))), Now: podtest.At(time.Second)},
			want: planSummary{KillPod: true}},
		{name: "crashed under Never stops the sandbox",
			in:   statetest.Scene{Pod: never, RT: statetest.Runtime(ready, statetest.Exited(never, "app", "s1", 0, 1, podtest.At(0))), Now: podtest.At(time.Second)},
			want: planSummary{KillPod: true}},
		{name: "crashed in back-off is not started",
			in:   statetest.Scene{Pod: pod, RT: statetest.Runtime(ready, statetest.Exited(pod, "app", "s1", 1, 1, podtest.At(5*time.Second))), St: crashBackOff, Now: podtest.At(8 * time.Second)},
			want: planSummary{BackingOff: map[string]string{"app": state.ReasonCrashLoopBackOff}}},
		{name: "crashed after its back-off restarts",
			in:   statetest.Scene{Pod: pod, RT: statetest.Runtime(ready, statetest.Exited(pod, "app", "s1", 1, 1, podtest.At(5*time.Second))), St: crashBackOff, Now: podtest.At(16 * time.Second)},
			want: planSummary{Start: []string{"app"}}},
		{name: "image pull back-off delays the start",
			in:   statetest.Scene{Pod: pod, RT: statetest.Runtime(ready), St: imageBackOff, Now: podtest.At(3 * time.Second)},
			want: planSummary{BackingOff: map[string]string{"app": state.ReasonImagePullBackOff}}},
		{name: "image pull back-off over retries",
			in:   statetest.Scene{Pod: pod, RT: statetest.Runtime(ready), St: imageBackOff, Now: podtest.At(11 * time.Second)},
			want: planSummary{Start: []string{"app"}}},
		{name: "first init container running waits",
			in: statetest.Scene{Pod: withInits, RT: statetest.Runtime(ready, statetest.Running(withInits, "init1", "s1", 0))}, want: planSummary{}},
		{name: "init containers run one after the other",
			in:   statetest.Scene{Pod: withInits, RT: statetest.Runtime(ready, statetest.Exited(withInits, "init1", "s1", 0, 0, podtest.At(0)))},
			want: planSummary{Init: []string{"init2"}}},
		{name: "regular containers start once init is done",
			in:   statetest.Scene{Pod: withInits, RT: statetest.Runtime(ready, statetest.Exited(withInits, "init1", "s1", 0, 0, podtest.At(0)), statetest.Exited(withInits, "init2", "s1", 0, 0, podtest.At(0)))},
			want: planSummary{Start: []string{"app"}}},
		{name: "failed init container under Never fails the pod",
			in: statetest.Scene{Pod: podtest.NewPod(podtest.Inits("init1"), podtest.Policy(v1.RestartPolicyNever)),
				RT: statetest.Runtime(ready, statetest.Exited(podtest.NewPod(podtest.Inits("init1")), "init1", "s1", 0, 1, podtest.At(0)))},
			want: planSummary{KillPod: true}},
		{name: "failed init container under Always is restarted",
			in:   statetest.Scene{Pod: withInits, RT: statetest.Runtime(ready, statetest.Exited(withInits, "init1", "s1", 0, 1, podtest.At(0))), Now: podtest.At(time.Second)},
			want: planSummary{Init: []string{"init1"}}},
		{name: "failed init container in back-off waits",
			in: statetest.Scene{Pod: withInits, RT: statetest.Runtime(ready, statetest.Exited(withInits, "init1", "s1", 1, 1, podtest.At(5*time.Second))),
				St:  state.PodState{Containers: map[string]state.ContainerRecord{"init1": {CrashBackOff: state.BackOff{Delay: 10 * time.Second, Updated: podtest.At(0)}}}},
				Now: podtest.At(6 * time.Second)},
			want: planSummary{BackingOff: map[string]string{"init1": state.ReasonCrashLoopBackOff}}},
		{name: "init containers are not rerun once a regular container ran",
			in: statetest.Scene{Pod: withInits, RT: statetest.Runtime(ready, statetest.Running(withInits, "app", "s1", 0))}, want: planSummary{}},
		{name: "a started sidecar lets the next init container start",
			in:   statetest.Scene{Pod: withSidecar, RT: statetest.Runtime(ready, statetest.Running(withSidecar, "proxy", "s1", 0))},
			want: planSummary{Init: []string{"setup"}}},
		{name: "a sidecar waits for its startup probe",
			in: statetest.Scene{Pod: startupSidecar, RT: statetest.Runtime(ready, statetest.Running(startupSidecar, "proxy", "s1", 0))}, want: planSummary{}},
		{name: "a sidecar whose startup probe passed lets the next start",
			in: statetest.Scene{Pod: startupSidecar, RT: statetest.Runtime(ready, statetest.Running(startupSidecar, "proxy", "s1", 0)),
				Probes: state.ProbeResults{Startup: map[string]bool{"proxy-0": true}}},
			want: planSummary{Init: []string{"setup"}}},
		{name: "regular containers start once sidecars run and init containers succeeded",
			in:   statetest.Scene{Pod: withSidecar, RT: statetest.Runtime(ready, statetest.Running(withSidecar, "proxy", "s1", 0), statetest.Exited(withSidecar, "setup", "s1", 0, 0, podtest.At(0)))},
			want: planSummary{Start: []string{"app"}}},
		{name: "a last sidecar running initializes the pod",
			in:   statetest.Scene{Pod: sidecarLast, RT: statetest.Runtime(ready, statetest.Exited(sidecarLast, "setup", "s1", 0, 0, podtest.At(0)), statetest.Running(sidecarLast, "proxy", "s1", 0))},
			want: planSummary{Start: []string{"app"}}},
		{name: "an exited sidecar is restarted next to running containers",
			in: statetest.Scene{Pod: withSidecar, RT: statetest.Runtime(ready, statetest.Exited(withSidecar, "proxy", "s1", 0, 1, podtest.At(0)), statetest.Running(withSidecar, "app", "s1", 0)),
				Now: podtest.At(time.Second)},
			want: planSummary{Init: []string{"proxy"}}},
		{name: "sidecars do not keep a finished pod alive",
			in: statetest.Scene{Pod: podtest.NewPod(podtest.Sidecars("proxy"), podtest.Policy(v1.RestartPolicyNever)),
				RT: statetest.Runtime(ready, statetest.Running(podtest.NewPod(podtest.Sidecars("proxy")), "proxy", "s1", 0), statetest.Exited(podtest.NewPod(), "app", "s1", 0, 0, podtest.At(0)))},
			want: planSummary{KillPod: true}},
		{name: "a changed container is killed and restarted",
			in: statetest.Scene{Pod: changed, RT: statetest.Runtime(ready, changedOld)}, want: planSummary{Kill: []string{"app"}, Start: []string{"app"}}},
		{name: "a container failing liveness is killed and restarted",
			in: statetest.Scene{Pod: probed, RT: statetest.Runtime(ready, statetest.Running(probed, "app", "s1", 0)),
				Probes: state.ProbeResults{Liveness: map[string]bool{"app-0": false}}},
			want: planSummary{Kill: []string{"app"}, Start: []string{"app"}}},
		{name: "a container failing liveness under Never is only killed",
			in: statetest.Scene{Pod: podtest.NewPod(podtest.Policy(v1.RestartPolicyNever)), RT: statetest.Runtime(ready, statetest.Running(never, "app", "s1", 0)),
				Probes: state.ProbeResults{Liveness: map[string]bool{"app-0": false}}},
			want: planSummary{Kill: []string{"app"}, KillPod: true}},
		{name: "a container in unknown state is killed before its restart",
			in: statetest.Scene{Pod: pod, RT: statetest.Runtime(ready, statetest.Instance(pod, "app", "s1", 0, state.ContainerUnknown))}, want: planSummary{Kill: []string{"app"}, Start: []string{"app"}}},
		{name: "a dead sandbox is replaced with the next attempt",
			in:   statetest.Scene{Pod: pod, RT: statetest.Runtime([]state.Sandbox{statetest.NotReady(statetest.Sandbox("s1", 0))}, statetest.Exited(pod, "app", "s1", 0, 137, podtest.At(0))), Now: podtest.At(time.Minute)},
			want: planSummary{KillPod: true, CreateSandbox: true, Attempt: 1, Start: []string{"app"}}},
		{name: "a sandbox without IP is replaced",
			in: statetest.Scene{Pod: pod, RT: statetest.Runtime([]state.Sandbox{{ID: "s1", Ready: true}})}, want: planSummary{KillPod: true, CreateSandbox: true, Attempt: 1, Start: []string{"app"}}},
		{name: "a dead sandbox of a pod with init containers restarts initialization",
			in:   statetest.Scene{Pod: withInits, RT: statetest.Runtime([]state.Sandbox{statetest.NotReady(statetest.Sandbox("s1", 2))}, statetest.Exited(withInits, "init1", "s1", 0, 0, podtest.At(0)))},
			want: planSummary{KillPod: true, CreateSandbox: true, Attempt: 3, Init: []string{"init1"}}},
		{name: "a dead sandbox under Never after its containers ran is not replaced",
			in: statetest.Scene{Pod: never, RT: statetest.Runtime([]state.Sandbox{statetest.NotReady(statetest.Sandbox("s1", 0))}, statetest.Exited(never, "app", "s1", 0, 0, podtest.At(0)))}, want: planSummary{}},
		{name: "a dead sandbox under OnFailure whose containers succeeded is not replaced",
			in: statetest.Scene{Pod: onFailure, RT: statetest.Runtime([]state.Sandbox{statetest.NotReady(statetest.Sandbox("s1", 0))}, statetest.Exited(onFailure, "app", "s1", 0, 0, podtest.At(0)))}, want: planSummary{}},
		{name: "a deleted pod is killed and nothing starts",
			in: statetest.Scene{Pod: podtest.NewPod(podtest.Deleted(30)), RT: statetest.Runtime(ready, statetest.Running(pod, "app", "s1", 0))}, want: planSummary{KillPod: true}},
		{name: "a deleted pod with nothing running is done",
			in: statetest.Scene{Pod: podtest.NewPod(podtest.Deleted(30)), RT: statetest.Runtime([]state.Sandbox{statetest.NotReady(statetest.Sandbox("s1", 0))}, statetest.Exited(pod, "app", "s1", 0, 0, podtest.At(0)))}, want: planSummary{Done: true}},
		{name: "a deleted pod never gets a sandbox",
			in: statetest.Scene{Pod: podtest.NewPod(podtest.Deleted(30))}, want: planSummary{Done: true}},
		{name: "an ephemeral container added to a running pod is started",
			in: statetest.Scene{Pod: debug, RT: debugRunning}, want: planSummary{Ephemeral: []string{"debugger"}}},
		{name: "a running ephemeral container is left alone",
			in: statetest.Scene{Pod: debug, RT: statetest.Runtime(ready, statetest.Running(debug, "app", "s1", 0), statetest.Running(debug, "debugger", "s1", 0))}, want: planSummary{}},
		{name: "an exited ephemeral container is never restarted, whatever the restart policy",
			in:   statetest.Scene{Pod: debug, RT: statetest.Runtime(ready, statetest.Running(debug, "app", "s1", 0), statetest.Exited(debug, "debugger", "s1", 0, 1, podtest.At(0))), Now: podtest.At(time.Hour)},
			want: planSummary{}},
		{name: "an ephemeral container created once is not started again when the runtime lost it",
			in: statetest.Scene{Pod: debug, RT: debugRunning, St: created("debugger")}, want: planSummary{}},
		{name: "an ephemeral container left created is not started again",
			in: statetest.Scene{Pod: debug, RT: statetest.Runtime(ready, statetest.Running(debug, "app", "s1", 0), statetest.Instance(debug, "debugger", "s1", 0, state.ContainerCreated))}, want: planSummary{}},
		{name: "an ephemeral container whose start failed before it existed is tried again",
			in: statetest.Scene{Pod: debug, RT: debugRunning, St: state.PodState{Containers: map[string]state.ContainerRecord{"debugger": {
				Waiting: &state.WaitingReason{Reason: state.ReasonCreateContainerConfigError, At: podtest.At(0)},
			}}}, Now: podtest.At(time.Minute)},
			want: planSummary{Ephemeral: []string{"debugger"}}},
		{name: "an ephemeral container waits out its image pull back-off",
			in: statetest.Scene{Pod: debug, RT: debugRunning, St: state.PodState{Containers: map[string]state.ContainerRecord{"debugger": {
				ImageBackOff: state.BackOff{Delay: 10 * time.Second, Updated: podtest.At(0)}, Waiting: &state.WaitingReason{Reason: state.ReasonErrImagePull, At: podtest.At(0)},
			}}}, Now: podtest.At(3 * time.Second)},
			want: planSummary{BackingOff: map[string]string{"debugger": state.ReasonImagePullBackOff}}},
		{name: "ephemeral containers start before the pod is initialized",
			in: statetest.Scene{Pod: debugInits, RT: statetest.Runtime(ready, statetest.Running(debugInits, "init1", "s1", 0))}, want: planSummary{Ephemeral: []string{"debugger"}}},
		{name: "ephemeral containers start next to a crash-looping container",
			in:   statetest.Scene{Pod: debug, RT: statetest.Runtime(ready, statetest.Exited(debug, "app", "s1", 1, 1, podtest.At(5*time.Second))), St: crashBackOff, Now: podtest.At(8 * time.Second)},
			want: planSummary{Ephemeral: []string{"debugger"}, BackingOff: map[string]string{"app": state.ReasonCrashLoopBackOff}}},
		{name: "a pod getting a new sandbox starts no ephemeral container",
			in:   statetest.Scene{Pod: debug, RT: statetest.Runtime([]state.Sandbox{statetest.NotReady(statetest.Sandbox("s1", 0))}, statetest.Exited(debug, "app", "s1", 0, 137, podtest.At(0))), Now: podtest.At(time.Minute)},
			want: planSummary{KillPod: true, CreateSandbox: true, Attempt: 1, Start: []string{"app"}}},
		{name: "ephemeral containers that ran in an old sandbox are not started in the new one",
			in:   statetest.Scene{Pod: debug, RT: statetest.Runtime([]state.Sandbox{statetest.Sandbox("s2", 1), statetest.NotReady(statetest.Sandbox("s1", 0))}, statetest.Running(debug, "app", "s2", 1), statetest.Exited(debug, "debugger", "s1", 0, 137, podtest.At(0)))},
			want: planSummary{}},
		{name: "a running ephemeral container does not keep a finished pod alive",
			in:   statetest.Scene{Pod: debugNever, RT: statetest.Runtime(ready, statetest.Exited(debugNever, "app", "s1", 0, 0, podtest.At(0)), statetest.Running(debugNever, "debugger", "s1", 0))},
			want: planSummary{KillPod: true}},
		{name: "a finished pod starts no ephemeral container",
			in: statetest.Scene{Pod: debugNever, RT: statetest.Runtime(ready, statetest.Exited(debugNever, "app", "s1", 0, 0, podtest.At(0)))}, want: planSummary{KillPod: true}},
		{name: "a deleted pod starts no ephemeral container",
			in: statetest.Scene{Pod: podtest.NewPod(podtest.Deleted(30), podtest.Ephemerals("debugger")), RT: debugRunning}, want: planSummary{KillPod: true}},
		{name: "a pod in a terminal phase only gets its sandbox stopped",
			in: statetest.Scene{Pod: podtest.NewPod(podtest.Phase(v1.PodFailed)), RT: statetest.Runtime(ready, statetest.Exited(pod, "app", "s1", 0, 1, podtest.At(0)))}, want: planSummary{KillPod: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := summarize(ComputePodActions(tt.in.Pod, tt.in.RT, tt.in.St, Inputs{Now: tt.in.Now, Probes: tt.in.Probes}))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("plan mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestComputePodActionsDetails(t *testing.T) {
	pod := podtest.NewPod(podtest.Modify("app", func(c *v1.Container) {
		c.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"drain"}}}}
		c.LivenessProbe = &v1.Probe{TerminationGracePeriodSeconds: ptr.To[int64](5)}
	}))
	st := state.PodState{Containers: map[string]state.ContainerRecord{
		"app": {RestartCount: 3, Created: true, CrashBackOff: state.BackOff{Delay: 40 * time.Second, Updated: podtest.At(0)}},
	}}

	t.Run("back-off says why and until when", func(t *testing.T) {
		rt := statetest.Runtime([]state.Sandbox{statetest.Sandbox("s1", 0)}, statetest.Exited(pod, "app", "s1", 3, 1, podtest.At(10*time.Second)))
		a := ComputePodActions(pod, rt, st, Inputs{Now: podtest.At(20 * time.Second)})
		want := plan.BackingOff{
			Reason:  state.ReasonCrashLoopBackOff,
			Message: "back-off 40s restarting failed container=app pod=web_default(uid-1)",
			Until:   podtest.At(50 * time.Second),
		}
		if diff := cmp.Diff(want, a.BackingOff["app"]); diff != "" {
			t.Errorf("back-off (-want +got):\n%s", diff)
		}
		if a.RequeueAfter != 30*time.Second {
			t.Errorf("RequeueAfter = %v, want 30s", a.RequeueAfter)
		}
	})
	t.Run("restart carries the restart count, previous exit and grace period", func(t *testing.T) {
		rt := statetest.Runtime([]state.Sandbox{statetest.Sandbox("s1", 0)}, statetest.Exited(pod, "app", "s1", 3, 1, podtest.At(10*time.Second)), statetest.Exited(pod, "app", "s1", 2, 1, podtest.At(0)))
		a := ComputePodActions(pod, rt, st, Inputs{Now: podtest.At(time.Hour)})
		want := []plan.ContainerStart{{Name: "app", Index: 0, RestartCount: 4, PrevFinishedAt: podtest.At(10 * time.Second), KillGracePeriodSeconds: 30}}
		if diff := cmp.Diff(want, a.ContainersToStart); diff != "" {
			t.Errorf("starts (-want +got):\n%s", diff)
		}
		if a.SandboxID != "s1" {
			t.Errorf("SandboxID = %q, want s1", a.SandboxID)
		}
	})
	t.Run("restart count survives removed containers", func(t *testing.T) {
		a := ComputePodActions(pod, statetest.Runtime([]state.Sandbox{statetest.Sandbox("s1", 0)}), st, Inputs{Now: podtest.At(time.Hour)})
		if got := a.ContainersToStart[0].RestartCount; got != 4 {
			t.Errorf("RestartCount = %d, want 4", got)
		}
	})
	t.Run("liveness kill uses the probe's grace period and preStop", func(t *testing.T) {
		rt := statetest.Runtime([]state.Sandbox{statetest.Sandbox("s1", 0)}, statetest.Running(pod, "app", "s1", 0))
		a := ComputePodActions(pod, rt, state.PodState{}, Inputs{Now: podtest.At(0), Probes: state.ProbeResults{Liveness: map[string]bool{"app-0": false}}})
		k := a.ContainersToKill["app-0"]
		if k.Reason != plan.KillLivenessProbe || k.GracePeriodSeconds != 5 || k.PreStop == nil ||
			k.Message != "Container app failed liveness probe, will be restarted" {
			t.Errorf("kill = %+v", k)
		}
	})
	t.Run("start spec is found by index", func(t *testing.T) {
		p := podtest.NewPod(podtest.Inits("a", "b"))
		if got := (plan.ContainerStart{Index: 1, Init: true}).Spec(p).Name; got != "b" {
			t.Errorf("Spec = %s, want b", got)
		}
	})
	t.Run("an ephemeral container starts once with the ID of its target", func(t *testing.T) {
		p := podtest.NewPod(podtest.Containers("app", "web"), podtest.Ephemerals("debugger", "shell"), podtest.Target("debugger", "web"), podtest.Target("shell", "missing"))
		rt := statetest.Runtime([]state.Sandbox{statetest.Sandbox("s1", 0)}, statetest.Running(p, "app", "s1", 0), statetest.Exited(p, "web", "s1", 0, 1, podtest.At(0)), statetest.Running(p, "web", "s1", 1))
		a := ComputePodActions(p, rt, state.PodState{}, Inputs{Now: podtest.At(time.Second)})
		want := []plan.ContainerStart{
			{Name: "debugger", Index: 0, Ephemeral: true, TargetID: "web-1"},
			{Name: "shell", Index: 1, Ephemeral: true},
		}
		if diff := cmp.Diff(want, a.EphemeralContainersToStart); diff != "" {
			t.Fatalf("ephemeral starts (-want +got):\n%s", diff)
		}
		if got := want[0].Spec(p); got.Name != "debugger" || got != (*v1.Container)(&p.Spec.EphemeralContainers[0].EphemeralContainerCommon) {
			t.Errorf("Spec = %+v, want the ephemeral container itself", got)
		}
		if id, err := want[0].Target(p); id != "web-1" || err != nil {
			t.Errorf("Target = %q, %v; want web-1", id, err)
		}
		var ce *criconfig.ConfigError
		if _, err := want[1].Target(p); !errors.As(err, &ce) || err.Error() != "unable to find target container missing" {
			t.Errorf("Target of a missing container = %v, want a ConfigError", err)
		}
		if id, err := (plan.ContainerStart{Name: "app"}).Target(p); id != "" || err != nil {
			t.Errorf("Target of a regular container = %q, %v", id, err)
		}
	})
	t.Run("no sandbox after a recorded one starts a later attempt", func(t *testing.T) {
		a := ComputePodActions(pod, state.PodRuntime{}, state.PodState{SandboxID: "gone", SandboxAttempt: 4}, Inputs{Now: podtest.At(0)})
		if !a.CreateSandbox || a.Attempt != 5 || a.SandboxReason != SandboxMsgNoSandbox {
			t.Errorf("got create=%v attempt=%d reason=%q", a.CreateSandbox, a.Attempt, a.SandboxReason)
		}
	})
	t.Run("inputs are not modified", func(t *testing.T) {
		before := maps.Clone(st.Containers)
		ComputePodActions(pod, statetest.Runtime([]state.Sandbox{statetest.Sandbox("s1", 0)}, statetest.Exited(pod, "app", "s1", 3, 1, podtest.At(0))), st, Inputs{Now: podtest.At(time.Second)})
		if !maps.Equal(before, st.Containers) {
			t.Error("state changed")
		}
	})
}

func TestShouldRestartExitedRules(t *testing.T) {
	rules := func(op v1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) podtest.Option {
		return podtest.Modify("app", func(c *v1.Container) {
			c.RestartPolicy = ptr.To(v1.ContainerRestartPolicyNever)
			c.RestartPolicyRules = []v1.ContainerRestartRule{{
				Action:    v1.ContainerRestartRuleActionRestart,
				ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes},
			}}
		})
	}
	tests := []struct {
		name string
		pod  *v1.Pod
		code int32
		want bool
	}{
		{"Always restarts success", podtest.NewPod(), 0, true},
		{"OnFailure skips success", podtest.NewPod(podtest.Policy(v1.RestartPolicyOnFailure)), 0, false},
		{"OnFailure restarts failure", podtest.NewPod(podtest.Policy(v1.RestartPolicyOnFailure)), 3, true},
		{"Never skips failure", podtest.NewPod(podtest.Policy(v1.RestartPolicyNever)), 3, false},
		{"container Always overrides pod Never", podtest.NewPod(podtest.Policy(v1.RestartPolicyNever), podtest.Modify("app", func(c *v1.Container) {
			c.RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
		})), 0, true},
		{"rule In matches", podtest.NewPod(rules(v1.ContainerRestartRuleOnExitCodesOpIn, 42)), 42, true},
		{"rule In does not match", podtest.NewPod(rules(v1.ContainerRestartRuleOnExitCodesOpIn, 42)), 1, false},
		{"rule NotIn matches", podtest.NewPod(rules(v1.ContainerRestartRuleOnExitCodesOpNotIn, 0)), 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ShouldRestartExited(tt.pod, &tt.pod.Spec.Containers[0], tt.code); got != tt.want {
				t.Errorf("shouldRestartExited = %v, want %v", got, tt.want)
			}
		})
	}
}

package planner

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
	"github.com/nodelet/nodelet/internal/kuberuntime/podtest"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/kuberuntime/statetest"
)

func resizePolicy(name string, cpu, memory v1.ResourceResizeRestartPolicy) podtest.Option {
	return podtest.Modify(name, func(c *v1.Container) {
		c.ResizePolicy = []v1.ContainerResizePolicy{
			{ResourceName: v1.ResourceCPU, RestartPolicy: cpu},
			{ResourceName: v1.ResourceMemory, RestartPolicy: memory},
		}
	})
}

func TestComputePodActionsResize(t *testing.T) {
	ready := []state.Sandbox{statetest.Sandbox("s1", 0)}
	old, cpuUp, memDown := podtest.Res("100m", "200m", "64Mi", "128Mi"), podtest.Res("150m", "300m", "64Mi", "128Mi"), podtest.Res("100m", "200m", "32Mi", "64Mi")
	memUp := podtest.Res("100m", "200m", "64Mi", "256Mi")
	noLimit := podtest.Res("100m", "", "64Mi", "")
	restartMemory := resizePolicy("app", v1.NotRequired, v1.RestartContainer)

	type want struct {
		resize        []string
		memDecrease   []string
		kill, start   []string
		restartCounts []uint32
	}
	tests := []struct {
		name string
		pod  *v1.Pod
		rt   func(*v1.Pod) state.PodRuntime
		st   state.PodState
		want want
	}{
		{name: "running with its allocation",
			pod: podtest.NewPod(podtest.Resources("app", old)),
			st:  statetest.Allocated(map[string]v1.ResourceRequirements{"app": old}, map[string]v1.ResourceRequirements{"app": old})},
		{name: "equal values written differently need nothing",
			pod: podtest.NewPod(podtest.Resources("app", podtest.Res("0.1", "0.2", "67108864", "134217728"))),
			st:  statetest.Allocated(nil, map[string]v1.ResourceRequirements{"app": old})},
		{name: "cpu change without a policy is done in place",
			pod:  podtest.NewPod(podtest.Resources("app", cpuUp)),
			st:   statetest.Allocated(nil, map[string]v1.ResourceRequirements{"app": old}),
			want: want{resize: []string{"app"}}},
		{name: "memory limit decrease is checked against usage",
			pod:  podtest.NewPod(podtest.Resources("app", memDown)),
			st:   statetest.Allocated(nil, map[string]v1.ResourceRequirements{"app": old}),
			want: want{resize: []string{"app"}, memDecrease: []string{"app"}}},
		{name: "memory limit increase is not",
			pod:  podtest.NewPod(podtest.Resources("app", memUp)),
			st:   statetest.Allocated(nil, map[string]v1.ResourceRequirements{"app": old}),
			want: want{resize: []string{"app"}}},
		{name: "a memory limit set where there was none is",
			pod:  podtest.NewPod(podtest.Resources("app", old)),
			st:   statetest.Allocated(nil, map[string]v1.ResourceRequirements{"app": noLimit}),
			want: want{resize: []string{"app"}, memDecrease: []string{"app"}}},
		{name: "memory change with RestartContainer restarts the container",
			pod:  podtest.NewPod(podtest.Resources("app", memDown), restartMemory),
			st:   statetest.Allocated(nil, map[string]v1.ResourceRequirements{"app": old}),
			want: want{kill: []string{"app"}, start: []string{"app"}, restartCounts: []uint32{1}}},
		{name: "cpu change when only memory restarts is done in place",
			pod:  podtest.NewPod(podtest.Resources("app", cpuUp), restartMemory),
			st:   statetest.Allocated(nil, map[string]v1.ResourceRequirements{"app": old}),
			want: want{resize: []string{"app"}}},
		{name: "restart policy Never does not keep a resize restart from restarting",
			pod:  podtest.NewPod(podtest.Policy(v1.RestartPolicyNever), podtest.Resources("app", cpuUp), resizePolicy("app", v1.RestartContainer, v1.NotRequired)),
			st:   statetest.Allocated(nil, map[string]v1.ResourceRequirements{"app": old}),
			want: want{kill: []string{"app"}, start: []string{"app"}, restartCounts: []uint32{1}}},
		{name: "unrecorded resources are applied in place, never by a restart",
			pod:  podtest.NewPod(podtest.Resources("app", memDown), restartMemory),
			st:   statetest.Allocated(nil, nil),
			want: want{resize: []string{"app"}, memDecrease: []string{"app"}}},
		{name: "an older instance's record does not count",
			pod: podtest.NewPod(podtest.Resources("app", old), restartMemory),
			rt: func(p *v1.Pod) state.PodRuntime {
				return statetest.Runtime(ready, statetest.Running(p, "app", "s1", 1))
			},
			st: statetest.Allocated(nil, map[string]v1.ResourceRequirements{"app": old}),
			// app-0 is recorded, app-1 runs.
			want: want{resize: []string{"app"}, memDecrease: []string{"app"}}},
		{name: "an exited container starts with its allocation",
			pod: podtest.NewPod(podtest.Resources("app", cpuUp)),
			rt: func(p *v1.Pod) state.PodRuntime {
				return statetest.Runtime(ready, statetest.Exited(p, "app", "s1", 0, 1, podtest.At(0)))
			},
			st:   statetest.Allocated(nil, map[string]v1.ResourceRequirements{"app": old}),
			want: want{start: []string{"app"}, restartCounts: []uint32{1}}},
		{name: "a sidecar restarts by its policy",
			pod: podtest.NewPod(podtest.Sidecars("proxy"), podtest.Resources("proxy", memDown), resizePolicy("proxy", v1.NotRequired, v1.RestartContainer)),
			rt: func(p *v1.Pod) state.PodRuntime {
				return statetest.Runtime(ready, statetest.Running(p, "proxy", "s1", 0), statetest.Running(p, "app", "s1", 0))
			},
			st:   statetest.Allocated(nil, map[string]v1.ResourceRequirements{"proxy": old, "app": {}}),
			want: want{kill: []string{"proxy"}, start: []string{"proxy"}, restartCounts: []uint32{1}}},
		{name: "a running init container is resized in place whatever its policy",
			pod: podtest.NewPod(podtest.Inits("setup"), podtest.Resources("setup", cpuUp), resizePolicy("setup", v1.RestartContainer, v1.RestartContainer)),
			rt: func(p *v1.Pod) state.PodRuntime {
				return statetest.Runtime(ready, statetest.Running(p, "setup", "s1", 0))
			},
			st:   statetest.Allocated(nil, map[string]v1.ResourceRequirements{"setup": old}),
			want: want{resize: []string{"setup"}}},
		{name: "a pod being deleted resizes nothing",
			pod: podtest.NewPod(podtest.Resources("app", cpuUp), podtest.Deleted(30)),
			st:  statetest.Allocated(nil, map[string]v1.ResourceRequirements{"app": old})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := statetest.Runtime(ready, statetest.Running(tt.pod, "app", "s1", 0))
			if tt.rt != nil {
				rt = tt.rt(tt.pod)
			}
			a := ComputePodActions(tt.pod, rt, tt.st, Inputs{Now: podtest.At(time.Minute)})
			var got want
			for _, r := range a.ContainersToResize {
				got.resize = append(got.resize, r.Name)
				if r.MemoryLimitDecrease {
					got.memDecrease = append(got.memDecrease, r.Name)
				}
			}
			for _, k := range a.ContainersToKill {
				got.kill = append(got.kill, k.Name)
				if k.Reason != plan.KillResize || !strings.Contains(k.Message, "resize requires restart") {
					t.Errorf("kill %+v is not a resize restart", k)
				}
			}
			for _, s := range append(a.InitContainersToStart, a.ContainersToStart...) {
				got.start = append(got.start, s.Name)
				got.restartCounts = append(got.restartCounts, s.RestartCount)
			}
			if tt.pod.DeletionTimestamp != nil {
				got.kill, got.start, got.restartCounts = nil, nil, nil
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResizeProgress(t *testing.T) {
	old, bigger := podtest.Res("100m", "200m", "64Mi", "128Mi"), podtest.Res("150m", "300m", "64Mi", "128Mi")
	pod := podtest.NewPod(podtest.Resources("app", bigger), podtest.Generation(2))
	ready := []state.Sandbox{statetest.Sandbox("s1", 0)}
	tests := []struct {
		name           string
		rt             state.PodRuntime
		actuated       v1.ResourceRequirements
		inProgress     *state.ResizeCondition
		wantInProgress bool
		wantDone       bool
	}{
		{name: "running with the old resources", rt: statetest.Runtime(ready, statetest.Running(pod, "app", "s1", 0)), actuated: old,
			inProgress: &state.ResizeCondition{Generation: 2}, wantInProgress: true},
		{name: "running with the new resources", rt: statetest.Runtime(ready, statetest.Running(pod, "app", "s1", 0)), actuated: bigger,
			inProgress: &state.ResizeCondition{Generation: 2}, wantDone: true},
		{name: "not running: it starts with them", rt: statetest.Runtime(ready, statetest.Exited(pod, "app", "s1", 0, 0, podtest.At(0))), actuated: old,
			inProgress: &state.ResizeCondition{Generation: 2}, wantDone: true},
		{name: "a difference found without a resize starts one", rt: statetest.Runtime(ready, statetest.Running(pod, "app", "s1", 0)), actuated: old,
			wantInProgress: true},
		{name: "nothing to do", rt: statetest.Runtime(ready, statetest.Running(pod, "app", "s1", 0)), actuated: bigger},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := statetest.Allocated(map[string]v1.ResourceRequirements{"app": bigger}, map[string]v1.ResourceRequirements{"app": tt.actuated})
			st.ResizeInProgress = tt.inProgress
			gen, done := st.FinishResize(pod.Generation, PodFinished(pod), ResizeInProgress(pod, tt.rt, st), podtest.At(time.Minute))
			if done != tt.wantDone || (done && gen != 2) {
				t.Errorf("FinishResize = %d, %v, want done %v", gen, done, tt.wantDone)
			}
			if (st.ResizeInProgress != nil) != tt.wantInProgress {
				t.Errorf("in progress = %+v, want %v", st.ResizeInProgress, tt.wantInProgress)
			}
			if tt.inProgress == nil && tt.wantInProgress && st.ResizeInProgress.Generation != 2 {
				t.Errorf("a resize found started for generation %d", st.ResizeInProgress.Generation)
			}
		})
	}
}

func TestResizeMessage(t *testing.T) {
	pod := podtest.NewPod(podtest.Inits("setup"), podtest.Resources("app", podtest.Res("100m", "", "", "")))
	got := ResizeMessage("Pod resize Deferred", pod, 3, "no room")
	want := `Pod resize Deferred: {"initContainers":[{"name":"setup","resources":{}}],"containers":[{"name":"app","resources":{"requests":{"cpu":"100m"}}}],"generation":3,"error":"no room"}`
	if got != want {
		t.Errorf("message:\n got %s\nwant %s", got, want)
	}
}

package planner

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
	"github.com/nodelet/nodelet/internal/kuberuntime/podtest"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/kuberuntime/statetest"
)

func TestGracePeriodSeconds(t *testing.T) {
	tests := []struct {
		name string
		pod  *v1.Pod
		want int64
	}{
		{"default", podtest.NewPod(), 30},
		{"spec", podtest.NewPod(func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](60) }), 60},
		{"deletion wins", podtest.NewPod(podtest.Deleted(5), func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](60) }), 5},
		{"forced deletion", podtest.NewPod(podtest.Deleted(0)), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := GracePeriodSeconds(tt.pod); got != tt.want {
				t.Errorf("GracePeriodSeconds = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestPlanTermination(t *testing.T) {
	preStop := &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"drain"}}}
	pod := podtest.NewPod(podtest.Deleted(30), podtest.Sidecars("log", "proxy"), podtest.Inits("setup"), podtest.Containers("app", "web"),
		podtest.Modify("app", func(c *v1.Container) { c.Lifecycle = &v1.Lifecycle{PreStop: preStop} }),
		podtest.Modify("proxy", func(c *v1.Container) { c.Lifecycle = &v1.Lifecycle{PreStop: preStop} }))
	ready := []state.Sandbox{statetest.Sandbox("s1", 0)}
	all := statetest.Runtime(ready,
		statetest.Running(pod, "log", "s1", 0), statetest.Running(pod, "proxy", "s1", 0),
		statetest.Running(pod, "app", "s1", 0), statetest.Running(pod, "web", "s1", 0))
	st := state.PodState{}
	st.BeginTermination(EffectiveGracePeriod(pod), podtest.At(0))
	hooksDone := st
	hooksDone.Terminating = &state.Termination{StartedAt: podtest.At(0), Deadline: podtest.At(30 * time.Second), PreStopDone: []string{"app-0", "proxy-0"}}

	type summary struct {
		PreStop, Stop, Remove, StopSandboxes []string
		Timeout                              int64
		RequeueAfter                         time.Duration
		Done                                 bool
	}
	summarizeT := func(p plan.TerminationPlan) summary {
		s := summary{Remove: p.Remove, StopSandboxes: p.StopSandboxes, RequeueAfter: p.RequeueAfter, Done: p.Done}
		for _, h := range p.PreStop {
			s.PreStop = append(s.PreStop, h.Name)
		}
		for _, c := range p.Stop {
			s.Stop = append(s.Stop, c.Name)
			s.Timeout = c.Timeout
		}
		return s
	}
	tests := []struct {
		name string
		rt   state.PodRuntime
		st   state.PodState
		now  time.Time
		want summary
	}{
		{name: "hooks run first and regular containers stop while sidecars wait",
			rt: all, st: st, now: podtest.At(0),
			want: summary{PreStop: []string{"proxy", "app"}, Stop: []string{"app", "web"}, Timeout: 30, RequeueAfter: 30 * time.Second}},
		{name: "hooks run once",
			rt: all, st: hooksDone, now: podtest.At(10 * time.Second),
			want: summary{Stop: []string{"app", "web"}, Timeout: 20, RequeueAfter: 20 * time.Second}},
		{name: "the last sidecar stops once regular containers stopped",
			rt: statetest.Runtime(ready, statetest.Running(pod, "log", "s1", 0), statetest.Running(pod, "proxy", "s1", 0)), st: hooksDone, now: podtest.At(12 * time.Second),
			want: summary{Stop: []string{"proxy"}, Timeout: 18, RequeueAfter: 18 * time.Second}},
		{name: "the first sidecar stops last",
			rt: statetest.Runtime(ready, statetest.Running(pod, "log", "s1", 0)), st: hooksDone, now: podtest.At(14 * time.Second),
			want: summary{Stop: []string{"log"}, Timeout: 16}},
		{name: "past the deadline everything stops with the minimum timeout",
			rt: all, st: st, now: podtest.At(31 * time.Second),
			want: summary{Stop: []string{"log", "proxy", "app", "web"}, Timeout: state.MinimumGracePeriodSeconds}},
		{name: "a container created but never started is removed, not stopped",
			rt: statetest.Runtime(ready, statetest.Instance(pod, "app", "s1", 1, state.ContainerCreated), statetest.Exited(pod, "app", "s1", 0, 1, podtest.At(0)), statetest.Running(pod, "web", "s1", 0)),
			st: hooksDone, now: podtest.At(2 * time.Second),
			want: summary{Stop: []string{"web"}, Remove: []string{"app-1"}, Timeout: 28}},
		{name: "a pod whose only live container was never started removes it, then stops its sandboxes",
			rt: statetest.Runtime(ready, statetest.Instance(pod, "app", "s1", 1, state.ContainerCreated), statetest.Exited(pod, "app", "s1", 0, 1, podtest.At(0))),
			st: st, now: podtest.At(3 * time.Second),
			want: summary{Remove: []string{"app-1"}}},
		{name: "sandboxes stop after the containers",
			rt: statetest.Runtime(ready, statetest.Exited(pod, "app", "s1", 0, 0, podtest.At(0))), st: st, now: podtest.At(time.Second),
			want: summary{StopSandboxes: []string{"s1"}}},
		{name: "done when nothing runs",
			rt: statetest.Runtime([]state.Sandbox{statetest.NotReady(statetest.Sandbox("s1", 0))}), st: st, now: podtest.At(time.Second),
			want: summary{Done: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := summarizeT(PlanTermination(pod, tt.rt, tt.st, tt.now))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("termination plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanTerminationStopsEphemeralContainersAtOnce(t *testing.T) {
	pod := podtest.NewPod(podtest.Deleted(30), podtest.Sidecars("proxy"), podtest.Ephemerals("debugger"))
	rt := statetest.Runtime([]state.Sandbox{statetest.Sandbox("s1", 0)}, statetest.Running(pod, "proxy", "s1", 0), statetest.Running(pod, "app", "s1", 0), statetest.Running(pod, "debugger", "s1", 0))
	st := state.PodState{}
	st.BeginTermination(EffectiveGracePeriod(pod), podtest.At(0))
	tp := PlanTermination(pod, rt, st, podtest.At(0))
	var stop []string
	for _, c := range tp.Stop {
		stop = append(stop, c.Name)
	}
	if diff := cmp.Diff([]string{"app", "debugger"}, stop); diff != "" || len(tp.PreStop) > 0 {
		t.Errorf("stopped now (-want +got):\n%s; preStop hooks %v", diff, tp.PreStop)
	}
	// The sidecar waits for the regular container only.
	rt = statetest.Runtime([]state.Sandbox{statetest.Sandbox("s1", 0)}, statetest.Running(pod, "proxy", "s1", 0), statetest.Running(pod, "debugger", "s1", 0))
	if next := PlanTermination(pod, rt, st, podtest.At(time.Second)); len(next.Stop) != 2 {
		t.Errorf("stops %+v, want the sidecar and the ephemeral container", next.Stop)
	}
}

func TestEffectiveGracePeriod(t *testing.T) {
	spec := func(g int64) podtest.Option {
		return func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To(g) }
	}
	cases := []struct {
		name string
		pod  *v1.Pod
		want int64
	}{
		{name: "not deleted: the spec's", pod: podtest.NewPod(spec(45)), want: 45},
		{name: "not deleted, no spec value: the default", pod: podtest.NewPod(), want: DefaultGracePeriodSeconds},
		{name: "deleted: the deletion's", pod: podtest.NewPod(spec(45), podtest.Deleted(10)), want: 10},
		{name: "force-deleted with 0: the spec's", pod: podtest.NewPod(spec(45), podtest.Deleted(0)), want: 45},
		{name: "spec of 0: at least one second", pod: podtest.NewPod(spec(0)), want: 1},
		{name: "deleted with 0, spec of 0: one second", pod: podtest.NewPod(spec(0), podtest.Deleted(0)), want: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := EffectiveGracePeriod(tc.pod); got != tc.want {
				t.Errorf("EffectiveGracePeriod = %d, want %d", got, tc.want)
			}
		})
	}
}

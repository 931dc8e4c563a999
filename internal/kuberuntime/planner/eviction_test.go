package planner

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/kuberuntime/podtest"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/kuberuntime/statetest"
)

func TestComputePodActionsEvicted(t *testing.T) {
	pod := podtest.NewPod()
	ready := []state.Sandbox{statetest.Sandbox("s1", 0)}
	stopped := []state.Sandbox{statetest.NotReady(statetest.Sandbox("s1", 0))}
	ev := &Eviction{Message: "The node was low on resource: memory. ", GracePeriodSeconds: 1}
	tests := []struct {
		name         string
		pod          *v1.Pod
		rt           state.PodRuntime
		ev           *Eviction
		wantKill     bool
		wantDone     bool
		wantReason   string
		wantStarting bool
	}{
		{name: "not evicted, running: keeps running", pod: pod, rt: statetest.Runtime(ready, statetest.Running(pod, "app", "s1", 0)), wantStarting: true},
		{name: "not evicted, nothing runs: start", pod: pod, rt: statetest.Runtime(nil), wantKill: true, wantStarting: true},
		{name: "evicted while running: killed for good with the eviction's reason",
			pod: pod, rt: statetest.Runtime(ready, statetest.Running(pod, "app", "s1", 0)), ev: ev,
			wantKill: true, wantReason: ReasonEvicted},
		{name: "evicted and stopped: done, nothing restarts",
			pod: pod, rt: statetest.Runtime(stopped, statetest.Exited(pod, "app", "s1", 0, 137, podtest.At(0))), ev: ev,
			wantDone: true, wantReason: ReasonEvicted},
		{name: "stopped for a node shutdown: killed for good with the shutdown's reason",
			pod: pod, rt: statetest.Runtime(ready, statetest.Running(pod, "app", "s1", 0)),
			ev: &Eviction{Reason: "Terminated", Message: ev.Message, GracePeriodSeconds: 20}, wantKill: true, wantReason: "Terminated"},
		{name: "a pod already failed keeps its own end",
			pod: podtest.NewPod(podtest.Phase(v1.PodFailed)), rt: statetest.Runtime(stopped), ev: ev, wantDone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := ComputePodActions(tt.pod, tt.rt, state.NewPodState(tt.pod.UID), Inputs{Now: podtest.At(0), Eviction: tt.ev})
			if a.KillPod != tt.wantKill || a.Done != tt.wantDone || a.KillPodReason != tt.wantReason || a.Starts() != tt.wantStarting {
				t.Errorf("KillPod, Done, reason, starts = %v, %v, %q, %v; want %v, %v, %q, %v",
					a.KillPod, a.Done, a.KillPodReason, a.Starts(), tt.wantKill, tt.wantDone, tt.wantReason, tt.wantStarting)
			}
			if tt.wantReason != "" && a.KillPodMessage != ev.Message {
				t.Errorf("message = %q", a.KillPodMessage)
			}
		})
	}
}

func TestStopGracePeriod(t *testing.T) {
	tests := []struct {
		name string
		pod  *v1.Pod
		ev   *Eviction
		want int64
	}{
		{name: "not evicted: the pod's", pod: podtest.NewPod(), want: DefaultGracePeriodSeconds},
		{name: "hard eviction: one second", pod: podtest.NewPod(), ev: &Eviction{GracePeriodSeconds: 1}, want: 1},
		{name: "an eviction's zero is one second", pod: podtest.NewPod(), ev: &Eviction{}, want: 1},
		{name: "soft eviction shorter than the pod's", pod: podtest.NewPod(), ev: &Eviction{GracePeriodSeconds: 10}, want: 10},
		{name: "never longer than the pod's own",
			pod: podtest.NewPod(func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5) }),
			ev:  &Eviction{GracePeriodSeconds: 10}, want: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StopGracePeriod(tt.pod, tt.ev); got != tt.want {
				t.Errorf("StopGracePeriod = %d, want %d", got, tt.want)
			}
		})
	}
}

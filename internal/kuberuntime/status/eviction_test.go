package status

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/kuberuntime/planner"
	"github.com/nodelet/nodelet/internal/kuberuntime/podtest"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/kuberuntime/statetest"
)

func TestComputePodStatusEvicted(t *testing.T) {
	pod := podtest.NewPod(podtest.StartedAt(podtest.At(0)))
	ready := []state.Sandbox{statetest.Sandbox("s1", 0)}
	stopped := []state.Sandbox{statetest.NotReady(statetest.Sandbox("s1", 0))}
	ev := &planner.Eviction{Message: `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `, GracePeriodSeconds: 1}
	shutdown := &planner.Eviction{Reason: "Terminated", Message: "Pod was terminated in response to imminent node shutdown.", GracePeriodSeconds: 20}
	tests := []struct {
		name       string
		rt         state.PodRuntime
		ev         *planner.Eviction
		wantPhase  v1.PodPhase
		wantReason string
		wantTarget bool
	}{
		{name: "not evicted: running, no DisruptionTarget",
			rt: statetest.Runtime(ready, statetest.Running(pod, "app", "s1", 0)), wantPhase: v1.PodRunning},
		{name: "evicted while its containers stop: the phase waits, the condition is there",
			rt: statetest.Runtime(ready, statetest.Running(pod, "app", "s1", 0)), ev: ev, wantPhase: v1.PodRunning, wantTarget: true},
		{name: "evicted and stopped: Failed, Evicted, the message",
			rt: statetest.Runtime(stopped, statetest.Exited(pod, "app", "s1", 0, 137, podtest.At(time.Second))), ev: ev,
			wantPhase: v1.PodFailed, wantReason: planner.ReasonEvicted, wantTarget: true},
		{name: "a container that succeeded does not make an evicted pod succeed",
			rt: statetest.Runtime(stopped, statetest.Exited(pod, "app", "s1", 0, 0, podtest.At(time.Second))), ev: ev,
			wantPhase: v1.PodFailed, wantReason: planner.ReasonEvicted, wantTarget: true},
		{name: "stopped for a node shutdown: Failed, the shutdown's reason and message",
			rt: statetest.Runtime(stopped, statetest.Exited(pod, "app", "s1", 0, 0, podtest.At(time.Second))), ev: shutdown,
			wantPhase: v1.PodFailed, wantReason: "Terminated", wantTarget: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ComputePodStatus(pod, tt.rt, state.NewPodState(pod.UID), Inputs{Now: podtest.At(2 * time.Second), Eviction: tt.ev})
			if s.Phase != tt.wantPhase || s.Reason != tt.wantReason {
				t.Errorf("phase, reason = %s, %q; want %s, %q", s.Phase, s.Reason, tt.wantPhase, tt.wantReason)
			}
			if tt.wantReason != "" && s.Message != tt.ev.Message {
				t.Errorf("message = %q", s.Message)
			}
			c := findCondition(s.Conditions, v1.DisruptionTarget)
			if (c != nil) != tt.wantTarget {
				t.Fatalf("DisruptionTarget = %+v, want one: %v", c, tt.wantTarget)
			}
			if c != nil && (c.Status != v1.ConditionTrue || c.Reason != ReasonTerminationByKubelet || c.Message != tt.ev.Message) {
				t.Errorf("DisruptionTarget = %+v", c)
			}
		})
	}
}

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

func TestComputePodStatusActiveDeadline(t *testing.T) {
	pod := podtest.NewPod(podtest.Deadline(5), podtest.StartedAt(podtest.At(0)))
	withSidecar := podtest.NewPod(podtest.Deadline(5), podtest.StartedAt(podtest.At(0)), podtest.Sidecars("proxy"))
	ready := []state.Sandbox{statetest.Sandbox("s1", 0)}
	stopped := []state.Sandbox{statetest.NotReady(statetest.Sandbox("s1", 0))}
	killed := statetest.Exited(pod, "app", "s1", 0, 137, podtest.At(6*time.Second))
	succeeded := statetest.Exited(pod, "app", "s1", 0, 0, podtest.At(6*time.Second))
	tests := []struct {
		name       string
		in         statetest.Scene
		wantPhase  v1.PodPhase
		wantReason string
	}{
		{name: "before the deadline the pod runs",
			in:        statetest.Scene{Pod: pod, RT: statetest.Runtime(ready, statetest.Running(pod, "app", "s1", 0)), Now: podtest.At(4 * time.Second)},
			wantPhase: v1.PodRunning},
		{name: "past the deadline while its containers stop, the phase waits",
			in: statetest.Scene{Pod: pod, RT: statetest.Runtime(ready, statetest.Running(pod, "app", "s1", 0)), Now: podtest.At(6 * time.Second)}, wantPhase: v1.PodRunning},
		{name: "past the deadline a sidecar still stopping holds the phase",
			in: statetest.Scene{Pod: withSidecar, RT: statetest.Runtime(ready, statetest.Running(withSidecar, "proxy", "s1", 0), statetest.Exited(withSidecar, "app", "s1", 0, 137, podtest.At(6*time.Second))),
				Now: podtest.At(7 * time.Second)},
			wantPhase: v1.PodRunning},
		{name: "once everything stopped the pod failed with DeadlineExceeded",
			in: statetest.Scene{Pod: pod, RT: statetest.Runtime(stopped, killed), Now: podtest.At(7 * time.Second)}, wantPhase: v1.PodFailed, wantReason: planner.ReasonDeadlineExceeded},
		{name: "a container that succeeded does not make a pod stopped by its deadline succeed",
			in: statetest.Scene{Pod: pod, RT: statetest.Runtime(stopped, succeeded), Now: podtest.At(7 * time.Second)}, wantPhase: v1.PodFailed, wantReason: planner.ReasonDeadlineExceeded},
		{name: "once failed it stays failed with its reason",
			in: statetest.Scene{Pod: pod, RT: statetest.Runtime(stopped, killed), Now: podtest.At(time.Hour),
				St: state.PodState{LastStatus: &v1.PodStatus{Phase: v1.PodFailed, Reason: planner.ReasonDeadlineExceeded, Message: planner.MessageDeadlineExceeded, StartTime: pod.Status.StartTime}}},
			wantPhase: v1.PodFailed, wantReason: planner.ReasonDeadlineExceeded},
		{name: "a pod that succeeded before its deadline keeps its phase",
			in: statetest.Scene{Pod: podtest.NewPod(podtest.Deadline(5), podtest.StartedAt(podtest.At(0)), podtest.Policy(v1.RestartPolicyNever)), RT: statetest.Runtime(stopped, succeeded), Now: podtest.At(time.Hour),
				St: state.PodState{LastStatus: &v1.PodStatus{Phase: v1.PodSucceeded, StartTime: pod.Status.StartTime}}},
			wantPhase: v1.PodSucceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ComputePodStatus(tt.in.Pod, tt.in.RT, tt.in.St, Inputs{Now: tt.in.Now})
			if s.Phase != tt.wantPhase || s.Reason != tt.wantReason {
				t.Errorf("phase, reason = %s, %q; want %s, %q", s.Phase, s.Reason, tt.wantPhase, tt.wantReason)
			}
			if tt.wantReason == planner.ReasonDeadlineExceeded && s.Message != planner.MessageDeadlineExceeded {
				t.Errorf("message = %q", s.Message)
			}
			if s.Phase == v1.PodFailed {
				for _, cs := range s.ContainerStatuses {
					if cs.State.Waiting != nil {
						t.Errorf("container %s waiting (%s) in a failed pod", cs.Name, cs.State.Waiting.Reason)
					}
				}
			}
		})
	}
}

package status

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/kuberuntime/planner"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

func TestComputePodStatusActiveDeadline(t *testing.T) {
	pod := newPod(deadline(5), startedAt(at(0)))
	withSidecar := newPod(deadline(5), startedAt(at(0)), sidecars("proxy"))
	ready := []state.Sandbox{sb("s1", 0)}
	stopped := []state.Sandbox{notReady(sb("s1", 0))}
	killed := exitedC(pod, "app", "s1", 0, 137, at(6*time.Second))
	succeeded := exitedC(pod, "app", "s1", 0, 0, at(6*time.Second))
	tests := []struct {
		name       string
		pod        *v1.Pod
		rt         state.PodRuntime
		st         state.PodState
		now        time.Time
		wantPhase  v1.PodPhase
		wantReason string
	}{
		{name: "before the deadline the pod runs", pod: pod, rt: rtOf(ready, runningC(pod, "app", "s1", 0)),
			now: at(4 * time.Second), wantPhase: v1.PodRunning},
		{name: "past the deadline while its containers stop, the phase waits",
			pod: pod, rt: rtOf(ready, runningC(pod, "app", "s1", 0)), now: at(6 * time.Second), wantPhase: v1.PodRunning},
		{name: "past the deadline a sidecar still stopping holds the phase",
			pod: withSidecar, rt: rtOf(ready, runningC(withSidecar, "proxy", "s1", 0), exitedC(withSidecar, "app", "s1", 0, 137, at(6*time.Second))),
			now: at(7 * time.Second), wantPhase: v1.PodRunning},
		{name: "once everything stopped the pod failed with DeadlineExceeded",
			pod: pod, rt: rtOf(stopped, killed), now: at(7 * time.Second), wantPhase: v1.PodFailed, wantReason: planner.ReasonDeadlineExceeded},
		{name: "a container that succeeded does not make a pod stopped by its deadline succeed",
			pod: pod, rt: rtOf(stopped, succeeded), now: at(7 * time.Second), wantPhase: v1.PodFailed, wantReason: planner.ReasonDeadlineExceeded},
		{name: "once failed it stays failed with its reason",
			pod: pod, rt: rtOf(stopped, killed), now: at(time.Hour),
			st:        state.PodState{LastStatus: &v1.PodStatus{Phase: v1.PodFailed, Reason: planner.ReasonDeadlineExceeded, Message: planner.MessageDeadlineExceeded, StartTime: pod.Status.StartTime}},
			wantPhase: v1.PodFailed, wantReason: planner.ReasonDeadlineExceeded},
		{name: "a pod that succeeded before its deadline keeps its phase",
			pod: newPod(deadline(5), startedAt(at(0)), policy(v1.RestartPolicyNever)), rt: rtOf(stopped, succeeded), now: at(time.Hour),
			st:        state.PodState{LastStatus: &v1.PodStatus{Phase: v1.PodSucceeded, StartTime: pod.Status.StartTime}},
			wantPhase: v1.PodSucceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ComputePodStatus(tt.pod, tt.rt, tt.st, Inputs{Now: tt.now})
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

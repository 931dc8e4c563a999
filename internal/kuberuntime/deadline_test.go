package kuberuntime

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func deadline(seconds int64) podOpt {
	return func(pod *v1.Pod) { pod.Spec.ActiveDeadlineSeconds = ptr.To(seconds) }
}

func startedAt(t time.Time) podOpt {
	return func(pod *v1.Pod) {
		st := metav1.NewTime(t)
		pod.Status.StartTime = &st
	}
}

func TestActiveDeadline(t *testing.T) {
	start := metav1.NewTime(at(0))
	tests := []struct {
		name     string
		pod      *v1.Pod
		start    *metav1.Time
		now      time.Time
		wantPast bool
		wantLeft time.Duration
	}{
		{name: "no deadline", pod: newPod(), start: &start, now: at(time.Hour)},
		{name: "no start time yet: the whole deadline is left",
			pod: newPod(deadline(5)), now: at(time.Hour), wantLeft: 5 * time.Second},
		{name: "zero start time counts as none",
			pod: newPod(deadline(5)), start: &metav1.Time{}, now: at(time.Hour), wantLeft: 5 * time.Second},
		{name: "before the deadline",
			pod: newPod(deadline(5)), start: &start, now: at(2 * time.Second), wantLeft: 3 * time.Second},
		{name: "at the deadline", pod: newPod(deadline(5)), start: &start, now: at(5 * time.Second), wantPast: true},
		{name: "after the deadline", pod: newPod(deadline(5)), start: &start, now: at(time.Minute), wantPast: true},
		{name: "a zero deadline is past at once", pod: newPod(deadline(0)), start: &start, now: at(0), wantPast: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			past, left := ActiveDeadline(tt.pod, tt.start, tt.now)
			if past != tt.wantPast || left != tt.wantLeft {
				t.Errorf("ActiveDeadline = %v, %v; want %v, %v", past, left, tt.wantPast, tt.wantLeft)
			}
		})
	}
}

func TestComputePodActionsActiveDeadline(t *testing.T) {
	running := newPod(deadline(5), startedAt(at(0)))
	withSidecar := newPod(deadline(5), startedAt(at(0)), sidecars("proxy"))
	ready := []Sandbox{sb("s1", 0)}
	lastStarted := PodState{LastStatus: &v1.PodStatus{StartTime: ptr.To(metav1.NewTime(at(0)))}}
	lastFailed := PodState{LastStatus: &v1.PodStatus{Phase: v1.PodFailed, StartTime: ptr.To(metav1.NewTime(at(0)))}}
	tests := []struct {
		name        string
		pod         *v1.Pod
		rt          PodRuntime
		st          PodState
		now         time.Time
		want        planSummary
		wantReason  string
		wantRequeue time.Duration
	}{
		{name: "before the deadline the pod runs and is requeued at it",
			pod: running, rt: rtOf(ready, runningC(running, "app", "s1", 0)), now: at(2 * time.Second),
			wantRequeue: 3 * time.Second},
		{name: "a fresh pod without start time is requeued after its whole deadline",
			pod: newPod(deadline(5)), now: at(0),
			want:        planSummary{KillPod: true, CreateSandbox: true, Start: []string{"app"}},
			wantRequeue: 5 * time.Second},
		{name: "the start time last written counts when the API's is not seen yet",
			pod: newPod(deadline(5)), st: lastStarted, rt: rtOf(ready, runningC(running, "app", "s1", 0)), now: at(6 * time.Second),
			want: planSummary{KillPod: true}, wantReason: ReasonDeadlineExceeded},
		{name: "past the deadline the running pod is killed with the reason",
			pod: running, rt: rtOf(ready, runningC(running, "app", "s1", 0)), now: at(5 * time.Second),
			want: planSummary{KillPod: true}, wantReason: ReasonDeadlineExceeded},
		{name: "past the deadline sidecars are killed with the pod, not restarted",
			pod: withSidecar, rt: rtOf(ready, runningC(withSidecar, "proxy", "s1", 0), exitedC(withSidecar, "app", "s1", 0, 1, at(time.Second))),
			now:  at(10 * time.Second),
			want: planSummary{KillPod: true}, wantReason: ReasonDeadlineExceeded},
		{name: "past the deadline a crashed container is not restarted",
			pod: running, rt: rtOf(ready, exitedC(running, "app", "s1", 0, 1, at(time.Second))), now: at(10 * time.Second),
			want: planSummary{KillPod: true}, wantReason: ReasonDeadlineExceeded},
		{name: "past the deadline with nothing left running the pod is done",
			pod: running, rt: rtOf([]Sandbox{notReady(sb("s1", 0))}, exitedC(running, "app", "s1", 0, 137, at(6*time.Second))),
			now: at(10 * time.Second), want: planSummary{Done: true}, wantReason: ReasonDeadlineExceeded},
		{name: "a pod already failed is only finished, whatever its deadline",
			pod: newPod(deadline(5), startedAt(at(0)), phase(v1.PodFailed)), st: lastFailed,
			rt: rtOf([]Sandbox{notReady(sb("s1", 0))}), now: at(10 * time.Second), want: planSummary{Done: true}},
		{name: "no deadline, no requeue",
			pod: newPod(startedAt(at(0))), rt: rtOf(ready, runningC(running, "app", "s1", 0)), now: at(time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := ComputePodActions(tt.pod, tt.rt, tt.st, tt.now, ProbeResults{})
			if got := summarize(a); !equalSummary(got, tt.want) {
				t.Errorf("plan = %+v, want %+v", got, tt.want)
			}
			if a.KillPodReason != tt.wantReason {
				t.Errorf("KillPodReason = %q, want %q", a.KillPodReason, tt.wantReason)
			}
			if tt.wantReason != "" && a.KillPodMessage != MessageDeadlineExceeded {
				t.Errorf("KillPodMessage = %q", a.KillPodMessage)
			}
			if a.RequeueAfter != tt.wantRequeue {
				t.Errorf("RequeueAfter = %v, want %v", a.RequeueAfter, tt.wantRequeue)
			}
		})
	}
}

func TestComputePodStatusActiveDeadline(t *testing.T) {
	pod := newPod(deadline(5), startedAt(at(0)))
	withSidecar := newPod(deadline(5), startedAt(at(0)), sidecars("proxy"))
	ready := []Sandbox{sb("s1", 0)}
	stopped := []Sandbox{notReady(sb("s1", 0))}
	killed := exitedC(pod, "app", "s1", 0, 137, at(6*time.Second))
	succeeded := exitedC(pod, "app", "s1", 0, 0, at(6*time.Second))
	tests := []struct {
		name       string
		pod        *v1.Pod
		rt         PodRuntime
		st         PodState
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
			pod: pod, rt: rtOf(stopped, killed), now: at(7 * time.Second), wantPhase: v1.PodFailed, wantReason: ReasonDeadlineExceeded},
		{name: "a container that succeeded does not make a pod stopped by its deadline succeed",
			pod: pod, rt: rtOf(stopped, succeeded), now: at(7 * time.Second), wantPhase: v1.PodFailed, wantReason: ReasonDeadlineExceeded},
		{name: "once failed it stays failed with its reason",
			pod: pod, rt: rtOf(stopped, killed), now: at(time.Hour),
			st:        PodState{LastStatus: &v1.PodStatus{Phase: v1.PodFailed, Reason: ReasonDeadlineExceeded, Message: MessageDeadlineExceeded, StartTime: pod.Status.StartTime}},
			wantPhase: v1.PodFailed, wantReason: ReasonDeadlineExceeded},
		{name: "a pod that succeeded before its deadline keeps its phase",
			pod: newPod(deadline(5), startedAt(at(0)), policy(v1.RestartPolicyNever)), rt: rtOf(stopped, succeeded), now: at(time.Hour),
			st:        PodState{LastStatus: &v1.PodStatus{Phase: v1.PodSucceeded, StartTime: pod.Status.StartTime}},
			wantPhase: v1.PodSucceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ComputePodStatus(tt.pod, tt.rt, tt.st, StatusInputs{Now: tt.now})
			if s.Phase != tt.wantPhase || s.Reason != tt.wantReason {
				t.Errorf("phase, reason = %s, %q; want %s, %q", s.Phase, s.Reason, tt.wantPhase, tt.wantReason)
			}
			if tt.wantReason == ReasonDeadlineExceeded && s.Message != MessageDeadlineExceeded {
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

func equalSummary(a, b planSummary) bool {
	return a.KillPod == b.KillPod && a.CreateSandbox == b.CreateSandbox && a.Done == b.Done &&
		slices.Equal(a.Init, b.Init) && slices.Equal(a.Start, b.Start) && slices.Equal(a.Kill, b.Kill) && len(a.BackingOff) == len(b.BackingOff)
}

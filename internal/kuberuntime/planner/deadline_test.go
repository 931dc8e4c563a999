package planner

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

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
	ready := []state.Sandbox{sb("s1", 0)}
	lastStarted := state.PodState{LastStatus: &v1.PodStatus{StartTime: ptr.To(metav1.NewTime(at(0)))}}
	lastFailed := state.PodState{LastStatus: &v1.PodStatus{Phase: v1.PodFailed, StartTime: ptr.To(metav1.NewTime(at(0)))}}
	tests := []struct {
		name        string
		pod         *v1.Pod
		rt          state.PodRuntime
		st          state.PodState
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
			pod: running, rt: rtOf([]state.Sandbox{notReady(sb("s1", 0))}, exitedC(running, "app", "s1", 0, 137, at(6*time.Second))),
			now: at(10 * time.Second), want: planSummary{Done: true}, wantReason: ReasonDeadlineExceeded},
		{name: "a pod already failed is only finished, whatever its deadline",
			pod: newPod(deadline(5), startedAt(at(0)), phase(v1.PodFailed)), st: lastFailed,
			rt: rtOf([]state.Sandbox{notReady(sb("s1", 0))}), now: at(10 * time.Second), want: planSummary{Done: true}},
		{name: "no deadline, no requeue",
			pod: newPod(startedAt(at(0))), rt: rtOf(ready, runningC(running, "app", "s1", 0)), now: at(time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := ComputePodActions(tt.pod, tt.rt, tt.st, Inputs{Now: tt.now})
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

func equalSummary(a, b planSummary) bool {
	return a.KillPod == b.KillPod && a.CreateSandbox == b.CreateSandbox && a.Done == b.Done &&
		slices.Equal(a.Init, b.Init) && slices.Equal(a.Start, b.Start) && slices.Equal(a.Kill, b.Kill) && len(a.BackingOff) == len(b.BackingOff)
}

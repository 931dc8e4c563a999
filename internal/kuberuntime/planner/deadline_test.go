package planner

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/kuberuntime/podtest"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/kuberuntime/statetest"
)

func TestActiveDeadline(t *testing.T) {
	start := metav1.NewTime(podtest.At(0))
	tests := []struct {
		name     string
		pod      *v1.Pod
		start    *metav1.Time
		now      time.Time
		wantPast bool
		wantLeft time.Duration
	}{
		{name: "no deadline", pod: podtest.NewPod(), start: &start, now: podtest.At(time.Hour)},
		{name: "no start time yet: the whole deadline is left",
			pod: podtest.NewPod(podtest.Deadline(5)), now: podtest.At(time.Hour), wantLeft: 5 * time.Second},
		{name: "zero start time counts as none",
			pod: podtest.NewPod(podtest.Deadline(5)), start: &metav1.Time{}, now: podtest.At(time.Hour), wantLeft: 5 * time.Second},
		{name: "before the deadline",
			pod: podtest.NewPod(podtest.Deadline(5)), start: &start, now: podtest.At(2 * time.Second), wantLeft: 3 * time.Second},
		{name: "at the deadline", pod: podtest.NewPod(podtest.Deadline(5)), start: &start, now: podtest.At(5 * time.Second), wantPast: true},
		{name: "after the deadline", pod: podtest.NewPod(podtest.Deadline(5)), start: &start, now: podtest.At(time.Minute), wantPast: true},
		{name: "a zero deadline is past at once", pod: podtest.NewPod(podtest.Deadline(0)), start: &start, now: podtest.At(0), wantPast: true},
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
	running := podtest.NewPod(podtest.Deadline(5), podtest.StartedAt(podtest.At(0)))
	withSidecar := podtest.NewPod(podtest.Deadline(5), podtest.StartedAt(podtest.At(0)), podtest.Sidecars("proxy"))
	ready := []state.Sandbox{statetest.Sandbox("s1", 0)}
	lastStarted := state.PodState{LastStatus: &v1.PodStatus{StartTime: ptr.To(metav1.NewTime(podtest.At(0)))}}
	lastFailed := state.PodState{LastStatus: &v1.PodStatus{Phase: v1.PodFailed, StartTime: ptr.To(metav1.NewTime(podtest.At(0)))}}
	tests := []struct {
		name        string
		in          statetest.Scene
		want        planSummary
		wantReason  string
		wantRequeue time.Duration
	}{
		{name: "before the deadline the pod runs and is requeued at it",
			in:          statetest.Scene{Pod: running, RT: statetest.Runtime(ready, statetest.Running(running, "app", "s1", 0)), Now: podtest.At(2 * time.Second)},
			wantRequeue: 3 * time.Second},
		{name: "a fresh pod without start time is requeued after its whole deadline",
			in:          statetest.Scene{Pod: podtest.NewPod(podtest.Deadline(5)), Now: podtest.At(0)},
			want:        planSummary{KillPod: true, CreateSandbox: true, Start: []string{"app"}},
			wantRequeue: 5 * time.Second},
		{name: "the start time last written counts when the API's is not seen yet",
			in:   statetest.Scene{Pod: podtest.NewPod(podtest.Deadline(5)), St: lastStarted, RT: statetest.Runtime(ready, statetest.Running(running, "app", "s1", 0)), Now: podtest.At(6 * time.Second)},
			want: planSummary{KillPod: true}, wantReason: ReasonDeadlineExceeded},
		{name: "past the deadline the running pod is killed with the reason",
			in:   statetest.Scene{Pod: running, RT: statetest.Runtime(ready, statetest.Running(running, "app", "s1", 0)), Now: podtest.At(5 * time.Second)},
			want: planSummary{KillPod: true}, wantReason: ReasonDeadlineExceeded},
		{name: "past the deadline sidecars are killed with the pod, not restarted",
			in: statetest.Scene{Pod: withSidecar, RT: statetest.Runtime(ready, statetest.Running(withSidecar, "proxy", "s1", 0), statetest.Exited(withSidecar, "app", "s1", 0, 1, podtest.At(time.Second))),
				Now: podtest.At(10 * time.Second)},
			want: planSummary{KillPod: true}, wantReason: ReasonDeadlineExceeded},
		{name: "past the deadline a crashed container is not restarted",
			in:   statetest.Scene{Pod: running, RT: statetest.Runtime(ready, statetest.Exited(running, "app", "s1", 0, 1, podtest.At(time.Second))), Now: podtest.At(10 * time.Second)},
			want: planSummary{KillPod: true}, wantReason: ReasonDeadlineExceeded},
		{name: "past the deadline with nothing left running the pod is done",
			in: statetest.Scene{Pod: running, RT: statetest.Runtime([]state.Sandbox{statetest.NotReady(statetest.Sandbox("s1", 0))}, statetest.Exited(running, "app", "s1", 0, 137, podtest.At(6*time.Second))),
				Now: podtest.At(10 * time.Second)},
			want: planSummary{Done: true}, wantReason: ReasonDeadlineExceeded},
		{name: "a pod already failed is only finished, whatever its deadline",
			in: statetest.Scene{Pod: podtest.NewPod(podtest.Deadline(5), podtest.StartedAt(podtest.At(0)), podtest.Phase(v1.PodFailed)), St: lastFailed,
				RT: statetest.Runtime([]state.Sandbox{statetest.NotReady(statetest.Sandbox("s1", 0))}), Now: podtest.At(10 * time.Second)},
			want: planSummary{Done: true}},
		{name: "no deadline, no requeue",
			in: statetest.Scene{Pod: podtest.NewPod(podtest.StartedAt(podtest.At(0))), RT: statetest.Runtime(ready, statetest.Running(running, "app", "s1", 0)), Now: podtest.At(time.Hour)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := ComputePodActions(tt.in.Pod, tt.in.RT, tt.in.St, Inputs{Now: tt.in.Now})
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

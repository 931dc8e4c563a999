package kuberuntime

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

// TestCrashLoopBackOffSequence drives a container that exits a second after
// each start through the plan and the state updates: the first restart is
// immediate, then the waits double from 10s up to 5m, and a run of more than
// 10 minutes starts the sequence over.
func TestCrashLoopBackOffSequence(t *testing.T) {
	got := crashLoopWaits(t, 9)
	want := []time.Duration{0, 0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("waits before each start (-want +got):\n%s", diff)
	}
}

func TestCrashLoopBackOffCap(t *testing.T) {
	for _, tt := range []struct {
		limit time.Duration
		want  []time.Duration
	}{
		{time.Second, []time.Duration{0, 0, time.Second, time.Second, time.Second}},
		{30 * time.Second, []time.Duration{0, 0, 10 * time.Second, 20 * time.Second, 30 * time.Second}},
	} {
		SetMaxCrashLoopBackOff(tt.limit)
		got := crashLoopWaits(t, len(tt.want))
		SetMaxCrashLoopBackOff(0)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("cap %v: waits before each start (-want +got):\n%s", tt.limit, diff)
		}
	}
}

func TestCrashLoopBackOffStartsOver(t *testing.T) {
	pod := newPod()
	st := NewPodState(pod.UID)
	rt := rtOf([]Sandbox{sb("s1", 0)})
	now := t0
	run := func(runFor time.Duration) time.Duration {
		t.Helper()
		// Wait until the plan starts the container, then let it run and exit.
		var waited time.Duration
		for {
			a := ComputePodActions(pod, rt, st, now, ProbeResults{})
			if len(a.ContainersToStart) == 1 {
				start := a.ContainersToStart[0]
				st.RecordStart(start, now)
				c := runningC(pod, "app", "s1", start.RestartCount)
				c.StartedAt = now
				now = now.Add(runFor)
				c.State, c.ExitCode, c.FinishedAt = ContainerExited, 1, now
				rt.Containers = append(rt.Containers, c)
				return waited
			}
			b, ok := a.BackingOff["app"]
			if !ok {
				t.Fatalf("neither started nor backing off at %v: %+v", now, a)
			}
			step := b.Until.Sub(now)
			waited += step
			now = b.Until
		}
	}
	for range 9 {
		run(time.Second)
	}
	run(11 * time.Minute)
	if got := run(time.Second); got != 0 {
		t.Errorf("after a long run the restart waited %v, want 0", got)
	}
	if got := run(time.Second); got != 10*time.Second {
		t.Errorf("the next restart waited %v, want 10s", got)
	}
}

// crashLoopWaits runs a container that exits after a second n times and
// returns how long the plan made each start wait.
func crashLoopWaits(t *testing.T, n int) []time.Duration {
	t.Helper()
	pod := newPod()
	st := NewPodState(pod.UID)
	rt := rtOf([]Sandbox{sb("s1", 0)})
	now := t0
	var got []time.Duration
	for range n {
		var waited time.Duration
		for {
			a := ComputePodActions(pod, rt, st, now, ProbeResults{})
			if len(a.ContainersToStart) == 1 {
				start := a.ContainersToStart[0]
				st.RecordStart(start, now)
				c := runningC(pod, "app", "s1", start.RestartCount)
				c.StartedAt = now
				now = now.Add(time.Second)
				c.State, c.ExitCode, c.FinishedAt = ContainerExited, 1, now
				rt.Containers = append(rt.Containers, c)
				break
			}
			b, ok := a.BackingOff["app"]
			if !ok {
				t.Fatalf("neither started nor backing off at %v: %+v", now, a)
			}
			waited += b.Until.Sub(now)
			now = b.Until
		}
		got = append(got, waited)
	}
	return got
}

func TestCrashLoopBackOff(t *testing.T) {
	b := BackOff{Delay: 40 * time.Second, Updated: at(0)}
	tests := []struct {
		name            string
		b               BackOff
		finished, now   time.Time
		in              bool
		remaining, diff time.Duration
	}{
		{"no back-off yet", BackOff{}, at(time.Second), at(2 * time.Second), false, 0, 0},
		{"within the delay", b, at(10 * time.Second), at(20 * time.Second), true, 30 * time.Second, 40 * time.Second},
		{"delay over", b, at(10 * time.Second), at(50 * time.Second), false, 0, 40 * time.Second},
		{"ran over ten minutes", b, at(11 * time.Minute), at(11*time.Minute + time.Second), false, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, remaining, delay := CrashLoopBackOff(tt.b, tt.finished, tt.now)
			if in != tt.in || remaining != tt.remaining || delay != tt.diff {
				t.Errorf("got (%v, %v, %v), want (%v, %v, %v)", in, remaining, delay, tt.in, tt.remaining, tt.diff)
			}
		})
	}
}

func TestImagePullBackOffSequence(t *testing.T) {
	st := NewPodState("uid-1")
	now := t0
	var delays []time.Duration
	for range 7 {
		st.RecordFailure("app", ReasonErrImagePull, "not found", now)
		_, remaining, _ := ImagePullBackOff(st.Containers["app"].ImageBackOff, now)
		delays = append(delays, remaining)
		now = now.Add(remaining)
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second}
	if diff := cmp.Diff(want, delays); diff != "" {
		t.Fatalf("delays (-want +got):\n%s", diff)
	}
	now = now.Add(11 * time.Minute)
	st.RecordFailure("app", ReasonErrImagePull, "not found", now)
	if got := st.Containers["app"].ImageBackOff.Delay; got != 10*time.Second {
		t.Errorf("after a quiet period the delay is %v, want 10s", got)
	}

	// A pull that succeeds (the start goes ahead) clears the back-off: the
	// next failure waits 10s again, and another container is not held back.
	st.RecordFailure("app", ReasonErrImagePull, "not found", now)
	now = now.Add(20 * time.Second)
	st.RecordStart(ContainerStart{Name: "app"}, now)
	st.RecordFailure("app", ReasonErrImagePull, "gone", now)
	if got := st.Containers["app"].ImageBackOff.Delay; got != 10*time.Second {
		t.Errorf("after a successful pull the next delay is %v, want 10s", got)
	}
	if in, _, _ := ImagePullBackOff(st.Containers["other"].ImageBackOff, now); in {
		t.Error("another container is in back-off")
	}
}

func TestPodStateRecords(t *testing.T) {
	pod := newPod(inits("setup"))
	st := NewPodState(pod.UID)
	st.RecordSandbox("s1", 2)
	st.RecordStart(ContainerStart{Name: "app", RestartCount: 0}, at(0))
	st.RecordFailure("app", ReasonCreateContainerConfigError, `configmap "cfg" not found`, at(time.Second))
	if got := nextRestartCount(PodRuntime{}, st, "app"); got != 0 {
		t.Errorf("after a failure before creation the next restart count is %d, want 0", got)
	}
	if !st.StartFailed() {
		t.Error("StartFailed is false after a CreateContainerConfigError")
	}
	st.RecordStart(ContainerStart{Name: "app", RestartCount: 0}, at(2*time.Second))
	if st.StartFailed() {
		t.Error("StartFailed is still true after a start")
	}
	if got := nextRestartCount(PodRuntime{}, st, "app"); got != 1 {
		t.Errorf("after a start the next restart count is %d, want 1", got)
	}
	if st.Containers["app"].Waiting != nil {
		t.Error("a start clears the recorded failure")
	}
	st.Containers["gone"] = ContainerRecord{}
	st.Forget(pod)
	if _, ok := st.Containers["gone"]; ok {
		t.Error("Forget kept a container no longer in the spec")
	}
	st.RecordStatus(v1.PodStatus{Phase: v1.PodRunning})

	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var back PodState
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	if diff := cmp.Diff(st, back); diff != "" {
		t.Errorf("JSON round trip (-want +got):\n%s", diff)
	}
}

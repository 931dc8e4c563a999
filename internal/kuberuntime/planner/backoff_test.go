package planner

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodelet/nodelet/internal/kuberuntime/podtest"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/kuberuntime/statetest"
)

// TestCrashLoopBackOffSequence drives a container that exits a second after
// each start through the plan and the state updates: the first restart is
// immediate, then the waits double from 10s up to 5m, and a run of more than
// 10 minutes starts the sequence over.
func TestCrashLoopBackOffSequence(t *testing.T) {
	got := crashLoopWaits(t, 9, 0)
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
		got := crashLoopWaits(t, len(tt.want), tt.limit)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("cap %v: waits before each start (-want +got):\n%s", tt.limit, diff)
		}
	}
}

func TestCrashLoopBackOffStartsOver(t *testing.T) {
	pod := podtest.NewPod()
	st := state.NewPodState(pod.UID)
	rt := statetest.Runtime([]state.Sandbox{statetest.Sandbox("s1", 0)})
	now := podtest.T0
	run := func(runFor time.Duration) time.Duration {
		t.Helper()
		// Wait until the plan starts the container, then let it run and exit.
		var waited time.Duration
		for {
			a := ComputePodActions(pod, rt, st, Inputs{Now: now})
			if len(a.ContainersToStart) == 1 {
				start := a.ContainersToStart[0]
				st.RecordStart(start.Name, start.RestartCount, start.PrevFinishedAt, start.MaxCrashLoopBackOff, now)
				c := statetest.Running(pod, "app", "s1", start.RestartCount)
				c.StartedAt = now
				now = now.Add(runFor)
				c.State, c.ExitCode, c.FinishedAt = state.ContainerExited, 1, now
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

// crashLoopWaits runs a container that exits after a second n times, with
// the crash-loop back-off capped at limit, and returns how long the plan
// made each start wait.
func crashLoopWaits(t *testing.T, n int, limit time.Duration) []time.Duration {
	t.Helper()
	pod := podtest.NewPod()
	st := state.NewPodState(pod.UID)
	rt := statetest.Runtime([]state.Sandbox{statetest.Sandbox("s1", 0)})
	now := podtest.T0
	var got []time.Duration
	for range n {
		var waited time.Duration
		for {
			a := ComputePodActions(pod, rt, st, Inputs{Now: now, MaxCrashLoopBackOff: limit})
			if len(a.ContainersToStart) == 1 {
				start := a.ContainersToStart[0]
				st.RecordStart(start.Name, start.RestartCount, start.PrevFinishedAt, start.MaxCrashLoopBackOff, now)
				c := statetest.Running(pod, "app", "s1", start.RestartCount)
				c.StartedAt = now
				now = now.Add(time.Second)
				c.State, c.ExitCode, c.FinishedAt = state.ContainerExited, 1, now
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

// TestImagePullBackOffNamesTheImageThatFailed: a container whose image
// volume's image failed to pull backs off naming that image, not its own.
func TestImagePullBackOffNamesTheImageThatFailed(t *testing.T) {
	pod := podtest.NewPod()
	own := pod.Spec.Containers[0].Image
	for _, tt := range []struct {
		name, failed, want string
	}{
		{name: "the container's own image", failed: "", want: own},
		{name: "an image volume's image", failed: "registry.example/data:1", want: "registry.example/data:1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := state.NewPodState(pod.UID)
			if tt.failed == "" {
				st.RecordFailure("app", state.ReasonErrImagePull, "not found", podtest.T0)
			} else {
				st.RecordVolumeImageFailure("app", tt.failed, state.ReasonErrImagePull, "not found", podtest.T0)
			}
			b, ok := ContainerBackOff(pod, &pod.Spec.Containers[0], state.PodRuntime{}, st, podtest.T0.Add(time.Second), 0)
			if !ok || b.Reason != state.ReasonImagePullBackOff {
				t.Fatalf("got %+v, %v; want an image pull back-off", b, ok)
			}
			if b.Image != tt.want {
				t.Errorf("back-off image %q, want %q", b.Image, tt.want)
			}
			if want := `Back-off pulling image "` + tt.want + `": not found`; b.Message != want {
				t.Errorf("message %q, want %q", b.Message, want)
			}
		})
	}
}

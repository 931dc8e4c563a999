package state

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodelet/nodelet/internal/kuberuntime/podtest"
)

func TestCrashLoopBackOff(t *testing.T) {
	b := BackOff{Delay: 40 * time.Second, Updated: podtest.At(0)}
	tests := []struct {
		name            string
		b               BackOff
		finished, now   time.Time
		in              bool
		remaining, diff time.Duration
	}{
		{"no back-off yet", BackOff{}, podtest.At(time.Second), podtest.At(2 * time.Second), false, 0, 0},
		{"within the delay", b, podtest.At(10 * time.Second), podtest.At(20 * time.Second), true, 30 * time.Second, 40 * time.Second},
		{"delay over", b, podtest.At(10 * time.Second), podtest.At(50 * time.Second), false, 0, 40 * time.Second},
		{"ran over ten minutes", b, podtest.At(11 * time.Minute), podtest.At(11*time.Minute + time.Second), false, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, remaining, delay := CrashLoopBackOff(tt.b, tt.finished, tt.now, 0)
			if in != tt.in || remaining != tt.remaining || delay != tt.diff {
				t.Errorf("got (%v, %v, %v), want (%v, %v, %v)", in, remaining, delay, tt.in, tt.remaining, tt.diff)
			}
		})
	}
}

func TestImagePullBackOffSequence(t *testing.T) {
	st := NewPodState("uid-1")
	now := podtest.T0
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
	st.RecordStart("app", 0, time.Time{}, 0, now)
	st.RecordFailure("app", ReasonErrImagePull, "gone", now)
	if got := st.Containers["app"].ImageBackOff.Delay; got != 10*time.Second {
		t.Errorf("after a successful pull the next delay is %v, want 10s", got)
	}
	if in, _, _ := ImagePullBackOff(st.Containers["other"].ImageBackOff, now); in {
		t.Error("another container is in back-off")
	}
}

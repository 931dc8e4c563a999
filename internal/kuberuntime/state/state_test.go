package state

import (
	"testing"
	"time"

	"github.com/nodelet/nodelet/internal/kuberuntime/podtest"
)

func TestBeginTermination(t *testing.T) {
	st := PodState{}
	st.BeginTermination(30, podtest.At(0))
	st.BeginTermination(30, podtest.At(10*time.Second))
	if got := st.Terminating.Deadline; !got.Equal(podtest.At(30 * time.Second)) {
		t.Errorf("a repeated delete moved the deadline to %v", got)
	}
	st.BeginTermination(1, podtest.At(12*time.Second))
	if got := st.Terminating.Deadline; !got.Equal(podtest.At(13 * time.Second)) {
		t.Errorf("a shorter grace period left the deadline at %v", got)
	}
	if got := st.Terminating.StopTimeout(podtest.At(12 * time.Second)); got != MinimumGracePeriodSeconds {
		t.Errorf("StopTimeout = %d, want the minimum", got)
	}
	st.RecordPreStopDone("c1", podtest.At(13*time.Second))
	st.RecordPreStopDone("c1", podtest.At(13*time.Second))
	if got := st.Terminating.PreStopDone; len(got) != 1 {
		t.Errorf("PreStopDone = %v, want one entry", got)
	}
}

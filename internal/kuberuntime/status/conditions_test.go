package status

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/kuberuntime/podtest"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/kuberuntime/statetest"
)

func TestSandboxFailureShownUntilASandboxIsCreated(t *testing.T) {
	pod := podtest.NewPod()
	st := state.NewPodState(pod.UID)
	st.RecordSandboxFailure("Failed to create pod sandbox: creating pod log directory: file name too long", podtest.At(0))
	s := ComputePodStatus(pod, state.PodRuntime{}, st, Inputs{Now: podtest.At(time.Second)})
	c := condition(s, v1.PodReadyToStartContainers)
	if c.Status != v1.ConditionFalse || c.Message != st.SandboxFailure.Message {
		t.Errorf("condition = %s %q, want False with the failure", c.Status, c.Message)
	}
	st.RecordSandbox("s1", 0)
	if st.SandboxFailure != nil {
		t.Errorf("a created sandbox must clear the failure")
	}
	s = ComputePodStatus(pod, statetest.Runtime([]state.Sandbox{statetest.Sandbox("s1", 0)}), st, Inputs{Now: podtest.At(2 * time.Second)})
	if c := condition(s, v1.PodReadyToStartContainers); c.Status != v1.ConditionTrue {
		t.Errorf("condition = %s %q, want True", c.Status, c.Message)
	}
}

func TestMountFailureShownUntilASandboxIsCreated(t *testing.T) {
	pod := podtest.NewPod()
	st := state.NewPodState(pod.UID)
	msg := `MountVolume.SetUp failed for volume "cfg" : configmap "cfg" not found`
	st.RecordMountFailure(msg, podtest.At(0))
	s := ComputePodStatus(pod, state.PodRuntime{}, st, Inputs{Now: podtest.At(time.Second)})
	if c := condition(s, v1.PodReadyToStartContainers); c.Status != v1.ConditionFalse || c.Message != msg {
		t.Errorf("condition = %s %q, want False with the mount failure", c.Status, c.Message)
	}
	if st.SandboxFailure.Reason != state.ReasonFailedMount {
		t.Errorf("reason = %q, want %s", st.SandboxFailure.Reason, state.ReasonFailedMount)
	}
}

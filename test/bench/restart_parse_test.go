package bench

import (
	"slices"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestParseAgents(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"", []string{nodeletAgentName, kubeletAgentName}, false},
		{"kubelet", []string{kubeletAgentName}, false},
		{" nodelet , kubelet", []string{nodeletAgentName, kubeletAgentName}, false},
		{"kubemark", nil, true},
	} {
		got, err := parseAgents(tc.in)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("parseAgents(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseSignal(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    syscall.Signal
		wantErr bool
	}{
		{"", syscall.SIGKILL, false},
		{"kill", syscall.SIGKILL, false},
		{"SIGTERM", syscall.SIGTERM, false},
		{"HUP", 0, true},
	} {
		got, err := parseSignal(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parseSignal(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestContainersChanged counts a container restarted in place (its restart
// count) and one replaced (its ID), not one left alone.
func TestContainersChanged(t *testing.T) {
	pod := func(statuses ...corev1.ContainerStatus) *corev1.Pod {
		p := &corev1.Pod{}
		p.Status.ContainerStatuses = statuses
		return p
	}
	before := containersOf(pod(
		corev1.ContainerStatus{Name: "a", ContainerID: "containerd://1"},
		corev1.ContainerStatus{Name: "b", ContainerID: "containerd://2"},
		corev1.ContainerStatus{Name: "c", ContainerID: "containerd://3"},
	))
	after := containersOf(pod(
		corev1.ContainerStatus{Name: "a", ContainerID: "containerd://1"},
		corev1.ContainerStatus{Name: "b", ContainerID: "containerd://2", RestartCount: 1},
		corev1.ContainerStatus{Name: "c", ContainerID: "containerd://4"},
	))
	if n := after.changedFrom(before); n != 2 {
		t.Fatalf("changedFrom = %d, want 2", n)
	}
	if n := before.changedFrom(before); n != 0 {
		t.Fatalf("changedFrom itself = %d, want 0", n)
	}
}

package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWaitsForObjects(t *testing.T) {
	running := corev1.ContainerStatus{Name: "a", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	configError := corev1.ContainerStatus{Name: "b", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError"}}}
	crashed := corev1.ContainerStatus{Name: "b", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}
	pod := func(phase corev1.PodPhase, deleted bool, statuses ...corev1.ContainerStatus) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}, {Name: "b"}}}}
		p.Status.Phase, p.Status.ContainerStatuses = phase, statuses
		if deleted {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	runningB := running
	runningB.Name = "b"
	for _, tc := range []struct {
		name         string
		pod          *corev1.Pod
		volumesSetUp bool
		want         bool
	}{
		{"volumes not set up", pod(corev1.PodPending, false), false, true},
		{"no status yet", pod(corev1.PodPending, false), true, true},
		{"a container waits for an env object", pod(corev1.PodPending, false, running, configError), true, true},
		{"a container crash-loops", pod(corev1.PodRunning, false, running, crashed), true, true},
		{"every container runs", pod(corev1.PodRunning, false, running, runningB), true, false},
		{"being deleted", pod(corev1.PodRunning, true, running, configError), false, false},
		{"finished", pod(corev1.PodSucceeded, false), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := waitsForObjects(tc.pod, tc.volumesSetUp); got != tc.want {
				t.Errorf("waitsForObjects = %v, want %v", got, tc.want)
			}
		})
	}
}

package controller

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/internal/volume"
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

func TestVolumeUpdateFailures(t *testing.T) {
	missingCM := &volume.SetUpError{Volume: "cfg", Err: &volume.MissingObjectError{Kind: "configmap", Name: "app"}}
	missingSecret := &volume.SetUpError{Volume: "proj", Err: &volume.MissingObjectError{Kind: "secret", Name: "creds"}}
	diskFull := &volume.SetUpError{Volume: "sec", Err: errors.New("writing volume content: no space left on device")}
	for _, tc := range []struct {
		name     string
		err      error
		messages []string
		retry    bool
	}{
		{name: "updated"},
		{
			name: "a required object is gone: report, keep the files, wait for it",
			err:  missingCM, messages: []string{`MountVolume.SetUp failed for volume "cfg" : configmap "app" not found`},
		},
		{
			name: "several volumes lack their objects",
			err:  fmt.Errorf("updating volumes of pod ns/web: %w", errors.Join(missingCM, missingSecret)),
			messages: []string{
				`MountVolume.SetUp failed for volume "cfg" : configmap "app" not found`,
				`MountVolume.SetUp failed for volume "proj" : secret "creds" not found`,
			},
		},
		{
			name: "another failure is retried",
			err:  errors.Join(missingCM, diskFull),
			messages: []string{
				`MountVolume.SetUp failed for volume "cfg" : configmap "app" not found`,
				`MountVolume.SetUp failed for volume "sec" : writing volume content: no space left on device`,
			},
			retry: true,
		},
		{name: "not a volume's failure is retried, without an Event", err: errors.New("context canceled"), retry: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			messages, retry := volumeUpdateFailures(tc.err)
			if !slices.Equal(messages, tc.messages) {
				t.Errorf("messages = %q, want %q", messages, tc.messages)
			}
			if (retry != nil) != tc.retry {
				t.Errorf("retry = %v, want an error: %v", retry, tc.retry)
			}
			if retry != nil && !errors.Is(retry, tc.err) {
				t.Errorf("retry = %v, want the update's error %v", retry, tc.err)
			}
		})
	}
}

func TestVolumeRetry(t *testing.T) {
	unbound := &volume.SetUpError{Volume: "data", Err: errors.New("PVC is not bound"), Stage: volume.StageProcess}
	mount := &volume.SetUpError{Volume: "cm", Err: errors.New(`configmap "x" not found`)}
	tests := []struct {
		name string
		err  error
		want time.Duration
	}{
		{name: "no error", want: 0},
		{name: "a claim waiting to be bound", err: fmt.Errorf("setting up volumes: %w", unbound), want: volumeProcessRetry},
		{name: "a claim among other failures", err: fmt.Errorf("setting up volumes: %w", errors.Join(mount, unbound)), want: volumeProcessRetry},
		{name: "a mount failure alone keeps the back-off", err: fmt.Errorf("setting up volumes: %w", mount), want: 0},
		{name: "another error", err: errors.New("sandbox failed"), want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := volumeRetry(tt.err); got != tt.want {
				t.Errorf("volumeRetry = %v, want %v", got, tt.want)
			}
		})
	}
}

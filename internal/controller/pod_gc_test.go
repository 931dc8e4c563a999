package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestVolumeImagesAreThoseOfUnfinishedPods(t *testing.T) {
	pod := func(phase corev1.PodPhase, refs ...string) *corev1.Pod {
		p := &corev1.Pod{Status: corev1.PodStatus{Phase: phase}}
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		for _, r := range refs {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: r, VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: r}}})
		}
		return p
	}
	got := volumeImages([]*corev1.Pod{
		pod(corev1.PodRunning, "data:1", "models:2"),
		pod(corev1.PodPending, "data:3"),
		pod(corev1.PodSucceeded, "done:1"),
		pod(corev1.PodFailed, "failed:1"),
		pod(corev1.PodRunning),
	})
	if diff := cmp.Diff([]string{"data:1", "models:2", "data:3"}, got); diff != "" {
		t.Errorf("volumeImages (-want +got):\n%s", diff)
	}
}

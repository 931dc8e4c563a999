package controller

import (
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestOtherUID(t *testing.T) {
	pods := schema.GroupKind{Kind: "Pod"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"the UID is immutable", apierrors.NewInvalid(pods, "p", field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), "x", "field is immutable")}), true},
		{"wrapped", fmt.Errorf("patching: %w", apierrors.NewInvalid(pods, "p", field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), "x", "field is immutable")})), true},
		{"another field is invalid", apierrors.NewInvalid(pods, "p", field.ErrorList{field.Invalid(field.NewPath("status", "podIPs"), "x", "bad")}), false},
		{"a conflict", apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("x")), false},
		{"not an API error", errors.New("metadata.uid"), false},
	} {
		if got := otherUID(tc.err); got != tc.want {
			t.Errorf("%s: otherUID = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestOwnStatusWrite(t *testing.T) {
	started := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC))
	running := corev1.PodStatus{
		Phase: corev1.PodRunning,
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "c", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		}},
	}
	old := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", ResourceVersion: "10", Labels: map[string]string{"a": "b"}},
		Spec:       corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	// echo is what the API server answers to the write of running: the
	// times at the second it keeps.
	echo := func(mutate func(*corev1.Pod)) *corev1.Pod {
		p := old.DeepCopy()
		p.ResourceVersion = "11"
		p.Status = *running.DeepCopy()
		p.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(started.Truncate(time.Second))
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		written string            // resourceVersion of the last answered write
		writing *corev1.PodStatus // the write under way
		new     *corev1.Pod
		want    bool
	}{
		{"the answered write's resourceVersion", "11", nil, echo(nil), true},
		{"a later resourceVersion, nothing under way", "11", nil, echo(func(p *corev1.Pod) { p.ResourceVersion = "12" }), false},
		{"nothing written", "", nil, echo(nil), false},
		{"before the answer: the status being written", "", &running, echo(nil), true},
		{"before the answer: another status", "", &running, echo(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), false},
		{"before the answer: a condition another writer owns", "", &running, echo(func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: "example.com/gate", Status: corev1.ConditionTrue})
		}), false},
		{"before the answer: a label changed too", "", &running, echo(func(p *corev1.Pod) { p.Labels["a"] = "c" }), false},
		{"before the answer: the pod is being deleted", "", &running, echo(func(p *corev1.Pod) {
			now := metav1.Now()
			p.DeletionTimestamp = &now
		}), false},
		{"before the answer: the spec changed", "", &running, echo(func(p *corev1.Pod) { p.Spec.Containers[0].Image = "busybox:2" }), false},
		{"before the answer: another pod of the name", "", &running, echo(func(p *corev1.Pod) { p.UID = "u2" }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &PodReconciler{}
			if tc.written != "" {
				r.written.Store(tc.new.UID, tc.written)
			}
			if tc.writing != nil {
				r.writing.Store(tc.new.UID, *tc.writing)
			}
			if got := r.ownStatusWrite(old, tc.new); got != tc.want {
				t.Errorf("ownStatusWrite = %v, want %v", got, tc.want)
			}
		})
	}
}

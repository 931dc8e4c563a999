package nodeinfo

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestConditionEvents(t *testing.T) {
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s}
	}
	healthy := []corev1.NodeCondition{
		cond(corev1.NodeMemoryPressure, corev1.ConditionFalse), cond(corev1.NodeDiskPressure, corev1.ConditionFalse),
		cond(corev1.NodePIDPressure, corev1.ConditionFalse), cond(corev1.NodeReady, corev1.ConditionTrue),
	}
	for _, tc := range []struct {
		name       string
		prev, next []corev1.NodeCondition
		want       []string
	}{
		{name: "registration", next: healthy,
			want: []string{"NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID", "NodeReady"}},
		{name: "unchanged", prev: healthy, next: healthy},
		{name: "memory pressure and not ready", prev: healthy, next: []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionTrue), cond(corev1.NodeDiskPressure, corev1.ConditionFalse),
			cond(corev1.NodePIDPressure, corev1.ConditionTrue), cond(corev1.NodeReady, corev1.ConditionFalse),
		}, want: []string{"NodeHasInsufficientMemory", "NodeHasInsufficientPID", "NodeNotReady"}},
		{name: "disk pressure", prev: healthy, next: []corev1.NodeCondition{cond(corev1.NodeDiskPressure, corev1.ConditionTrue)},
			want: []string{"NodeHasDiskPressure"}},
		{name: "Unknown, set by the controller-manager, back to True", prev: []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionUnknown)},
			next: []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionTrue)}, want: []string{"NodeReady"}},
		{name: "a condition nodelet does not own", next: []corev1.NodeCondition{cond("NetworkUnavailable", corev1.ConditionFalse)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ConditionEvents("n1", tc.prev, tc.next)
			if len(got) != len(tc.want) {
				t.Fatalf("events %+v, want reasons %q", got, tc.want)
			}
			for i, e := range got {
				if e.Reason != tc.want[i] || e.Type != corev1.EventTypeNormal || e.Message != "Node n1 status is now: "+tc.want[i] {
					t.Errorf("event %d = %+v, want reason %s", i, e, tc.want[i])
				}
			}
		})
	}
}

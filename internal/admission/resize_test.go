package admission

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestFitsResize(t *testing.T) {
	// The pod being resized is among the admitted pods, with its old
	// allocation: it must not count against itself.
	self := pod("self", requests("500m", "1Gi"))
	cases := []struct {
		name       string
		pod        *v1.Pod
		node       *v1.Node
		admitted   []*v1.Pod
		wantReason string // empty: fits
		wantMsg    string
	}{
		{name: "alone on the node", pod: pod("self", requests("1500m", "3Gi")), node: node(110, "2", "4Gi"),
			admitted: []*v1.Pod{self}},
		{name: "up to the last millicore", pod: pod("self", requests("1500m", "1Gi")), node: node(110, "2", "4Gi"),
			admitted: []*v1.Pod{self, pod("other", requests("500m", "1Gi"))}},
		{name: "too much cpu next to the others", pod: pod("self", requests("1600m", "1Gi")), node: node(110, "2", "4Gi"),
			admitted:   []*v1.Pod{self, pod("other", requests("500m", "1Gi"))},
			wantReason: v1.PodReasonDeferred, wantMsg: "Node didn't have enough resource: cpu, requested: 1600, used: 500, capacity: 2000"},
		{name: "too much memory next to the others", pod: pod("self", requests("500m", "3500Mi")), node: node(110, "2", "4Gi"),
			admitted:   []*v1.Pod{self, pod("other", requests("500m", "1Gi"))},
			wantReason: v1.PodReasonDeferred, wantMsg: "Node didn't have enough resource: memory, requested: 3670016000, used: 1073741824, capacity: 4294967296"},
		{name: "terminal pods leave room", pod: pod("self", requests("1600m", "1Gi")), node: node(110, "2", "4Gi"),
			admitted: []*v1.Pod{self, pod("done", requests("500m", "1Gi"), phase(v1.PodSucceeded))}},
		{name: "more than the node has", pod: pod("self", requests("3", "1Gi")), node: node(110, "2", "4Gi"),
			admitted:   []*v1.Pod{self},
			wantReason: v1.PodReasonInfeasible, wantMsg: "Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000"},
		{name: "more than the node has, with others", pod: pod("self", requests("1", "5Gi")), node: node(110, "2", "4Gi"),
			admitted:   []*v1.Pod{self, pod("other", requests("1500m", "1Gi"))},
			wantReason: v1.PodReasonInfeasible, wantMsg: "Node didn't have enough capacity: memory, requested: 5368709120, capacity: 4294967296"},
		{name: "pod count does not matter", pod: pod("self", requests("1", "1Gi")), node: node(2, "2", "4Gi"),
			admitted: []*v1.Pod{self, pod("a"), pod("b")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := FitsResize(tc.pod, tc.node, tc.admitted, nil)
			if r.Admit != (tc.wantReason == "") || r.Reason != tc.wantReason || r.Message != tc.wantMsg {
				t.Errorf("FitsResize = %+v, want reason %q message %q", r, tc.wantReason, tc.wantMsg)
			}
		})
	}
}

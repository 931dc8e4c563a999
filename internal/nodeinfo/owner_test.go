package nodeinfo

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestForeignAgent(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	node := func(version string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: version}}}
	}
	lease := func(ago time.Duration) *coordinationv1.Lease {
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](40),
			RenewTime: &metav1.MicroTime{Time: now.Add(-ago)}}}
	}
	tests := []struct {
		name  string
		node  *corev1.Node
		lease *coordinationv1.Lease
		want  string // substring; empty: not foreign
	}{
		{"no node", nil, nil, ""},
		{"node without a lease", node("v1.37.0"), nil, ""},
		{"a live kubelet", node("v1.37.0"), lease(5 * time.Second), `node "n" is run by another agent (kubeletVersion v1.37.0, lease renewed 5s ago)`},
		{"a kubelet gone for longer than its lease", node("v1.37.0"), lease(time.Minute), ""},
		{"nodelet's own node", node("v1.37.0+nodelet.v0.1.0"), lease(time.Second), ""},
		{"registered, never reported", node(""), lease(time.Second), ""},
	}
	for _, tt := range tests {
		got := ForeignAgent(tt.node, tt.lease, now)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: ForeignAgent = %q, want %q", tt.name, got, tt.want)
		}
	}
}

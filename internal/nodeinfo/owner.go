package nodeinfo

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	nodeletversion "github.com/nodelet/nodelet/internal/version"
)

// ForeignAgent returns why node must not be taken over, or "": it reports
// the version of an agent that is not nodelet (a kubelet) and its lease was
// renewed less than a lease duration ago, so that agent is alive and would
// fight nodelet for every pod of the node. A node nobody renews (its agent
// is gone), one last run by nodelet, and a missing Node or Lease are fine.
func ForeignAgent(node *corev1.Node, lease *coordinationv1.Lease, now time.Time) string {
	if node == nil || lease == nil {
		return ""
	}
	version := node.Status.NodeInfo.KubeletVersion
	if version == "" || nodeletversion.IsNodelet(version) {
		return ""
	}
	if lease.Spec.RenewTime == nil {
		return ""
	}
	duration := 40 * time.Second
	if d := lease.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		duration = time.Duration(*d) * time.Second
	}
	age := now.Sub(lease.Spec.RenewTime.Time)
	if age >= duration {
		return ""
	}
	return fmt.Sprintf("node %q is run by another agent (kubeletVersion %s, lease renewed %s ago): give nodelet a node name of its own (nodeName)",
		node.Name, version, age.Round(time.Second))
}

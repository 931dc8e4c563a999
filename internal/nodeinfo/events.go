package nodeinfo

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Node event reasons, the kubelet's: recorded on the Node when a condition
// nodelet owns first appears or changes status, and at start.
const (
	EventStarting                  = "Starting"
	EventNodeReady                 = "NodeReady"
	EventNodeNotReady              = "NodeNotReady"
	EventNodeHasSufficientMemory   = "NodeHasSufficientMemory"
	EventNodeHasInsufficientMemory = "NodeHasInsufficientMemory"
	EventNodeHasNoDiskPressure     = "NodeHasNoDiskPressure"
	EventNodeHasDiskPressure       = "NodeHasDiskPressure"
	EventNodeHasSufficientPID      = "NodeHasSufficientPID"
	EventNodeHasInsufficientPID    = "NodeHasInsufficientPID"
)

// NodeEvent is an Event to record on the Node.
type NodeEvent struct {
	Type, Reason, Message string
}

// conditionEventReasons are the reasons of each owned condition's status:
// {when True, when False}.
var conditionEventReasons = map[corev1.NodeConditionType][2]string{
	corev1.NodeMemoryPressure: {EventNodeHasInsufficientMemory, EventNodeHasSufficientMemory},
	corev1.NodeDiskPressure:   {EventNodeHasDiskPressure, EventNodeHasNoDiskPressure},
	corev1.NodePIDPressure:    {EventNodeHasInsufficientPID, EventNodeHasSufficientPID},
	corev1.NodeReady:          {EventNodeReady, EventNodeNotReady},
}

// ConditionEvents returns, in next's order, the kubelet's event for each
// condition nodelet owns whose status in next is new or differs from
// prev's: "Node <name> status is now: <reason>", of type Normal as the
// kubelet records them.
func ConditionEvents(node string, prev, next []corev1.NodeCondition) []NodeEvent {
	was := make(map[corev1.NodeConditionType]corev1.ConditionStatus, len(prev))
	for _, c := range prev {
		was[c.Type] = c.Status
	}
	var out []NodeEvent
	for _, c := range next {
		reasons, owned := conditionEventReasons[c.Type]
		if !owned || c.Status == corev1.ConditionUnknown {
			continue
		}
		if old, ok := was[c.Type]; ok && old == c.Status {
			continue
		}
		reason := reasons[1]
		if c.Status == corev1.ConditionTrue {
			reason = reasons[0]
		}
		out = append(out, NodeEvent{Type: corev1.EventTypeNormal, Reason: reason,
			Message: fmt.Sprintf("Node %s status is now: %s", node, reason)})
	}
	return out
}

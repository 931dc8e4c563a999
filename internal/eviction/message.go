package eviction

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// Reason is the pod status reason and the Event reason of an eviction, and
// the reason of a pod refused under node pressure (the kubelet's).
const Reason = "Evicted"

// Event reasons and condition values the kubelet uses.
const (
	// EventThresholdMet is the Node Event of a threshold being met.
	EventThresholdMet = "EvictionThresholdMet"
	// ConditionReasonTerminationByKubelet is the reason of the pod's
	// DisruptionTarget condition.
	ConditionReasonTerminationByKubelet = "TerminationByKubelet"
)

// The kubelet's message formats.
const (
	nodeLowMessageFmt              = "The node was low on resource: %v. "
	thresholdMetMessageFmt         = "Threshold quantity: %v, available: %v. "
	containerMessageFmt            = "Container %s was using %s, request is %s, has larger consumption of %v. "
	nodeConditionMessageFmt        = "The node had condition: %v. "
	emptyDirMessageFmt             = "Usage of EmptyDir volume %q exceeds the limit %q. "
	podEphemeralStorageMessageFmt  = "Pod ephemeral local storage usage exceeds the total limit of containers %s. "
	containerEphemeralStorageMsFmt = "Container %s exceeded its local ephemeral storage limit %q. "
	thresholdMetEventMessageFmt    = "Attempting to reclaim %s"
)

// ThresholdMetEventMessage is the message of the EvictionThresholdMet
// Event.
func ThresholdMetEventMessage(t Threshold) string {
	return fmt.Sprintf(thresholdMetEventMessageFmt, t.Signal.Resource())
}

// Message is the eviction message of a pod evicted for threshold t
// observed as o: the resource the node was low on, the threshold and what
// was available, and each container that used more memory or local
// storage than it requested.
func Message(t Threshold, o Observation, p PodUsage) string {
	res := t.Signal.Resource()
	msg := fmt.Sprintf(nodeLowMessageFmt, res)
	if o.Capacity > 0 {
		msg += fmt.Sprintf(thresholdMetMessageFmt, quantity(t.Value.Of(o.Capacity)), quantity(o.Available))
	}
	if res != v1.ResourceMemory && res != v1.ResourceEphemeralStorage {
		return msg
	}
	for _, cu := range p.Containers {
		c := containerSpec(p.Pod, cu.Name)
		if c == nil {
			continue
		}
		usage := cu.Memory
		if res == v1.ResourceEphemeralStorage {
			usage = cu.Ephemeral
		}
		if usage == nil {
			continue
		}
		req := c.Resources.Requests[res]
		if u := quantity(*usage); u.Cmp(req) > 0 {
			msg += fmt.Sprintf(containerMessageFmt, c.Name, u.String(), req.String(), res)
		}
	}
	return msg
}

// AdmissionMessage is the message of a pod refused under the given node
// conditions.
func AdmissionMessage(conds []v1.NodeConditionType) string {
	return fmt.Sprintf(nodeConditionMessageFmt, conds)
}

func containerSpec(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}

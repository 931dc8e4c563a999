package status

import (
	v1 "k8s.io/api/core/v1"
)

// ReasonTerminationByKubelet is the reason of the DisruptionTarget
// condition of a pod evicted or stopped for a node shutdown (the
// kubelet's).
const ReasonTerminationByKubelet = "TerminationByKubelet"

// disruptionTarget adds, to the conditions kept, the DisruptionTarget
// condition of an evicted pod (True, TerminationByKubelet, the eviction
// message), as the kubelet sets it when it evicts or stops a pod for a
// node shutdown, replacing one someone else set; a pod not evicted keeps
// what it has.
func (b *statusBuilder) disruptionTarget(conds []v1.PodCondition) []v1.PodCondition {
	if !b.evicted {
		return conds
	}
	c := v1.PodCondition{
		Type:               v1.DisruptionTarget,
		Status:             v1.ConditionTrue,
		Reason:             ReasonTerminationByKubelet,
		Message:            b.in.Eviction.Message,
		ObservedGeneration: b.pod.Generation,
		LastTransitionTime: apiTime(b.in.Now),
	}
	out := conds[:0:0]
	for _, old := range conds {
		if old.Type != v1.DisruptionTarget {
			out = append(out, old)
			continue
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
	}
	return append(out, c)
}

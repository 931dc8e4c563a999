package planner

import (
	v1 "k8s.io/api/core/v1"
)

// ReasonEvicted is the reason of a pod stopped by the eviction manager
// (the kubelet's).
const ReasonEvicted = "Evicted"

// Eviction is the decision of the eviction manager, or of the node
// shutdown manager, to stop a pod for good: the per-pod fact the pod's sync
// holds and the plan and status read. The pod ends Failed with Reason and
// Message and a DisruptionTarget condition (TerminationByKubelet, Message),
// as the kubelet reports the pods it evicts or stops for a node shutdown.
type Eviction struct {
	// Reason is the pod's status reason once stopped; empty is
	// ReasonEvicted.
	Reason string
	// Message is the kubelet's message: the eviction's, or the node
	// shutdown's.
	Message string
	// GracePeriodSeconds is how long the pod's containers may take to
	// stop (at least one second).
	GracePeriodSeconds int64
}

// ReasonOrEvicted is the eviction's reason, ReasonEvicted when it names
// none.
func (e *Eviction) ReasonOrEvicted() string {
	if e.Reason == "" {
		return ReasonEvicted
	}
	return e.Reason
}

// Evicted reports whether a pod that is not finished yet must be stopped
// for good because it was evicted. A pod already in a terminal phase keeps
// that phase and its reason.
func Evicted(pod *v1.Pod, ev *Eviction) bool {
	return ev != nil && !PodFinished(pod)
}

// StopGracePeriod is the grace period to stop a whole pod with: the
// eviction's when it was evicted (and not deleted meanwhile with a shorter
// one), else EffectiveGracePeriod.
func StopGracePeriod(pod *v1.Pod, ev *Eviction) int64 {
	grace := EffectiveGracePeriod(pod)
	if ev != nil && ev.GracePeriodSeconds < grace {
		grace = max(ev.GracePeriodSeconds, 1)
	}
	return grace
}

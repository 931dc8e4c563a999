package planner

import (
	v1 "k8s.io/api/core/v1"
)

// ReasonEvicted is the reason of a pod stopped by the eviction manager
// (the kubelet's).
const ReasonEvicted = "Evicted"

// Eviction is the eviction manager's decision to stop a pod for good: the
// per-pod fact the pod's sync holds and the plan and status read.
type Eviction struct {
	// Message is the kubelet's eviction message.
	Message string
	// GracePeriodSeconds is how long the pod's containers may take to
	// stop (at least one second).
	GracePeriodSeconds int64
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

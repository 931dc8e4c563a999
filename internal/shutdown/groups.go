package shutdown

import (
	"cmp"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/kuberuntime/planner"
)

// The kubelet's words for a pod stopped for a node shutdown.
const (
	// ReasonTerminated is the status reason of a pod stopped for a node
	// shutdown.
	ReasonTerminated = "Terminated"
	// MessageTerminated is its status message, and the message of its
	// DisruptionTarget condition.
	MessageTerminated = "Pod was terminated in response to imminent node shutdown."
)

// Period is the shutdown grace period of the pods whose priority is at
// least Priority and below the next period's.
type Period struct {
	Priority           int32
	GracePeriodSeconds int64
}

// Periods are the node's shutdown grace periods, from the lowest priority
// up, as the kubelet derives them: shutdownGracePeriodByPodPriority when
// byPodPriority (the GracefulNodeShutdownBasedOnPodPriority gate) is on and
// the list is not empty; else two periods from shutdownGracePeriod and
// shutdownGracePeriodCriticalPods, the pods below system-cluster-critical
// priority getting the difference and those at or above it the critical
// part. None (no graceful shutdown) when shutdownGracePeriod is 0.
func Periods(c *v1alpha1.NodeletConfiguration, byPodPriority bool) []Period {
	var out []Period
	if byPodPriority && len(c.ShutdownGracePeriodByPodPriority) > 0 {
		for _, p := range c.ShutdownGracePeriodByPodPriority {
			out = append(out, Period{Priority: p.Priority, GracePeriodSeconds: p.ShutdownGracePeriodSeconds})
		}
	} else {
		out = twoPeriods(c.ShutdownGracePeriod.Duration, c.ShutdownGracePeriodCriticalPods.Duration)
	}
	slices.SortStableFunc(out, func(a, b Period) int { return cmp.Compare(a.Priority, b.Priority) })
	return out
}

// twoPeriods splits total between the pods below system-cluster-critical
// priority and those at or above it, which get critical.
func twoPeriods(total, critical time.Duration) []Period {
	if total == 0 {
		return nil
	}
	regular := total - critical
	if regular < 0 {
		return nil
	}
	return []Period{
		{Priority: 0, GracePeriodSeconds: int64(regular / time.Second)},
		{Priority: admission.SystemCriticalPriority, GracePeriodSeconds: int64(critical / time.Second)},
	}
}

// Total is how long the shutdown is delayed: the sum of the periods.
func Total(periods []Period) time.Duration {
	var sum int64
	for _, p := range periods {
		sum += p.GracePeriodSeconds
	}
	return time.Duration(sum) * time.Second
}

// Group is the pods stopped together, and how long they get.
type Group struct {
	Period
	Pods []*v1.Pod
}

// GroupPods puts each pod in the period of the highest priority at or
// below its own (a pod without a priority has 0); a pod below every period
// goes to the lowest, as the kubelet groups them. periods are sorted by
// priority (Periods); the groups follow them, empty ones included.
func GroupPods(periods []Period, pods []*v1.Pod) []Group {
	groups := make([]Group, len(periods))
	for i, p := range periods {
		groups[i].Period = p
	}
	if len(groups) == 0 {
		return groups
	}
	for _, pod := range pods {
		var prio int32
		if pod.Spec.Priority != nil {
			prio = *pod.Spec.Priority
		}
		// The first period above the pod's priority; the pod belongs to
		// the one before it.
		i, _ := slices.BinarySearchFunc(groups, prio, func(g Group, p int32) int {
			if g.Priority <= p {
				return -1
			}
			return 1
		})
		i = max(i-1, 0)
		groups[i].Pods = append(groups[i].Pods, pod)
	}
	return groups
}

// Eviction is how a pod of group is stopped: with the group's grace period,
// or the pod's terminationGracePeriodSeconds when that is shorter, and the
// kubelet's reason and message.
func Eviction(pod *v1.Pod, group Period) planner.Eviction {
	grace := group.GracePeriodSeconds
	if t := pod.Spec.TerminationGracePeriodSeconds; t != nil && *t <= grace {
		grace = *t
	}
	return planner.Eviction{Reason: ReasonTerminated, Message: MessageTerminated, GracePeriodSeconds: grace}
}

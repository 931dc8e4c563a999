package eviction

import (
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
)

// State is what the decisions remember from one round to the next.
type State struct {
	// FirstMet is when each threshold (by Key) met now was first seen met,
	// for soft thresholds' grace periods.
	FirstMet map[string]time.Time
	// Met are the thresholds that were met (past their grace period) last
	// round: each stays met until its minimum reclaim is available too.
	Met []Threshold
	// ConditionLastObserved is when each pressure condition was last
	// observed.
	ConditionLastObserved map[v1.NodeConditionType]time.Time
}

// Decision is the outcome of one round.
type Decision struct {
	// Met are the thresholds to act on now (soft ones past their grace
	// period, minimum reclaim applied), in eviction priority order.
	Met []Threshold
	// Conditions are the pressure conditions the node reports now:
	// observed now, or within the transition period.
	Conditions []v1.NodeConditionType
}

// Decide folds one round's observations into the state at now, the
// kubelet's way: a threshold is met when its signal is below it; one met
// last round stays met until its minimum reclaim is available too; every
// threshold met (soft ones at once, before their grace period) makes its
// condition observed, and a condition is reported until the transition
// period has passed since it was last observed; soft thresholds are acted
// on only once they have been met for their grace period without a break.
func Decide(cfg Config, prev State, obs Observations, now time.Time) (State, Decision) {
	met := Met(cfg.Thresholds, obs, false)
	for _, t := range Met(prev.Met, obs, true) {
		if !containsKey(met, t) {
			met = append(met, t)
		}
	}
	sortThresholds(met)

	next := State{FirstMet: map[string]time.Time{}, ConditionLastObserved: map[v1.NodeConditionType]time.Time{}}
	for _, t := range met {
		first, ok := prev.FirstMet[t.Key()]
		if !ok {
			first = now
		}
		next.FirstMet[t.Key()] = first
	}
	for c, at := range prev.ConditionLastObserved {
		next.ConditionLastObserved[c] = at
	}
	for _, t := range met {
		next.ConditionLastObserved[t.Signal.Condition()] = now
	}
	var d Decision
	for _, c := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		at, ok := next.ConditionLastObserved[c]
		if !ok {
			continue
		}
		if now.Sub(at) < cfg.TransitionPeriod || at.Equal(now) {
			d.Conditions = append(d.Conditions, c)
		} else {
			delete(next.ConditionLastObserved, c)
		}
	}
	for _, t := range met {
		if t.Soft && now.Sub(next.FirstMet[t.Key()]) < t.GracePeriod {
			continue
		}
		d.Met = append(d.Met, t)
	}
	next.Met = d.Met
	return next, d
}

func containsKey(ts []Threshold, t Threshold) bool {
	return slices.ContainsFunc(ts, func(o Threshold) bool { return o.Key() == t.Key() })
}

// HasCondition reports whether c is among the decision's conditions.
func (d Decision) HasCondition(c v1.NodeConditionType) bool {
	return slices.Contains(d.Conditions, c)
}

// GracePeriodSeconds is how long a pod evicted for t may take to stop:
// one second for a hard threshold; for a soft one the pod's own grace
// period capped by maxPodGracePeriod (evictionMaxPodGracePeriod), as the
// kubelet does; never less than one second.
func GracePeriodSeconds(t Threshold, podGrace, maxPodGracePeriod int64) int64 {
	if !t.Soft {
		return 1
	}
	return max(min(podGrace, maxPodGracePeriod), 1)
}

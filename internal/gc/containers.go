package gc

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
	"github.com/nodelet/nodelet/internal/kuberuntime/planner"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

// ContainerPolicy is the containerGC section of the configuration.
type ContainerPolicy struct {
	// MinAge is how long a container must have existed before it may be
	// removed.
	MinAge time.Duration
	// MaxPerPodContainer is how many dead instances of each container of a
	// live pod are kept; the newest one always is.
	MaxPerPodContainer int
	// MaxContainers bounds the dead containers of the node; negative is no
	// bound.
	MaxContainers int
}

// PodObjects is what the runtime holds of one pod.
type PodObjects struct {
	UID types.UID
	// Runtime holds the pod's sandboxes, newest first, and containers.
	Runtime state.PodRuntime
	// Live is true for a pod that is in the API server or whose worker
	// runs: its newest dead instances and newest sandbox stay.
	Live bool
}

// SelectContainers picks, per pod UID, the dead containers and sandboxes
// container GC removes, in the kubelet's order:
//
//  1. Of a live pod, what the pod's own policy lets go
//     (planner.SelectGarbage: all but the MaxPerPodContainer newest exited
//     instances of each container, once MinAge old); of a gone pod, every
//     exited container MinAge old.
//  2. With MaxContainers >= 0 and more dead containers MinAge old left on
//     the node than that, each (pod, container) keeps at most
//     MaxContainers / (number of such pairs), at least one, its newest; then
//     the oldest go across the node until at most MaxContainers are left.
//     The newest exited instance of each container of a live pod never goes:
//     when those alone are more than MaxContainers, more stay.
//  3. Sandboxes that are not ready and hold no container left, except the
//     newest sandbox of a live pod.
//
// Pods without anything to remove are not in the result.
func SelectContainers(pods []PodObjects, p ContainerPolicy, now time.Time) map[types.UID]plan.Garbage {
	removed := map[string]bool{}
	for _, pod := range pods {
		for _, c := range firstPass(pod, p, now) {
			removed[c.ID] = true
		}
	}
	if p.MaxContainers >= 0 {
		enforceMaxContainers(pods, removed, p, now)
	}
	out := map[types.UID]plan.Garbage{}
	for _, pod := range pods {
		var g plan.Garbage
		for _, c := range pod.Runtime.Containers {
			if removed[c.ID] {
				g.Containers = append(g.Containers, c)
			}
		}
		slices.SortFunc(g.Containers, func(a, b state.Container) int { return cmp.Compare(a.ID, b.ID) })
		g.Sandboxes = planner.SelectDeadSandboxes(pod.Runtime, g.Containers, pod.Live)
		if len(g.Containers) > 0 || len(g.Sandboxes) > 0 {
			out[pod.UID] = g
		}
	}
	return out
}

// SelectAllUnused picks what DeleteAllUnusedContainers removes: every
// exited container MinAge old and every dead sandbox, but the newest exited
// instance of each container of a live pod and the newest sandbox of a
// live pod.
func SelectAllUnused(pods []PodObjects, minAge time.Duration, now time.Time) map[types.UID]plan.Garbage {
	return SelectContainers(pods, ContainerPolicy{MinAge: minAge, MaxPerPodContainer: 1, MaxContainers: -1}, now)
}

// firstPass is step 1 of SelectContainers for one pod.
func firstPass(pod PodObjects, p ContainerPolicy, now time.Time) []state.Container {
	if pod.Live {
		return planner.SelectGarbage(pod.Runtime, planner.GarbagePolicy{
			MinAge: p.MinAge, MaxPerPodContainer: p.MaxPerPodContainer, Now: now,
		}).Containers
	}
	var out []state.Container
	for _, c := range pod.Runtime.Containers {
		if c.State == state.ContainerExited && planner.OldEnough(c, p.MinAge, now) {
			out = append(out, c)
		}
	}
	return out
}

// evictUnit is the dead instances of one container of one pod that may be
// counted against MaxContainers, newest first.
type evictUnit struct {
	dead []state.Container
	// protected is the ID of the instance that never goes (the newest
	// exited instance of a live pod's container), or "".
	protected string
}

// enforceMaxContainers is step 2 of SelectContainers: it adds to removed.
func enforceMaxContainers(pods []PodObjects, removed map[string]bool, p ContainerPolicy, now time.Time) {
	type key struct {
		uid  types.UID
		name string
	}
	units := map[key]*evictUnit{}
	total := 0
	for _, pod := range pods {
		byName := map[string][]state.Container{}
		for _, c := range pod.Runtime.Containers {
			if c.State == state.ContainerExited && !removed[c.ID] {
				byName[c.Name] = append(byName[c.Name], c)
			}
		}
		for name, list := range byName {
			planner.SortNewestFirst(list)
			u := &evictUnit{}
			if pod.Live {
				u.protected = list[0].ID
			}
			for _, c := range list {
				if planner.OldEnough(c, p.MinAge, now) {
					u.dead = append(u.dead, c)
				}
			}
			if len(u.dead) > 0 {
				units[key{pod.UID, name}] = u
				total += len(u.dead)
			}
		}
	}
	if total <= p.MaxContainers {
		return
	}
	perUnit := max(p.MaxContainers/len(units), 1)
	keys := slices.SortedFunc(maps.Keys(units), func(a, b key) int {
		return cmp.Or(cmp.Compare(a.uid, b.uid), cmp.Compare(a.name, b.name))
	})
	var rest []state.Container
	for _, k := range keys {
		u := units[k]
		for i, c := range u.dead {
			switch {
			case c.ID == u.protected:
			case i >= perUnit:
				removed[c.ID] = true
				total--
			default:
				rest = append(rest, c)
			}
		}
	}
	// Oldest first across the node.
	slices.SortStableFunc(rest, func(a, b state.Container) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	for _, c := range rest {
		if total <= p.MaxContainers {
			break
		}
		removed[c.ID] = true
		total--
	}
}

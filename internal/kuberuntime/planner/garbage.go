package planner

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

// GarbagePolicy is what of a pod's dead containers is kept: the
// containerGC fields of the configuration, and the time they are read at.
type GarbagePolicy struct {
	// MinAge is how long a container must have existed (since its
	// creation, as the kubelet counts it) before it may be removed.
	MinAge time.Duration
	// MaxPerPodContainer is how many dead instances of each container are
	// kept, the newest ones; less than 1 counts as 1, for the newest dead
	// instance is the container's lastState and `kubectl logs --previous`.
	MaxPerPodContainer int
	// Now is the time ages are measured at.
	Now time.Time
}

// DefaultGarbagePolicy keeps the newest dead instance of each container,
// whatever its age: the configuration's defaults.
func DefaultGarbagePolicy(now time.Time) GarbagePolicy {
	return GarbagePolicy{MaxPerPodContainer: 1, Now: now}
}

// SelectGarbage picks the dead objects of a live pod that can go, as the
// kubelet's container garbage collection keeps them: of each container the
// p.MaxPerPodContainer newest exited instances stay (the newest one always:
// the container's lastState and `kubectl logs --previous` read it), older
// exited instances go once they are p.MinAge old; created, running and
// unknown instances always stay. A sandbox goes when it is not ready, not
// the newest and holds no container that stays (SelectDeadSandboxes).
func SelectGarbage(rt state.PodRuntime, p GarbagePolicy) plan.Garbage {
	keep := max(p.MaxPerPodContainer, 1)
	var g plan.Garbage
	byName := map[string][]state.Container{}
	for _, c := range rt.Containers {
		byName[c.Name] = append(byName[c.Name], c)
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		list := byName[name]
		SortNewestFirst(list)
		dead := 0
		for _, c := range list {
			if c.State != state.ContainerExited {
				continue
			}
			dead++
			if dead > keep && OldEnough(c, p.MinAge, p.Now) {
				g.Containers = append(g.Containers, c)
			}
		}
	}
	g.Sandboxes = SelectDeadSandboxes(rt, g.Containers, true)
	return g
}

// SelectDeadSandboxes picks the sandboxes of rt (newest first) that are not
// ready and hold no container once removed are gone. With keepNewest, as
// for a pod that still exists, the newest sandbox stays whatever its state:
// the pod's next sync starts from it.
func SelectDeadSandboxes(rt state.PodRuntime, removed []state.Container, keepNewest bool) []string {
	gone := map[string]bool{}
	for _, c := range removed {
		gone[c.ID] = true
	}
	inUse := map[string]bool{}
	for _, c := range rt.Containers {
		if !gone[c.ID] {
			inUse[c.SandboxID] = true
		}
	}
	var out []string
	for i, sb := range rt.Sandboxes {
		if (i > 0 || !keepNewest) && !sb.Ready && !inUse[sb.ID] {
			out = append(out, sb.ID)
		}
	}
	return out
}

// OldEnough reports whether container c was created at least minAge before
// now.
func OldEnough(c state.Container, minAge time.Duration, now time.Time) bool {
	return minAge <= 0 || !c.CreatedAt.Add(minAge).After(now)
}

// SortNewestFirst sorts instances of containers by creation time, newest
// first; ties by attempt, higher first, then by ID.
func SortNewestFirst(list []state.Container) {
	slices.SortStableFunc(list, func(a, b state.Container) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.Attempt, a.Attempt), strings.Compare(a.ID, b.ID))
	})
}

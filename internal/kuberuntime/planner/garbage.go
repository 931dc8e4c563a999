package planner

import (
	"slices"

	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

// SelectGarbage picks the dead objects of a live pod that can go, as the
// kubelet's container garbage collection keeps them: of each container the
// newest instance and the most recent dead one stay (the previous
// instance's lastState and `kubectl logs --previous` read it), older
// exited instances go; a sandbox goes when it is not ready, not the newest
// and holds no container that stays.
func SelectGarbage(rt state.PodRuntime) plan.Garbage {
	var g plan.Garbage
	byName := map[string][]state.Container{}
	for _, c := range rt.Containers {
		byName[c.Name] = append(byName[c.Name], c)
	}
	inUse := map[string]bool{}
	for _, list := range byName {
		slices.SortStableFunc(list, func(a, b state.Container) int { return b.CreatedAt.Compare(a.CreatedAt) })
		keptDead := false
		for i, c := range list {
			dead := c.State == state.ContainerExited
			if i > 0 && dead && keptDead {
				g.Containers = append(g.Containers, c)
				continue
			}
			keptDead = keptDead || dead
			inUse[c.SandboxID] = true
		}
	}
	for i, sb := range rt.Sandboxes {
		if i > 0 && !sb.Ready && !inUse[sb.ID] {
			g.Sandboxes = append(g.Sandboxes, sb.ID)
		}
	}
	return g
}

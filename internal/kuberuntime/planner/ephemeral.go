package planner

import (
	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

// Ephemeral containers (pod.spec.ephemeralContainers, added through the
// pods/ephemeralcontainers subresource by `kubectl debug`) follow the
// kubelet's rules: each runs once, started in the pod's current sandbox
// whether or not the pod is initialized, and is never restarted, whatever
// the restart policy, however it ended; a pod being stopped or about to get
// a new sandbox starts none. They have no probes, ports, resources or
// lifecycle hooks (the API refuses them), are stopped with the pod, and do
// not count for its phase or readiness. One that names a
// targetContainerName shares that container's process namespace.

// ephemeralRan reports whether an ephemeral container was ever created: the
// runtime holds an instance of it, or the state records a creation (its
// instance may have been lost since). Such a container is never started
// again.
func ephemeralRan(rt state.PodRuntime, st state.PodState, name string) bool {
	return rt.Latest(name) != nil || st.Containers[name].Created
}

// planEphemeralContainers plans the start of every ephemeral container that
// never ran, in the current sandbox.
func (p *actionPlanner) planEphemeralContainers() {
	for i := range p.pod.Spec.EphemeralContainers {
		ec := &p.pod.Spec.EphemeralContainers[i]
		if ephemeralRan(p.rt, p.st, ec.Name) {
			continue
		}
		s := plan.ContainerStart{Name: ec.Name, Index: i, Ephemeral: true}
		if ec.TargetContainerName != "" {
			if target := p.rt.Latest(ec.TargetContainerName); target != nil {
				s.TargetID = target.ID
			}
		}
		p.a.EphemeralContainersToStart = append(p.a.EphemeralContainersToStart, s)
	}
}

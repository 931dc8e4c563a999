package status

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/kuberuntime/planner"
)

// phaseCounts tallies container statuses for the phase.
type phaseCounts struct {
	pendingInit, pendingSidecars, failedInit, failedInitFinal   int
	unknown, running, waiting, stopped, stoppedFinal, succeeded int
}

// phase computes the pod phase like the kubelet's getPhase: Pending until
// initialized and every container started, Running while any runs or
// restarts, Succeeded or Failed once all stopped for good. A phase that was
// terminal stays terminal.
func (b *statusBuilder) phase(s v1.PodStatus) v1.PodPhase {
	for _, p := range []v1.PodPhase{b.old.Phase, b.pod.Status.Phase} {
		if p == v1.PodSucceeded || p == v1.PodFailed {
			return p
		}
	}
	p := b.runtimePhase(s)
	if (b.deadline || b.evicted) && b.terminal() {
		// Stopped by the deadline or evicted, however its containers
		// ended.
		return v1.PodFailed
	}
	if b.terminal() && p != v1.PodSucceeded {
		// Stopped for good without succeeding.
		return v1.PodFailed
	}
	return p
}

// terminal reports whether the pod is finished and nothing of it runs.
func (b *statusBuilder) terminal() bool {
	return b.stopping() && len(b.rt.Live()) == 0
}

// stopping reports whether the pod's containers are stopped for good: it
// is deleted, in a terminal phase, evicted, or past its active deadline.
func (b *statusBuilder) stopping() bool {
	return planner.PodFinished(b.pod) || b.deadline || b.evicted
}

func (b *statusBuilder) initialized() bool {
	return planner.Initialized(b.pod, b.rt, b.currentSandboxID())
}

func (b *statusBuilder) runtimePhase(s v1.PodStatus) v1.PodPhase {
	n := b.countPhase(s)
	terminal, initialized := b.terminal(), b.initialized()
	switch {
	case n.failedInitFinal > 0:
		return v1.PodFailed
	case n.pendingInit > 0, n.pendingSidecars > 0 && !initialized, n.waiting > 0:
		return v1.PodPending
	case n.running > 0 && n.unknown == 0:
		return v1.PodRunning
	case n.running == 0 && n.stopped > 0 && n.unknown == 0:
		if terminal || n.stopped == n.stoppedFinal {
			if n.stopped == n.succeeded {
				return v1.PodSucceeded
			}
			return v1.PodFailed
		}
		return v1.PodRunning
	}
	return v1.PodPending
}

func (b *statusBuilder) currentSandboxID() string {
	if sb := b.rt.NewestSandbox(); sb != nil {
		return sb.ID
	}
	return ""
}

func (b *statusBuilder) countPhase(s v1.PodStatus) phaseCounts {
	var n phaseCounts
	for i := range b.pod.Spec.InitContainers {
		c := &b.pod.Spec.InitContainers[i]
		cs := findStatus(s.InitContainerStatuses, c.Name)
		if planner.IsSidecar(c) {
			n.countSidecar(cs)
		} else {
			n.countInit(b.pod, c, cs)
		}
	}
	for i := range b.pod.Spec.Containers {
		c := &b.pod.Spec.Containers[i]
		n.countRegular(b.pod, c, findStatus(s.ContainerStatuses, c.Name))
	}
	return n
}

func (n *phaseCounts) countInit(pod *v1.Pod, c *v1.Container, cs *v1.ContainerStatus) {
	t := lastTerminated(cs)
	switch {
	case cs == nil, cs.State.Running != nil, t == nil:
		n.pendingInit++
	case t.ExitCode != 0:
		n.failedInit++
		if !planner.ShouldRestartExited(pod, c, t.ExitCode) {
			n.failedInitFinal++
		}
	}
}

func (n *phaseCounts) countSidecar(cs *v1.ContainerStatus) {
	switch {
	case cs == nil:
		n.unknown++
	case cs.State.Running != nil:
		if cs.Started == nil || !*cs.Started {
			n.pendingSidecars++
		}
		n.running++
	case cs.State.Terminated != nil, cs.LastTerminationState.Terminated != nil:
		// A stopped sidecar does not count.
	default:
		n.pendingSidecars++
		n.waiting++
	}
}

func (n *phaseCounts) countRegular(pod *v1.Pod, c *v1.Container, cs *v1.ContainerStatus) {
	t := lastTerminated(cs)
	switch {
	case cs == nil:
		n.unknown++
	case cs.State.Running != nil:
		n.running++
	case t != nil:
		n.stopped++
		if !planner.ShouldRestartExited(pod, c, t.ExitCode) {
			n.stoppedFinal++
		}
		if cs.State.Terminated != nil && t.ExitCode == 0 {
			n.succeeded++
		}
	default:
		n.waiting++
	}
}

// lastTerminated is the termination a status reports: its current state, or
// its last one while it waits to restart.
func lastTerminated(cs *v1.ContainerStatus) *v1.ContainerStateTerminated {
	switch {
	case cs == nil:
		return nil
	case cs.State.Terminated != nil:
		return cs.State.Terminated
	case cs.State.Waiting != nil:
		return cs.LastTerminationState.Terminated
	}
	return nil
}

func findStatus(list []v1.ContainerStatus, name string) *v1.ContainerStatus {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

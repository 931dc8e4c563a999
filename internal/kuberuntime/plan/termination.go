package plan

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// TerminationPlan is the next step of stopping a pod for good.
type TerminationPlan struct {
	// PreStop lists the hooks to run now, each once; record each with
	// state.PodState.RecordPreStopDone. A hook may take at most Timeout
	// seconds.
	PreStop []PreStopHook
	// Stop lists the containers to stop now, each after its preStop hook
	// (if listed in PreStop) finished. Recompute the timeout after a hook
	// with state.Termination.StopTimeout.
	Stop []ContainerStop
	// Remove lists the IDs of containers created but never started, to
	// remove now: a runtime cannot stop them (containerd answers a stop
	// of a created container with success and leaves it created), and
	// removed they can never start. They get no Killing event.
	Remove []string
	// StopSandboxes lists the sandboxes to stop once Stop is done.
	StopSandboxes []string
	// RequeueAfter is when to plan again if containers wait for their turn.
	RequeueAfter time.Duration
	// Done: nothing of the pod runs any more.
	Done bool
}

// PreStopHook is a preStop hook to run in a container.
type PreStopHook struct {
	ContainerID string
	Name        string
	Handler     *v1.LifecycleHandler
	// Timeout in seconds: what is left of the grace period.
	Timeout int64
}

// ContainerStop is a container to stop with StopContainer.
type ContainerStop struct {
	ContainerID string
	Name        string
	// Timeout in seconds for StopContainer.
	Timeout int64
}

// StopsAnything reports whether the step stops (or removes) a container or
// stops a sandbox:
// then what waited for them may go next, and the pod is planned again at
// once.
func (p TerminationPlan) StopsAnything() bool {
	return len(p.Stop) > 0 || len(p.Remove) > 0 || len(p.StopSandboxes) > 0
}

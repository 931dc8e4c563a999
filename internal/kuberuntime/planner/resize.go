package planner

import (
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

// In-place resize, as the kubelet does it: the pod runs with its
// allocation (state.AllocatedPod), and the planner brings each running
// container to it, updating its cgroups in place
// (plan.PodActions.ContainersToResize), or restarting it when the resize policy
// of a changed resource says RestartContainer. ResizeInProgress tells the
// state (state.PodState.FinishResize) whether a resize is still under way.

// Event reasons of in-place resizes, the kubelet's.
const (
	EventResizeStarted    = "ResizeStarted"
	EventResizeCompleted  = "ResizeCompleted"
	EventResizeDeferred   = "ResizeDeferred"
	EventResizeInfeasible = "ResizeInfeasible"
	EventResizeError      = "ResizeError"
)

// resizeValues are the values of a container's resources that in-place
// resize changes, in the units the cgroups get them.
type resizeValues struct {
	cpuRequest, cpuLimit       int64 // milli-CPU
	memoryRequest, memoryLimit int64 // bytes
}

func valuesOf(r v1.ResourceRequirements) resizeValues {
	return resizeValues{
		cpuRequest:    r.Requests.Cpu().MilliValue(),
		cpuLimit:      r.Limits.Cpu().MilliValue(),
		memoryRequest: r.Requests.Memory().Value(),
		memoryLimit:   r.Limits.Memory().Value(),
	}
}

// allContainers calls f for the init containers and then the regular
// containers of pod.
func allContainers(pod *v1.Pod, f func(c *v1.Container, init bool)) {
	for i := range pod.Spec.InitContainers {
		f(&pod.Spec.InitContainers[i], true)
	}
	for i := range pod.Spec.Containers {
		f(&pod.Spec.Containers[i], false)
	}
}

// ResizeInProgress reports whether a running container of the pod (the
// allocated pod) does not run with its allocated cpu and memory, or with
// resources nodelet did not record.
func ResizeInProgress(pod *v1.Pod, rt state.PodRuntime, st state.PodState) bool {
	inProgress := false
	allContainers(pod, func(c *v1.Container, _ bool) {
		inst := rt.Latest(c.Name)
		if inst == nil || inst.State != state.ContainerRunning {
			return
		}
		actuated, ok := st.ActuatedResources(c.Name, inst.ID)
		if !ok || valuesOf(actuated) != valuesOf(c.Resources) {
			inProgress = true
		}
	})
	return inProgress
}

// planResize decides how the running instance inst of c (in the allocated
// pod) comes to run with its allocated resources: not at all when it does
// already; a restart (returned with the kill message) when a resource that
// changed has the RestartContainer resize policy and the container may be
// restarted (not a plain init container); else an update in place,
// appended to ContainersToResize. An instance whose resources nodelet did
// not record is updated in place.
func (p *actionPlanner) planResize(c *v1.Container, index int, init bool, inst *state.Container) (restart bool, msg string) {
	want := valuesOf(c.Resources)
	actuated, known := p.st.ActuatedResources(c.Name, inst.ID)
	have := valuesOf(actuated)
	if known && want == have {
		return false, ""
	}
	if known && (!init || IsSidecar(c)) {
		cpu := want.cpuRequest != have.cpuRequest || want.cpuLimit != have.cpuLimit
		memory := want.memoryRequest != have.memoryRequest || want.memoryLimit != have.memoryLimit
		if (cpu && resizeRestarts(c, v1.ResourceCPU)) || (memory && resizeRestarts(c, v1.ResourceMemory)) {
			return true, fmt.Sprintf("Container %s resize requires restart", c.Name)
		}
	}
	p.a.ContainersToResize = append(p.a.ContainersToResize, plan.ContainerResize{
		Name: c.Name, ID: inst.ID, Index: index, Init: init,
		MemoryLimitDecrease: want.memoryLimit != 0 && (!known || have.memoryLimit == 0 || want.memoryLimit < have.memoryLimit),
	})
	return false, ""
}

// resizeRestarts reports whether the container's resize policy restarts it
// when the resource changes (the default is NotRequired).
func resizeRestarts(c *v1.Container, name v1.ResourceName) bool {
	for _, p := range c.ResizePolicy {
		if p.ResourceName == name {
			return p.RestartPolicy == v1.RestartContainer
		}
	}
	return false
}

// ResizeMessage is the message of a resize Event, the kubelet's: prefix
// (such as "Pod resize started"), then the pod's container resources, the
// generation and the error, if any, as JSON.
func ResizeMessage(prefix string, pod *v1.Pod, generation int64, errMsg string) string {
	type container struct {
		Name      string                  `json:"name"`
		Resources v1.ResourceRequirements `json:"resources,omitempty"`
	}
	summary := struct {
		InitContainers []container `json:"initContainers,omitempty"`
		Containers     []container `json:"containers,omitempty"`
		Generation     int64       `json:"generation"`
		Error          string      `json:"error,omitempty"`
	}{Generation: generation, Error: errMsg}
	allContainers(pod, func(c *v1.Container, init bool) {
		if init {
			summary.InitContainers = append(summary.InitContainers, container{c.Name, c.Resources})
		} else {
			summary.Containers = append(summary.Containers, container{c.Name, c.Resources})
		}
	})
	data, err := json.Marshal(summary)
	if err != nil {
		return prefix
	}
	return prefix + ": " + string(data)
}

package kuberuntime

import (
	"encoding/json"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// In-place resize, as the kubelet does it. The resources of a pod's
// containers are allocated when the pod is admitted (PodState.Allocated); a
// spec that asks for others is a resize request, which the node accepts
// (AcceptResize) when the new requests fit next to the other pods, or leaves
// pending (DeferResize: Deferred until they fit, Infeasible when they never
// can). The pod runs with its allocation (AllocatedPod): the plan updates a
// running container's cgroups in place (PodActions.ContainersToResize), or
// restarts it when the resize policy of a changed resource says
// RestartContainer; what each container instance runs with is recorded
// (ContainerRecord.Actuated), so that the status reports it and the resize
// completes (FinishResize) once every running container runs with its
// allocation.

// Event reasons of in-place resizes, the kubelet's.
const (
	EventResizeStarted    = "ResizeStarted"
	EventResizeCompleted  = "ResizeCompleted"
	EventResizeDeferred   = "ResizeDeferred"
	EventResizeInfeasible = "ResizeInfeasible"
	EventResizeError      = "ResizeError"
)

// ResizeCondition is one of the pod's resize conditions (PodResizePending,
// PodResizeInProgress) as nodelet keeps it.
type ResizeCondition struct {
	// Reason is Deferred or Infeasible for a pending resize, Error (or
	// empty) for one in progress.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Generation is the pod generation the condition was set for.
	Generation int64 `json:"generation"`
	// Since is when the reason last changed.
	Since time.Time `json:"since"`
}

// Actuated is what one container instance runs with.
type Actuated struct {
	// ContainerID is the instance the resources were applied to.
	ContainerID string `json:"containerID"`
	// Resources are the container's resources, as created or as last
	// updated in place.
	Resources v1.ResourceRequirements `json:"resources"`
}

// ContainerResize is an in-place update of a running container's
// resources to its allocation.
type ContainerResize struct {
	Name string
	// ID of the running instance.
	ID string
	// Index into pod.Spec.InitContainers when Init, else pod.Spec.Containers.
	Index int
	Init  bool
	// MemoryLimitDecrease: the update lowers the memory limit, or sets one
	// where the container had none or runs with unknown resources; the
	// kubelet does not do that below what the container uses.
	MemoryLimitDecrease bool
}

// Spec returns the container to resize from the (allocated) pod.
func (c ContainerResize) Spec(pod *v1.Pod) *v1.Container {
	if c.Init {
		return &pod.Spec.InitContainers[c.Index]
	}
	return &pod.Spec.Containers[c.Index]
}

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
func allContainers(pod *v1.Pod, f func(c *v1.Container, index int, init bool)) {
	for i := range pod.Spec.InitContainers {
		f(&pod.Spec.InitContainers[i], i, true)
	}
	for i := range pod.Spec.Containers {
		f(&pod.Spec.Containers[i], i, false)
	}
}

// InitAllocation allocates the pod's spec resources when nothing is
// allocated yet: a pod admitted now, or one admitted by a nodelet that kept
// no allocation. It reports whether it changed the state.
func (s *PodState) InitAllocation(pod *v1.Pod) bool {
	if s.Allocated != nil {
		return false
	}
	s.allocate(pod)
	return true
}

func (s *PodState) allocate(pod *v1.Pod) {
	s.Allocated = map[string]v1.ResourceRequirements{}
	allContainers(pod, func(c *v1.Container, _ int, _ bool) {
		s.Allocated[c.Name] = *c.Resources.DeepCopy()
	})
	s.AllocatedGeneration = pod.Generation
}

// AllocatedResources returns the resources allocated to the named
// container: the recorded allocation, else (nothing recorded yet) the
// spec's.
func AllocatedResources(pod *v1.Pod, st PodState, name string) v1.ResourceRequirements {
	if r, ok := st.Allocated[name]; ok {
		return r
	}
	if c := ContainerSpec(pod, name); c != nil {
		return c.Resources
	}
	return v1.ResourceRequirements{}
}

// AllocatedPod returns the pod as it runs: its containers' resources
// replaced by the allocated ones. It returns pod itself when they are the
// same, and never modifies it.
func AllocatedPod(pod *v1.Pod, st PodState) *v1.Pod {
	if !differsFromAllocation(pod, st) {
		return pod
	}
	out := pod.DeepCopy()
	allContainers(out, func(c *v1.Container, _ int, _ bool) {
		if r, ok := st.Allocated[c.Name]; ok {
			c.Resources = *r.DeepCopy()
		}
	})
	return out
}

// ResizeRequested reports whether the pod's spec asks for container
// resources other than the allocated ones. A pod older than the
// allocation (a stale copy of it) asks for nothing.
func ResizeRequested(pod *v1.Pod, st PodState) bool {
	return pod.Generation >= st.AllocatedGeneration && differsFromAllocation(pod, st)
}

// differsFromAllocation reports whether a container of the pod's spec has
// other resources than allocated.
func differsFromAllocation(pod *v1.Pod, st PodState) bool {
	differs := false
	allContainers(pod, func(c *v1.Container, _ int, _ bool) {
		if r, ok := st.Allocated[c.Name]; ok && !equality.Semantic.DeepEqual(r, c.Resources) {
			differs = true
		}
	})
	return differs
}

// AcceptResize allocates the resources the pod's spec asks for. The pod's
// PodResizePending condition goes, and PodResizeInProgress starts for the
// pod's generation, without the error of an earlier resize.
func (s *PodState) AcceptResize(pod *v1.Pod, now time.Time) {
	s.allocate(pod)
	s.ResizePending = nil
	s.ResizeInProgress = &ResizeCondition{Generation: pod.Generation, Since: now}
}

// DeferResize records that the resize the pod's generation asks for is not
// allocated: reason is v1.PodReasonDeferred (it may fit later) or
// v1.PodReasonInfeasible (it never will). It reports whether the reason or
// the generation changed, when the kubelet emits an Event.
func (s *PodState) DeferResize(reason, message string, generation int64, now time.Time) bool {
	old := s.ResizePending
	c := &ResizeCondition{Reason: reason, Message: message, Generation: generation, Since: now}
	if old != nil && old.Reason == reason {
		c.Since = old.Since
	}
	s.ResizePending = c
	return old == nil || old.Reason != reason || old.Generation != generation
}

// ClearPendingResize forgets a pending resize whose request went away in
// the pod's generation (the spec is back at its allocation, or the pod
// stopped); a copy of the pod older than the request clears nothing. It
// reports whether it cleared one.
func (s *PodState) ClearPendingResize(generation int64) bool {
	if s.ResizePending == nil || s.ResizePending.Generation > generation {
		return false
	}
	s.ResizePending = nil
	return true
}

// RecordResizeError records that applying the allocation failed with
// message; the PodResizeInProgress condition shows it (reason Error) until
// the resize completes. It reports whether the message changed.
func (s *PodState) RecordResizeError(message string, generation int64, now time.Time) bool {
	old := s.ResizeInProgress
	if old == nil {
		s.ResizeInProgress = &ResizeCondition{Reason: v1.PodReasonError, Message: message, Generation: generation, Since: now}
		return true
	}
	if old.Reason == v1.PodReasonError && old.Message == message {
		return false
	}
	c := *old
	if c.Reason != v1.PodReasonError {
		c.Since = now
	}
	c.Reason, c.Message = v1.PodReasonError, message
	s.ResizeInProgress = &c
	return true
}

// FinishResize updates PodResizeInProgress from what runs (pod is the
// allocated pod): it starts, for the pod's generation, when a running
// container does not run with its allocation, and ends once they all do.
// It returns the generation of a resize that ended now.
func (s *PodState) FinishResize(pod *v1.Pod, rt PodRuntime, now time.Time) (generation int64, done bool) {
	if podIsFinished(pod) {
		s.ResizePending = nil
		if c := s.ResizeInProgress; c != nil {
			s.ResizeInProgress = nil
			return c.Generation, false
		}
		return 0, false
	}
	inProgress := ResizeInProgress(pod, rt, *s)
	switch c := s.ResizeInProgress; {
	case inProgress && c == nil:
		s.ResizeInProgress = &ResizeCondition{Generation: pod.Generation, Since: now}
	case !inProgress && c != nil:
		s.ResizeInProgress = nil
		return c.Generation, true
	}
	return 0, false
}

// ResizeInProgress reports whether a running container of the pod (the
// allocated pod) does not run with its allocated cpu and memory, or with
// resources nodelet did not record.
func ResizeInProgress(pod *v1.Pod, rt PodRuntime, st PodState) bool {
	inProgress := false
	allContainers(pod, func(c *v1.Container, _ int, _ bool) {
		inst := rt.latest(c.Name)
		if inst == nil || inst.State != ContainerRunning {
			return
		}
		actuated, ok := st.actuated(c.Name, inst.ID)
		if !ok || valuesOf(actuated) != valuesOf(c.Resources) {
			inProgress = true
		}
	})
	return inProgress
}

// RecordActuated records the resources a container instance was created
// with or updated to.
func (s *PodState) RecordActuated(name, containerID string, resources v1.ResourceRequirements) {
	r := s.record(name)
	r.Actuated = &Actuated{ContainerID: containerID, Resources: *resources.DeepCopy()}
	s.setRecord(name, r)
}

// actuated returns what the instance id of the named container runs with,
// if nodelet recorded it.
func (s *PodState) actuated(name, id string) (v1.ResourceRequirements, bool) {
	if a := s.record(name).Actuated; a != nil && a.ContainerID == id {
		return a.Resources, true
	}
	return v1.ResourceRequirements{}, false
}

// planResize decides how the running instance inst of c (in the allocated
// pod) comes to run with its allocated resources: not at all when it does
// already; a restart (returned with the kill message) when a resource that
// changed has the RestartContainer resize policy and the container may be
// restarted (not a plain init container); else an update in place,
// appended to ContainersToResize. An instance whose resources nodelet did
// not record is updated in place.
func (p *planner) planResize(c *v1.Container, index int, init bool, inst *Container) (restart bool, msg string) {
	want := valuesOf(c.Resources)
	actuated, known := p.st.actuated(c.Name, inst.ID)
	have := valuesOf(actuated)
	if known && want == have {
		return false, ""
	}
	if known && (!init || isSidecar(c)) {
		cpu := want.cpuRequest != have.cpuRequest || want.cpuLimit != have.cpuLimit
		memory := want.memoryRequest != have.memoryRequest || want.memoryLimit != have.memoryLimit
		if (cpu && resizeRestarts(c, v1.ResourceCPU)) || (memory && resizeRestarts(c, v1.ResourceMemory)) {
			return true, fmt.Sprintf("Container %s resize requires restart", c.Name)
		}
	}
	p.a.ContainersToResize = append(p.a.ContainersToResize, ContainerResize{
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

// setResources reports a container's resources as the kubelet does, for a
// container the runtime has: allocatedResources are the allocated requests;
// resources are what the running instance runs with (as recorded), else
// the allocation.
func (b *statusBuilder) setResources(c *v1.Container, cs *v1.ContainerStatus, insts []Container) {
	allocated := AllocatedResources(b.pod, b.st, c.Name)
	cs.AllocatedResources = allocated.DeepCopy().Requests
	resources := allocated.DeepCopy()
	if latest := insts[0]; latest.State == ContainerRunning {
		if actuated, ok := b.st.actuated(c.Name, latest.ID); ok {
			resources = actuated.DeepCopy()
		}
	}
	cs.Resources = resources
}

// resizeConditions are the pod's PodResizePending and PodResizeInProgress
// conditions, none once the pod stops for good.
func (b *statusBuilder) resizeConditions() []v1.PodCondition {
	if b.terminal() || b.pod.DeletionTimestamp != nil {
		return nil
	}
	var out []v1.PodCondition
	for _, rc := range []struct {
		t v1.PodConditionType
		c *ResizeCondition
	}{{v1.PodResizePending, b.st.ResizePending}, {v1.PodResizeInProgress, b.st.ResizeInProgress}} {
		if rc.c == nil {
			continue
		}
		since := apiTime(rc.c.Since)
		out = append(out, v1.PodCondition{
			Type:               rc.t,
			Status:             v1.ConditionTrue,
			ObservedGeneration: rc.c.Generation,
			LastProbeTime:      since,
			LastTransitionTime: since,
			Reason:             rc.c.Reason,
			Message:            rc.c.Message,
		})
	}
	return out
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
	allContainers(pod, func(c *v1.Container, _ int, init bool) {
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

package state

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// In-place resize, as the kubelet does it. The resources of a pod's
// containers are allocated when the pod is admitted (PodState.Allocated); a
// spec that asks for others is a resize request, which the node accepts
// (AcceptResize) when the new requests fit next to the other pods, or leaves
// pending (DeferResize: Deferred until they fit, Infeasible when they never
// can). The pod runs with its allocation (AllocatedPod); what each
// container instance runs with is recorded (ContainerRecord.Actuated), so
// that the status reports it and the resize completes (FinishResize) once
// every running container runs with its allocation. The planner decides how a
// running container comes to run with it: updated in place or restarted.

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

func (c *ResizeCondition) clone() *ResizeCondition {
	if c == nil {
		return nil
	}
	o := *c
	return &o
}

// Actuated is what one container instance runs with.
type Actuated struct {
	// ContainerID is the instance the resources were applied to.
	ContainerID string `json:"containerID"`
	// Resources are the container's resources, as created or as last
	// updated in place.
	Resources v1.ResourceRequirements `json:"resources"`
}

// allContainers calls f for the init containers and then the regular
// containers of pod.
func allContainers(pod *v1.Pod, f func(c *v1.Container)) {
	for i := range pod.Spec.InitContainers {
		f(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		f(&pod.Spec.Containers[i])
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
	allContainers(pod, func(c *v1.Container) {
		s.Allocated[c.Name] = *c.Resources.DeepCopy()
	})
	s.AllocatedGeneration = pod.Generation
}

// AllocatedPod returns the pod as it runs: its containers' resources
// replaced by the allocated ones. It returns pod itself when they are the
// same, and never modifies it.
func AllocatedPod(pod *v1.Pod, st PodState) *v1.Pod {
	if !differsFromAllocation(pod, st) {
		return pod
	}
	out := pod.DeepCopy()
	allContainers(out, func(c *v1.Container) {
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
	allContainers(pod, func(c *v1.Container) {
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

// FinishResize updates PodResizeInProgress at now from what runs:
// inProgress says whether a running container of the pod does not run with
// its allocation (the planner's ResizeInProgress); then a resize starts, for
// generation, and once none does it ends. A pod that stops for good
// (stopped) keeps neither resize condition. It returns the generation of a
// resize that ended now.
func (s *PodState) FinishResize(generation int64, stopped, inProgress bool, now time.Time) (ended int64, done bool) {
	if stopped {
		s.ResizePending = nil
		if c := s.ResizeInProgress; c != nil {
			s.ResizeInProgress = nil
			return c.Generation, false
		}
		return 0, false
	}
	switch c := s.ResizeInProgress; {
	case inProgress && c == nil:
		s.ResizeInProgress = &ResizeCondition{Generation: generation, Since: now}
	case !inProgress && c != nil:
		s.ResizeInProgress = nil
		return c.Generation, true
	}
	return 0, false
}

// RecordActuated records the resources a container instance was created
// with or updated to.
func (s *PodState) RecordActuated(name, containerID string, resources v1.ResourceRequirements) {
	r := s.record(name)
	r.Actuated = &Actuated{ContainerID: containerID, Resources: *resources.DeepCopy()}
	s.setRecord(name, r)
}

// ActuatedResources returns what the instance id of the named container
// runs with, if nodelet recorded it.
func (s *PodState) ActuatedResources(name, id string) (v1.ResourceRequirements, bool) {
	if a := s.record(name).Actuated; a != nil && a.ContainerID == id {
		return a.Resources, true
	}
	return v1.ResourceRequirements{}, false
}

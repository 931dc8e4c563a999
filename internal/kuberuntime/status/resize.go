package status

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/podspec"
)

// allocatedResources returns the resources allocated to the named
// container: the recorded allocation, else (nothing recorded yet) the
// spec's.
func allocatedResources(pod *v1.Pod, st state.PodState, name string) v1.ResourceRequirements {
	if r, ok := st.Allocated[name]; ok {
		return r
	}
	if c := podspec.ContainerSpec(pod, name); c != nil {
		return c.Resources
	}
	return v1.ResourceRequirements{}
}

// setResources reports a container's resources as the kubelet does, for a
// container the runtime has: allocatedResources are the allocated requests;
// resources are what the running instance runs with (as recorded), else
// the allocation.
func (b *statusBuilder) setResources(c *v1.Container, cs *v1.ContainerStatus, insts []state.Container) {
	allocated := allocatedResources(b.pod, b.st, c.Name)
	cs.AllocatedResources = allocated.DeepCopy().Requests
	resources := allocated.DeepCopy()
	if latest := insts[0]; latest.State == state.ContainerRunning {
		if actuated, ok := b.st.ActuatedResources(c.Name, latest.ID); ok {
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
		c *state.ResizeCondition
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

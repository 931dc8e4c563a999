package status

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/nodelet/nodelet/internal/kuberuntime/podtest"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/kuberuntime/statetest"
)

func TestResizeStatus(t *testing.T) {
	old, bigger := podtest.Res("100m", "200m", "64Mi", "128Mi"), podtest.Res("150m", "300m", "64Mi", "128Mi")
	pod := podtest.NewPod(podtest.Resources("app", bigger), podtest.Generation(2))
	ready := []state.Sandbox{statetest.Sandbox("s1", 0)}
	running := statetest.Runtime(ready, statetest.Running(pod, "app", "s1", 0))
	pending := &state.ResizeCondition{Reason: v1.PodReasonInfeasible, Message: "Node didn't have enough capacity", Generation: 2, Since: podtest.At(0)}
	inProgress := &state.ResizeCondition{Generation: 2, Since: podtest.At(time.Second)}

	tests := []struct {
		name          string
		pod           *v1.Pod
		rt            state.PodRuntime
		st            state.PodState
		wantResources v1.ResourceRequirements
		wantAllocated v1.ResourceList
		wantConds     []v1.PodCondition
	}{
		{name: "running: what it runs with", pod: pod, rt: running,
			st: func() state.PodState {
				st := statetest.Allocated(map[string]v1.ResourceRequirements{"app": bigger}, map[string]v1.ResourceRequirements{"app": old})
				st.ResizeInProgress = inProgress
				return st
			}(),
			wantResources: old, wantAllocated: bigger.Requests,
			wantConds: []v1.PodCondition{{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue, ObservedGeneration: 2,
				LastProbeTime: apiTime(podtest.At(time.Second)), LastTransitionTime: apiTime(podtest.At(time.Second))}}},
		{name: "pending: the allocation, with the reason", pod: pod, rt: running,
			st: func() state.PodState {
				st := statetest.Allocated(map[string]v1.ResourceRequirements{"app": old}, map[string]v1.ResourceRequirements{"app": old})
				st.ResizePending = pending
				return st
			}(),
			wantResources: old, wantAllocated: old.Requests,
			wantConds: []v1.PodCondition{{Type: v1.PodResizePending, Status: v1.ConditionTrue, ObservedGeneration: 2,
				Reason: v1.PodReasonInfeasible, Message: "Node didn't have enough capacity",
				LastProbeTime: apiTime(podtest.At(0)), LastTransitionTime: apiTime(podtest.At(0))}}},
		{name: "exited: the allocation", pod: pod, rt: statetest.Runtime(ready, statetest.Exited(pod, "app", "s1", 0, 1, podtest.At(0))),
			st:            statetest.Allocated(map[string]v1.ResourceRequirements{"app": bigger}, map[string]v1.ResourceRequirements{"app": old}),
			wantResources: bigger, wantAllocated: bigger.Requests},
		{name: "nothing recorded: the spec", pod: pod, rt: running, st: state.PodState{},
			wantResources: bigger, wantAllocated: bigger.Requests},
		{name: "no resources: empty, not nil", pod: podtest.NewPod(), rt: running, st: state.PodState{},
			wantResources: v1.ResourceRequirements{}},
		{name: "stopped for good: no resize conditions", pod: podtest.NewPod(podtest.Resources("app", bigger), podtest.Phase(v1.PodFailed)),
			rt: statetest.Runtime(nil, statetest.Exited(pod, "app", "s1", 0, 1, podtest.At(0))),
			st: func() state.PodState {
				st := statetest.Allocated(map[string]v1.ResourceRequirements{"app": bigger}, nil)
				st.ResizePending, st.ResizeInProgress = pending, inProgress
				return st
			}(),
			wantResources: bigger, wantAllocated: bigger.Requests},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ComputePodStatus(tt.pod, tt.rt, tt.st, Inputs{Now: podtest.At(time.Minute)})
			cs := s.ContainerStatuses[0]
			if cs.Resources == nil || !equality.Semantic.DeepEqual(*cs.Resources, tt.wantResources) {
				t.Errorf("resources = %v, want %v", cs.Resources, tt.wantResources)
			}
			if !equality.Semantic.DeepEqual(cs.AllocatedResources, tt.wantAllocated) {
				t.Errorf("allocatedResources = %v, want %v", cs.AllocatedResources, tt.wantAllocated)
			}
			var conds []v1.PodCondition
			for _, c := range s.Conditions {
				if c.Type == v1.PodResizePending || c.Type == v1.PodResizeInProgress {
					conds = append(conds, c)
				}
			}
			if diff := cmp.Diff(tt.wantConds, conds); diff != "" {
				t.Errorf("resize conditions (-want +got):\n%s", diff)
			}
			if s.ObservedGeneration != tt.pod.Generation {
				t.Errorf("observedGeneration = %d, want %d", s.ObservedGeneration, tt.pod.Generation)
			}
		})
	}
}

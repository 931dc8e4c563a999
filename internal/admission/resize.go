package admission

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// FitsResize decides whether pod, with the container resources its spec
// asks for, fits on node next to the other admitted pods (with the
// resources allocated to them; terminal pods and pod itself are ignored),
// as the kubelet decides on an in-place resize. A resize whose requests
// alone exceed the node's allocatable can never be allocated: Reason
// v1.PodReasonInfeasible. One that does not fit next to the others now is
// v1.PodReasonDeferred, with the kubelet's message, until pods leave or
// shrink. What the admitted pods request is known's when it has it.
func FitsResize(pod *v1.Pod, node *v1.Node, admitted []*v1.Pod, known *Requests) Result {
	if s := shortage(pod, node, nil, nil); s != nil {
		return Result{Reason: v1.PodReasonInfeasible, Message: fmt.Sprintf("Node didn't have enough capacity: %s, requested: %d, capacity: %d",
			s.name, s.requested, s.capacity)}
	}
	if r := fitsRequests(pod, node, active(admitted, pod), known); !r.Admit {
		return Result{Reason: v1.PodReasonDeferred, Message: r.Message}
	}
	return Result{Admit: true}
}

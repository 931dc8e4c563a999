package admission

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// ReasonEvicted is the reason of a pod refused under node pressure (the
// kubelet's: the eviction manager refuses it).
const ReasonEvicted = "Evicted"

// AdmitUnderPressure decides, as the kubelet's eviction manager does,
// whether a pod may start while the node reports the given pressure
// conditions: under memory pressure alone, every pod but a BestEffort one
// that does not tolerate the memory-pressure taint; under disk pressure
// (or memory pressure with another condition), no pod. Static, mirror and
// critical pods are always admitted; PIDPressure alone refuses nothing.
func AdmitUnderPressure(pod *v1.Pod, conditions []v1.NodeConditionType) Result {
	var pressure []v1.NodeConditionType
	for _, c := range conditions {
		if c == v1.NodeMemoryPressure || c == v1.NodeDiskPressure {
			pressure = append(pressure, c)
		}
	}
	if len(pressure) == 0 || CriticalPod(pod) {
		return Result{Admit: true}
	}
	if len(pressure) == 1 && pressure[0] == v1.NodeMemoryPressure {
		if !bestEffort(pod) || toleratesMemoryPressure(pod) {
			return Result{Admit: true}
		}
	}
	return Result{Reason: ReasonEvicted, Message: fmt.Sprintf("The node had condition: %v. ", pressure)}
}

func toleratesMemoryPressure(pod *v1.Pod) bool {
	taint := &v1.Taint{Key: v1.TaintNodeMemoryPressure, Effect: v1.TaintEffectNoSchedule}
	return slices.ContainsFunc(pod.Spec.Tolerations, func(t v1.Toleration) bool {
		return t.ToleratesTaint(klog.Background(), taint, false)
	})
}

// bestEffort reports whether no container of the pod requests or limits
// CPU or memory: its QoS class is BestEffort.
func bestEffort(pod *v1.Pod) bool {
	if pod.Spec.Resources != nil && hasCPUOrMemory(*pod.Spec.Resources) {
		return false
	}
	all := append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	return !slices.ContainsFunc(all, func(c v1.Container) bool { return hasCPUOrMemory(c.Resources) })
}

func hasCPUOrMemory(r v1.ResourceRequirements) bool {
	for _, l := range []v1.ResourceList{r.Requests, r.Limits} {
		for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			if q, ok := l[name]; ok && !q.IsZero() {
				return true
			}
		}
	}
	return false
}

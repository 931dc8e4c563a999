package podspec

import v1 "k8s.io/api/core/v1"

// PodQOS returns the pod's QoS class: the one in its status once set (it is
// immutable), else computed from its containers' requests and limits of cpu
// and memory (pod-level resources, when set, decide alone).
func PodQOS(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return ComputePodQOS(pod)
}

// ComputePodQOS computes the QoS class from the spec: Guaranteed when every
// container's cpu and memory requests equal non-zero limits, BestEffort when
// no container has any, Burstable otherwise.
func ComputePodQOS(pod *v1.Pod) v1.PodQOSClass {
	if pod.Spec.Resources != nil && (len(pod.Spec.Resources.Requests) > 0 || len(pod.Spec.Resources.Limits) > 0) {
		return requirementsQOS(pod.Spec.Resources)
	}
	var class v1.PodQOSClass
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			q := requirementsQOS(&cs[i].Resources)
			switch {
			case q == v1.PodQOSBurstable:
				return v1.PodQOSBurstable
			case class == "":
				class = q
			case class != q:
				return v1.PodQOSBurstable
			}
		}
	}
	if class == "" {
		return v1.PodQOSBestEffort
	}
	return class
}

func requirementsQOS(r *v1.ResourceRequirements) v1.PodQOSClass {
	if len(r.Requests) == 0 && len(r.Limits) == 0 {
		return v1.PodQOSBestEffort
	}
	var class v1.PodQOSClass
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		req, lim := r.Requests[name], r.Limits[name]
		q := v1.PodQOSGuaranteed
		switch {
		case !req.Equal(lim):
			return v1.PodQOSBurstable
		case req.IsZero():
			q = v1.PodQOSBestEffort
		}
		if class == "" {
			class = q
		} else if class != q {
			return v1.PodQOSBurstable
		}
	}
	return class
}

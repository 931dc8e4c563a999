package admission

import v1 "k8s.io/api/core/v1"

// SystemCriticalPriority is the lowest priority the kubelet treats as
// critical: that of the system-cluster-critical class
// (system-node-critical is above it).
const SystemCriticalPriority = 2 * 1000000000

// configSourceAnnotation says where a pod came from: "api", or "file" and
// "http" for static pods (the kubelet's kubernetes.io/config.source).
const configSourceAnnotation = "kubernetes.io/config.source"

// CriticalPod reports whether the kubelet treats the pod as critical: a
// static or mirror pod, or one of system-cluster-critical priority or
// above. This is nodelet's one rule for it: critical pods are admitted
// under any node pressure, get no swap, and are never evicted, neither for
// a node signal nor for passing their local storage limits.
func CriticalPod(pod *v1.Pod) bool {
	if src := pod.Annotations[configSourceAnnotation]; src != "" && src != "api" {
		return true
	}
	if _, ok := pod.Annotations[v1.MirrorPodAnnotationKey]; ok {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= SystemCriticalPriority
}

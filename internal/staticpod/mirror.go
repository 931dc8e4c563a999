package staticpod

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// FullName is "<namespace>/<name>".
func FullName(pod *corev1.Pod) string {
	return pod.Namespace + "/" + pod.Name
}

// IsStatic reports whether the pod came from a static source: its
// config.source annotation is set and is not "api".
func IsStatic(pod *corev1.Pod) bool {
	if pod == nil {
		return false
	}
	source, ok := pod.Annotations[ConfigSourceAnnotationKey]
	return ok && source != SourceAPI
}

// IsMirror reports whether the pod is a mirror pod: it has the config.mirror
// annotation.
func IsMirror(pod *corev1.Pod) bool {
	if pod == nil {
		return false
	}
	_, ok := pod.Annotations[ConfigMirrorAnnotationKey]
	return ok
}

// Mirror returns the mirror pod of a static pod, to create in the API server:
// a deep copy without UID, resourceVersion and status, with the config.mirror
// annotation set to the static pod's hash and owned by the node, so that the
// API server deletes it with the node.
func Mirror(static *corev1.Pod, node *corev1.Node) *corev1.Pod {
	mirror := static.DeepCopy()
	mirror.UID = ""
	mirror.ResourceVersion = ""
	mirror.Generation = 0
	mirror.CreationTimestamp = metav1.Time{}
	mirror.ManagedFields = nil
	mirror.Status = corev1.PodStatus{}
	if mirror.Annotations == nil {
		mirror.Annotations = map[string]string{}
	}
	mirror.Annotations[ConfigMirrorAnnotationKey] = hashOf(static)
	mirror.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "v1",
		Kind:       "Node",
		Name:       node.Name,
		UID:        node.UID,
		Controller: ptr.To(true),
	}}
	return mirror
}

// MirrorCurrent reports whether mirror is the mirror pod of this version of
// static: its config.mirror annotation equals the static pod's hash and it
// is not being deleted. A mirror that is not current must be replaced.
func MirrorCurrent(static, mirror *corev1.Pod) bool {
	if static == nil || mirror == nil || mirror.DeletionTimestamp != nil {
		return false
	}
	hash, ok := mirror.Annotations[ConfigMirrorAnnotationKey]
	return ok && hash == hashOf(static)
}

// hashOf is a static pod's hash: its config.hash annotation, else its UID.
func hashOf(static *corev1.Pod) string {
	if h, ok := static.Annotations[ConfigHashAnnotationKey]; ok && h != "" {
		return h
	}
	return string(static.UID)
}

package criconfig

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerSpec finds a container of the pod by name, init and ephemeral
// containers included.
func ContainerSpec(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			return (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		}
	}
	return nil
}

// PodDesc formats a pod the way the kubelet does in messages: name_namespace(uid).
func PodDesc(pod *v1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// shareTargetPID has an ephemeral container join the process namespace of
// the container targetID, when it would otherwise get one of its own (the
// pod neither shares one among its containers nor uses the host's).
func shareTargetPID(ns *runtimeapi.NamespaceOption, targetID string) {
	if targetID == "" || ns == nil || ns.Pid != runtimeapi.NamespaceMode_CONTAINER {
		return
	}
	ns.Pid = runtimeapi.NamespaceMode_TARGET
	ns.TargetId = targetID
}

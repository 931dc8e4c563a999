package criconfig

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type podOpt func(*v1.Pod)

// newPod returns pod default/web with one container "app" and restart
// policy Always, changed by opts.
func newPod(opts ...podOpt) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1", Generation: 1},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyAlways,
			Containers:    []v1.Container{{Name: "app", Image: "busybox:1"}},
		},
	}
	for _, o := range opts {
		o(pod)
	}
	return pod
}

func containers(names ...string) podOpt {
	return func(pod *v1.Pod) {
		pod.Spec.Containers = nil
		for _, n := range names {
			pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: n, Image: "busybox:1"})
		}
	}
}

func inits(names ...string) podOpt {
	return func(pod *v1.Pod) {
		for _, n := range names {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: n, Image: "busybox:1"})
		}
	}
}

// ephemerals adds ephemeral containers; targets maps some of them to
// their targetContainerName.
func ephemerals(names ...string) podOpt {
	return func(pod *v1.Pod) {
		for _, n := range names {
			pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, v1.EphemeralContainer{
				EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: n, Image: "busybox:1"},
			})
		}
	}
}

func target(name, container string) podOpt {
	return func(pod *v1.Pod) {
		for i := range pod.Spec.EphemeralContainers {
			if pod.Spec.EphemeralContainers[i].Name == name {
				pod.Spec.EphemeralContainers[i].TargetContainerName = container
			}
		}
	}
}

func modify(name string, f func(*v1.Container)) podOpt {
	return func(pod *v1.Pod) { f(ContainerSpec(pod, name)) }
}

package state

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

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

func sidecars(names ...string) podOpt {
	return func(pod *v1.Pod) {
		for _, n := range names {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{
				Name: n, Image: "busybox:1", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways),
			})
		}
	}
}

func modify(name string, f func(*v1.Container)) podOpt {
	return func(pod *v1.Pod) {
		for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for i := range list {
				if list[i].Name == name {
					f(&list[i])
				}
			}
		}
	}
}

// res builds container resources from cpu request, cpu limit, memory
// request and memory limit; "" leaves one out.
func res(cpuReq, cpuLim, memReq, memLim string) v1.ResourceRequirements {
	var r v1.ResourceRequirements
	set := func(l *v1.ResourceList, name v1.ResourceName, q string) {
		if q == "" {
			return
		}
		if *l == nil {
			*l = v1.ResourceList{}
		}
		(*l)[name] = resource.MustParse(q)
	}
	set(&r.Requests, v1.ResourceCPU, cpuReq)
	set(&r.Limits, v1.ResourceCPU, cpuLim)
	set(&r.Requests, v1.ResourceMemory, memReq)
	set(&r.Limits, v1.ResourceMemory, memLim)
	return r
}

func resources(name string, r v1.ResourceRequirements) podOpt {
	return modify(name, func(c *v1.Container) { c.Resources = r })
}

// allocated is the state of a pod whose containers were allocated allocs
// (by name) and whose running instances (named <name>-<attempt>, as inst
// names them) run with what actuated gives.
func allocated(allocs map[string]v1.ResourceRequirements, actuated map[string]v1.ResourceRequirements) PodState {
	st := PodState{Allocated: allocs, AllocatedGeneration: 1, Containers: map[string]ContainerRecord{}}
	for name, r := range actuated {
		st.RecordActuated(name, name+"-0", r)
	}
	return st
}

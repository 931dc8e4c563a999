package podtest

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// T0 is the time the cases start at.
var T0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// At is d after T0.
func At(d time.Duration) time.Time { return T0.Add(d) }

// Option changes a pod NewPod builds.
type Option func(*v1.Pod)

// NewPod returns pod default/web with one container "app" and restart
// policy Always, changed by opts.
func NewPod(opts ...Option) *v1.Pod {
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

// Policy sets the pod's restart policy.
func Policy(p v1.RestartPolicy) Option { return func(pod *v1.Pod) { pod.Spec.RestartPolicy = p } }

// Containers replaces the pod's containers with ones of these names.
func Containers(names ...string) Option {
	return func(pod *v1.Pod) {
		pod.Spec.Containers = nil
		for _, n := range names {
			pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: n, Image: "busybox:1"})
		}
	}
}

// Inits adds init containers.
func Inits(names ...string) Option {
	return func(pod *v1.Pod) {
		for _, n := range names {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: n, Image: "busybox:1"})
		}
	}
}

// Sidecars adds init containers with restart policy Always.
func Sidecars(names ...string) Option {
	return func(pod *v1.Pod) {
		for _, n := range names {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{
				Name: n, Image: "busybox:1", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways),
			})
		}
	}
}

// Ephemerals adds ephemeral containers; Target gives one a target.
func Ephemerals(names ...string) Option {
	return func(pod *v1.Pod) {
		for _, n := range names {
			pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, v1.EphemeralContainer{
				EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: n, Image: "busybox:1"},
			})
		}
	}
}

// Target sets the targetContainerName of the ephemeral container name.
func Target(name, container string) Option {
	return func(pod *v1.Pod) {
		for i := range pod.Spec.EphemeralContainers {
			if pod.Spec.EphemeralContainers[i].Name == name {
				pod.Spec.EphemeralContainers[i].TargetContainerName = container
			}
		}
	}
}

// Deleted marks the pod deleted at T0 with grace period grace.
func Deleted(grace int64) Option {
	return func(pod *v1.Pod) {
		ts := metav1.NewTime(T0)
		pod.DeletionTimestamp = &ts
		pod.DeletionGracePeriodSeconds = ptr.To(grace)
	}
}

// Phase sets the phase in the pod's status.
func Phase(p v1.PodPhase) Option { return func(pod *v1.Pod) { pod.Status.Phase = p } }

// Deadline sets the pod's activeDeadlineSeconds.
func Deadline(seconds int64) Option {
	return func(pod *v1.Pod) { pod.Spec.ActiveDeadlineSeconds = ptr.To(seconds) }
}

// StartedAt sets the start time in the pod's status.
func StartedAt(t time.Time) Option {
	return func(pod *v1.Pod) {
		st := metav1.NewTime(t)
		pod.Status.StartTime = &st
	}
}

// Modify calls f on the init, regular or ephemeral container name, which
// must exist.
func Modify(name string, f func(*v1.Container)) Option {
	return func(pod *v1.Pod) {
		found := false
		visit := func(c *v1.Container) {
			if c.Name == name {
				f(c)
				found = true
			}
		}
		for i := range pod.Spec.InitContainers {
			visit(&pod.Spec.InitContainers[i])
		}
		for i := range pod.Spec.Containers {
			visit(&pod.Spec.Containers[i])
		}
		for i := range pod.Spec.EphemeralContainers {
			visit((*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon))
		}
		if !found {
			panic("podtest: the pod has no container " + name)
		}
	}
}

// Generation sets the pod's metadata.generation.
func Generation(g int64) Option { return func(pod *v1.Pod) { pod.Generation = g } }

// Res builds container resources from cpu request, cpu limit, memory
// request and memory limit; "" leaves one out.
func Res(cpuReq, cpuLim, memReq, memLim string) v1.ResourceRequirements {
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

// Resources sets the resources of container name.
func Resources(name string, r v1.ResourceRequirements) Option {
	return Modify(name, func(c *v1.Container) { c.Resources = r })
}

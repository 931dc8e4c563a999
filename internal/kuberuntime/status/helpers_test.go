package status

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

func deadline(seconds int64) podOpt {
	return func(pod *v1.Pod) { pod.Spec.ActiveDeadlineSeconds = ptr.To(seconds) }
}

func startedAt(t time.Time) podOpt {
	return func(pod *v1.Pod) {
		st := metav1.NewTime(t)
		pod.Status.StartTime = &st
	}
}

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

func policy(p v1.RestartPolicy) podOpt { return func(pod *v1.Pod) { pod.Spec.RestartPolicy = p } }

func inits(names ...string) podOpt {
	return func(pod *v1.Pod) {
		for _, n := range names {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: n, Image: "busybox:1"})
		}
	}
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

func deleted(grace int64) podOpt {
	return func(pod *v1.Pod) {
		ts := metav1.NewTime(t0)
		pod.DeletionTimestamp = &ts
		pod.DeletionGracePeriodSeconds = ptr.To(grace)
	}
}

func phase(p v1.PodPhase) podOpt { return func(pod *v1.Pod) { pod.Status.Phase = p } }

func modify(name string, f func(*v1.Container)) podOpt {
	return func(pod *v1.Pod) { f(criconfig.ContainerSpec(pod, name)) }
}

// sb is a ready sandbox with an IP, created at t0.
func sb(id string, attempt uint32) state.Sandbox {
	return state.Sandbox{ID: id, Attempt: attempt, Ready: true, IPs: []string{"10.0.0.5"}, CreatedAt: t0.Add(time.Duration(attempt) * time.Minute)}
}

func notReady(s state.Sandbox) state.Sandbox { s.Ready = false; return s }

// inst describes one container instance of pod's container name.
func inst(pod *v1.Pod, name, sandboxID string, attempt uint32, cs state.ContainerState) state.Container {
	c := state.Container{
		ID:        fmt.Sprintf("%s-%d", name, attempt),
		Name:      name,
		Attempt:   attempt,
		State:     cs,
		CreatedAt: t0.Add(time.Duration(attempt) * time.Second),
		StartedAt: t0.Add(time.Duration(attempt) * time.Second),
		Image:     "busybox:1",
		ImageRef:  "sha256:abc",
		SandboxID: sandboxID,
	}
	if spec := criconfig.ContainerSpec(pod, name); spec != nil {
		c.Hash = criconfig.ContainerHash(spec)
	}
	return c
}

func runningC(pod *v1.Pod, name, sandboxID string, attempt uint32) state.Container {
	return inst(pod, name, sandboxID, attempt, state.ContainerRunning)
}

func exitedC(pod *v1.Pod, name, sandboxID string, attempt uint32, code int32, finished time.Time) state.Container {
	c := inst(pod, name, sandboxID, attempt, state.ContainerExited)
	c.ExitCode, c.FinishedAt = code, finished
	return c
}

func rtOf(sandboxes []state.Sandbox, cs ...state.Container) state.PodRuntime {
	return state.PodRuntime{Sandboxes: sandboxes, Containers: cs}
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
func allocated(allocs map[string]v1.ResourceRequirements, actuated map[string]v1.ResourceRequirements) state.PodState {
	st := state.PodState{Allocated: allocs, AllocatedGeneration: 1, Containers: map[string]state.ContainerRecord{}}
	for name, r := range actuated {
		st.RecordActuated(name, name+"-0", r)
	}
	return st
}

package kuberuntime

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
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

func policy(p v1.RestartPolicy) podOpt { return func(pod *v1.Pod) { pod.Spec.RestartPolicy = p } }

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

func target(name, container string) podOpt {
	return func(pod *v1.Pod) {
		for i := range pod.Spec.EphemeralContainers {
			if pod.Spec.EphemeralContainers[i].Name == name {
				pod.Spec.EphemeralContainers[i].TargetContainerName = container
			}
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
	return func(pod *v1.Pod) { f(ContainerSpec(pod, name)) }
}

// sb is a ready sandbox with an IP, created at t0.
func sb(id string, attempt uint32) Sandbox {
	return Sandbox{ID: id, Attempt: attempt, Ready: true, IPs: []string{"10.0.0.5"}, CreatedAt: t0.Add(time.Duration(attempt) * time.Minute)}
}

func notReady(s Sandbox) Sandbox { s.Ready = false; return s }

// inst describes one container instance of pod's container name.
func inst(pod *v1.Pod, name, sandboxID string, attempt uint32, state ContainerState) Container {
	c := Container{
		ID:        fmt.Sprintf("%s-%d", name, attempt),
		Name:      name,
		Attempt:   attempt,
		State:     state,
		CreatedAt: t0.Add(time.Duration(attempt) * time.Second),
		StartedAt: t0.Add(time.Duration(attempt) * time.Second),
		Image:     "busybox:1",
		ImageRef:  "sha256:abc",
		SandboxID: sandboxID,
	}
	if spec := ContainerSpec(pod, name); spec != nil {
		c.Hash = ContainerHash(spec)
	}
	return c
}

func runningC(pod *v1.Pod, name, sandboxID string, attempt uint32) Container {
	return inst(pod, name, sandboxID, attempt, ContainerRunning)
}

func exitedC(pod *v1.Pod, name, sandboxID string, attempt uint32, code int32, finished time.Time) Container {
	c := inst(pod, name, sandboxID, attempt, ContainerExited)
	c.ExitCode, c.FinishedAt = code, finished
	return c
}

func rtOf(sandboxes []Sandbox, cs ...Container) PodRuntime {
	return PodRuntime{Sandboxes: sandboxes, Containers: cs}
}

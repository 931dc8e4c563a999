package statetest

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/kuberuntime/podtest"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/podspec"
)

// Scene is what a planner or status case starts from: the pod, what the
// runtime reports of it, the pod's state, the time and the probes' results.
type Scene struct {
	Pod    *v1.Pod
	RT     state.PodRuntime
	St     state.PodState
	Now    time.Time
	Probes state.ProbeResults
}

// Sandbox is a ready sandbox with an IP, created attempt minutes after
// podtest.T0.
func Sandbox(id string, attempt uint32) state.Sandbox {
	return state.Sandbox{ID: id, Attempt: attempt, Ready: true, IPs: []string{"10.0.0.5"}, CreatedAt: podtest.T0.Add(time.Duration(attempt) * time.Minute)}
}

// NotReady is s not ready.
func NotReady(s state.Sandbox) state.Sandbox { s.Ready = false; return s }

// Instance describes one instance of pod's container name, with ID
// <name>-<attempt>, created and started attempt seconds after podtest.T0,
// and the hash of the container's spec when the pod has it.
func Instance(pod *v1.Pod, name, sandboxID string, attempt uint32, cs state.ContainerState) state.Container {
	c := state.Container{
		ID:        fmt.Sprintf("%s-%d", name, attempt),
		Name:      name,
		Attempt:   attempt,
		State:     cs,
		CreatedAt: podtest.T0.Add(time.Duration(attempt) * time.Second),
		StartedAt: podtest.T0.Add(time.Duration(attempt) * time.Second),
		Image:     "busybox:1",
		ImageRef:  "sha256:abc",
		SandboxID: sandboxID,
	}
	if spec := podspec.ContainerSpec(pod, name); spec != nil {
		c.Hash = podspec.ContainerHash(spec)
	}
	return c
}

// Running is a running Instance.
func Running(pod *v1.Pod, name, sandboxID string, attempt uint32) state.Container {
	return Instance(pod, name, sandboxID, attempt, state.ContainerRunning)
}

// Exited is an Instance that exited with code at finished.
func Exited(pod *v1.Pod, name, sandboxID string, attempt uint32, code int32, finished time.Time) state.Container {
	c := Instance(pod, name, sandboxID, attempt, state.ContainerExited)
	c.ExitCode, c.FinishedAt = code, finished
	return c
}

// Runtime is what the runtime reports: these sandboxes and containers.
func Runtime(sandboxes []state.Sandbox, cs ...state.Container) state.PodRuntime {
	return state.PodRuntime{Sandboxes: sandboxes, Containers: cs}
}

// Allocated is the state of a pod whose containers were allocated allocs
// (by name) and whose running instances (named <name>-0, as Instance names
// them) run with what actuated gives.
func Allocated(allocs, actuated map[string]v1.ResourceRequirements) state.PodState {
	st := state.PodState{Allocated: allocs, AllocatedGeneration: 1, Containers: map[string]state.ContainerRecord{}}
	for name, r := range actuated {
		st.RecordActuated(name, name+"-0", r)
	}
	return st
}

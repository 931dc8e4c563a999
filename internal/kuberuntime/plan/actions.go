package plan

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
)

// PodActions is the plan for one pod: what the executor must do in the
// runtime now. The planner computes it from the pod, the observed runtime
// and the persisted state.
type PodActions struct {
	// KillPod: stop every container of the pod and its sandboxes first
	// (TerminationPlan, step by step).
	KillPod bool
	// KillPodReason and KillPodMessage say why the pod is stopped for good
	// while its phase is not terminal yet (an eviction, the active
	// deadline); empty for any other KillPod.
	KillPodReason, KillPodMessage string
	// CreateSandbox: create a new sandbox with Attempt, after KillPod.
	CreateSandbox bool
	// SandboxReason says why a new sandbox is needed.
	SandboxReason string
	// SandboxID is the ready sandbox to start containers in when no new
	// sandbox is created.
	SandboxID string
	// Attempt is the attempt of the sandbox to create.
	Attempt uint32
	// InitContainersToStart and ContainersToStart, in the order to start
	// them. At most one non-restartable init container is ever listed.
	InitContainersToStart []ContainerStart
	ContainersToStart     []ContainerStart
	// EphemeralContainersToStart are the ephemeral containers that never
	// ran, to start before the others. None is listed when the pod is
	// killed or gets a new sandbox.
	EphemeralContainersToStart []ContainerStart
	// ContainersToKill by container ID, to be killed before the starts.
	ContainersToKill map[string]ContainerKill
	// BackingOff lists the containers that need a start but must wait, by name.
	BackingOff map[string]BackingOff
	// ContainersToResize are running containers to update in place to
	// their allocated resources, after the starts; none when KillPod.
	ContainersToResize []ContainerResize
	// RequeueAfter is when the earliest back-off or the pod's active
	// deadline ends (0: none).
	RequeueAfter time.Duration
	// Done: the pod is terminal or deleted and nothing of it runs any more;
	// nothing will ever be started for it again.
	Done bool
}

// Starts reports whether the plan has a start step (volumes, sandbox,
// single-container kills and starts): the pod is not done, and a pod that
// is killed gets a new sandbox.
func (a PodActions) Starts() bool {
	return !a.Done && (!a.KillPod || a.CreateSandbox)
}

// ContainerStart is one container to start.
type ContainerStart struct {
	Name string
	// Index into pod.Spec.InitContainers when Init, pod.Spec.EphemeralContainers
	// when Ephemeral, else pod.Spec.Containers.
	Index     int
	Init      bool
	Ephemeral bool
	// TargetID is the container whose process namespace an ephemeral
	// container shares: the newest instance of its targetContainerName, if
	// any (see Target).
	TargetID string
	// RestartCount to create the container with
	// (criconfig.ContainerOptions.RestartCount).
	RestartCount uint32
	// PrevFinishedAt is when the previous instance exited (zero for a first
	// start); state.PodState.RecordStart uses it to advance the crash-loop
	// back-off, capped at MaxCrashLoopBackOff (the planner's
	// Inputs.MaxCrashLoopBackOff).
	PrevFinishedAt      time.Time
	MaxCrashLoopBackOff time.Duration
	// KillGracePeriodSeconds is the grace period to kill the container
	// with when its postStart hook fails.
	KillGracePeriodSeconds int64
}

// Spec returns the container to start from the pod spec.
func (c ContainerStart) Spec(pod *v1.Pod) *v1.Container {
	switch {
	case c.Init:
		return &pod.Spec.InitContainers[c.Index]
	case c.Ephemeral:
		return (*v1.Container)(&pod.Spec.EphemeralContainers[c.Index].EphemeralContainerCommon)
	}
	return &pod.Spec.Containers[c.Index]
}

// Target returns the ID of the container whose process namespace the
// ephemeral container to start shares: "" when it names no
// targetContainerName, a *criconfig.ConfigError when the named container
// has no instance (the kubelet's "unable to find target container").
func (c ContainerStart) Target(pod *v1.Pod) (string, error) {
	if !c.Ephemeral {
		return "", nil
	}
	name := pod.Spec.EphemeralContainers[c.Index].TargetContainerName
	if name != "" && c.TargetID == "" {
		return "", &criconfig.ConfigError{Err: fmt.Errorf("unable to find target container %s", name)}
	}
	return c.TargetID, nil
}

// ContainerKill is one container to stop (and leave stopped or restart).
type ContainerKill struct {
	Name    string
	Reason  KillReason
	Message string
	// GracePeriodSeconds for the preStop hook and StopContainer together.
	GracePeriodSeconds int64
	// PreStop is the hook to run first, if any.
	PreStop *v1.LifecycleHandler
}

// KillReason says why a single container is killed.
type KillReason string

// Reasons for killing a single container.
const (
	KillSpecChanged   KillReason = "SpecChanged"
	KillLivenessProbe KillReason = "LivenessProbe"
	KillStartupProbe  KillReason = "StartupProbe"
	KillResize        KillReason = "Resize"
	KillUnknownState  KillReason = "Unknown"
)

// BackingOff says why a container is not started now and until when.
type BackingOff struct {
	Reason  string
	Message string
	Until   time.Time
	// Image is the image whose pull backs off, for ReasonImagePullBackOff:
	// the container's own or an image volume's it mounts.
	Image string
}

// ContainerResize is an in-place update of a running container's
// resources to its allocation.
type ContainerResize struct {
	Name string
	// ID of the running instance.
	ID string
	// Index into pod.Spec.InitContainers when Init, else pod.Spec.Containers.
	Index int
	Init  bool
	// MemoryLimitDecrease: the update lowers the memory limit, or sets one
	// where the container had none or runs with unknown resources; the
	// kubelet does not do that below what the container uses.
	MemoryLimitDecrease bool
}

// Spec returns the container to resize from the (allocated) pod.
func (c ContainerResize) Spec(pod *v1.Pod) *v1.Container {
	if c.Init {
		return &pod.Spec.InitContainers[c.Index]
	}
	return &pod.Spec.Containers[c.Index]
}

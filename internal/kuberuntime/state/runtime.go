package state

import (
	"cmp"
	"slices"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
)

// Labels nodelet puts on the CRI objects it creates, besides the kubelet's
// pod name/namespace/uid and container name labels from k8s.io/kubelet/pkg/types.
const (
	// ContainerHashLabel holds the hash of the spec a container was created
	// from (podspec.ContainerHash).
	ContainerHashLabel = "nodelet.io/container-hash"
	// SandboxIDLabel holds the ID of the sandbox a container was created in;
	// the CRI's ContainerStatus does not report it.
	SandboxIDLabel = "nodelet.io/pod-sandbox-id"
)

// ContainerState is the runtime state of one container instance.
type ContainerState string

// The container states reported by the CRI.
const (
	ContainerCreated ContainerState = "Created"
	ContainerRunning ContainerState = "Running"
	ContainerExited  ContainerState = "Exited"
	ContainerUnknown ContainerState = "Unknown"
)

// PodRuntime is what the runtime reports about one pod: its sandboxes and
// the container instances of all of them.
type PodRuntime struct {
	// Sandboxes, newest first.
	Sandboxes []Sandbox
	// Containers of every sandbox, in no particular order; several
	// instances (attempts) of one container may be present.
	Containers []Container
}

// Sandbox is one pod sandbox as observed in the runtime.
type Sandbox struct {
	ID      string
	Attempt uint32
	Ready   bool
	// HostNetwork is true when the sandbox shares the node's network namespace.
	HostNetwork bool
	// IPs are the sandbox's pod IPs, primary first.
	IPs       []string
	CreatedAt time.Time
}

// Container is one container instance as observed in the runtime.
type Container struct {
	ID   string
	Name string
	// Attempt is the CRI metadata attempt, which nodelet sets to the restart count.
	Attempt    uint32
	State      ContainerState
	ExitCode   int32
	Reason     string
	Message    string
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	// Image is the image the user asked for; ImageRef the resolved digest.
	Image    string
	ImageRef string
	// SandboxID is the sandbox the container was created in.
	SandboxID string
	// Hash is the ContainerHashLabel the container was created with.
	Hash string
	// LogPath is the container's log file on the host, as the runtime
	// reports it.
	LogPath string
	// User is the identity the container's process runs as (UID, GID,
	// supplementary groups), as the runtime reports it; nil from a
	// runtime that does not (containerd 1.6).
	User *LinuxUser
}

// LinuxUser is the identity a container's first process runs as.
type LinuxUser struct {
	UID, GID           int64
	SupplementalGroups []int64
}

// FromCRI converts CRI sandbox and container statuses of one pod into a
// PodRuntime, sorting sandboxes newest first. Nil entries are skipped.
func FromCRI(sandboxes []*runtimeapi.PodSandboxStatus, containers []*runtimeapi.ContainerStatus) PodRuntime {
	var rt PodRuntime
	for _, s := range sandboxes {
		if s != nil {
			rt.Sandboxes = append(rt.Sandboxes, SandboxFromCRI(s))
		}
	}
	slices.SortStableFunc(rt.Sandboxes, func(a, b Sandbox) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.Attempt, a.Attempt)
	})
	for _, c := range containers {
		if c != nil {
			rt.Containers = append(rt.Containers, ContainerFromCRI(c))
		}
	}
	return rt
}

// SandboxFromCRI converts one CRI sandbox status.
func SandboxFromCRI(s *runtimeapi.PodSandboxStatus) Sandbox {
	sb := Sandbox{
		ID:          s.GetId(),
		Attempt:     s.GetMetadata().GetAttempt(),
		Ready:       s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY,
		HostNetwork: s.GetLinux().GetNamespaces().GetOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE,
		CreatedAt:   fromUnixNano(s.GetCreatedAt()),
	}
	if ip := s.GetNetwork().GetIp(); ip != "" {
		sb.IPs = append(sb.IPs, ip)
	}
	for _, ip := range s.GetNetwork().GetAdditionalIps() {
		if ip.GetIp() != "" {
			sb.IPs = append(sb.IPs, ip.GetIp())
		}
	}
	return sb
}

// ContainerFromCRI converts one CRI container status. The sandbox ID is read
// from SandboxIDLabel; callers that know it otherwise may overwrite it.
func ContainerFromCRI(s *runtimeapi.ContainerStatus) Container {
	image := s.GetImage().GetUserSpecifiedImage()
	if image == "" {
		image = s.GetImage().GetImage()
	}
	name := s.GetMetadata().GetName()
	if name == "" {
		name = s.GetLabels()[kubetypes.KubernetesContainerNameLabel]
	}
	return Container{
		ID:         s.GetId(),
		Name:       name,
		Attempt:    s.GetMetadata().GetAttempt(),
		State:      containerStateFromCRI(s.GetState()),
		ExitCode:   s.GetExitCode(),
		Reason:     s.GetReason(),
		Message:    s.GetMessage(),
		CreatedAt:  fromUnixNano(s.GetCreatedAt()),
		StartedAt:  fromUnixNano(s.GetStartedAt()),
		FinishedAt: fromUnixNano(s.GetFinishedAt()),
		Image:      image,
		ImageRef:   s.GetImageRef(),
		SandboxID:  s.GetLabels()[SandboxIDLabel],
		Hash:       s.GetLabels()[ContainerHashLabel],
		LogPath:    s.GetLogPath(),
		User:       linuxUserFromCRI(s.GetUser()),
	}
}

func linuxUserFromCRI(u *runtimeapi.ContainerUser) *LinuxUser {
	l := u.GetLinux()
	if l == nil {
		return nil
	}
	return &LinuxUser{UID: l.GetUid(), GID: l.GetGid(), SupplementalGroups: l.GetSupplementalGroups()}
}

func containerStateFromCRI(s runtimeapi.ContainerState) ContainerState {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return ContainerCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return ContainerRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return ContainerExited
	default:
		return ContainerUnknown
	}
}

func fromUnixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// NewestSandbox returns the newest sandbox, or nil.
func (rt PodRuntime) NewestSandbox() *Sandbox {
	if len(rt.Sandboxes) == 0 {
		return nil
	}
	return &rt.Sandboxes[0]
}

// Instances returns the instances of the named container, newest first.
// When sandboxID is not empty only the instances created in that sandbox
// count.
func (rt PodRuntime) Instances(name, sandboxID string) []Container {
	var out []Container
	for _, c := range rt.Containers {
		if c.Name == name && (sandboxID == "" || c.SandboxID == sandboxID) {
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(a, b Container) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.Attempt, a.Attempt)
	})
	return out
}

// Latest returns the newest instance of the named container in any
// sandbox, or nil.
func (rt PodRuntime) Latest(name string) *Container {
	if all := rt.Instances(name, ""); len(all) > 0 {
		return &all[0]
	}
	return nil
}

// LatestExited returns the newest exited instance of the named container,
// or nil.
func (rt PodRuntime) LatestExited(name string) *Container {
	for _, c := range rt.Instances(name, "") {
		if c.State == ContainerExited {
			return &c
		}
	}
	return nil
}

// Live returns every container instance that has not exited (running,
// created or unknown): the ones a pod kill must stop.
func (rt PodRuntime) Live() []Container {
	var out []Container
	for _, c := range rt.Containers {
		if c.State == ContainerRunning || c.State == ContainerUnknown || c.State == ContainerCreated {
			out = append(out, c)
		}
	}
	return out
}

// HasLiveResources reports whether anything of the pod may still run: a
// container that has not exited or a ready sandbox.
func (rt PodRuntime) HasLiveResources() bool {
	if len(rt.Live()) > 0 {
		return true
	}
	for _, s := range rt.Sandboxes {
		if s.Ready {
			return true
		}
	}
	return false
}

// Empty reports whether the runtime holds nothing of the pod.
func (rt PodRuntime) Empty() bool {
	return len(rt.Sandboxes) == 0 && len(rt.Containers) == 0
}

// ProbeResults are the prober's latest results by container ID: true for
// success, false for failure. A container whose probe has not run yet has
// no entry.
type ProbeResults struct {
	Startup   map[string]bool
	Liveness  map[string]bool
	Readiness map[string]bool
}

package cri

import (
	"context"
	"io"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/logs"
)

// Runtime is everything nodelet asks of the container runtime.
//
// Contract, for every implementation:
//
//   - Ownership. Sandboxes and containers created through Runtime carry
//     LabelNode for the implementation's node, added when the caller did not
//     set it. List calls return only such objects. Every call that names a
//     sandbox or container by ID, reads included, returns an error wrapping
//     ErrNotOwned for an object without that label and leaves it untouched.
//   - Idempotence. StopPodSandbox, RemovePodSandbox, StopContainer and
//     RemoveContainer succeed when the object is already stopped or removed,
//     including when the runtime no longer knows the ID. Run and Create calls
//     are not idempotent: each creates a new object.
//   - Immutability. Returned objects are shared with the implementation and
//     must not be modified; copy them (proto.Clone) to change them. Arguments
//     are not modified either.
//   - Errors. Runtime errors are wrapped with what was being done; the gRPC
//     status stays reachable (IsNotFound). Absent objects are reported as
//     gRPC NotFound by the status calls, except ImageStatus, which returns a
//     nil image.
//   - Time. Every call is bounded by the implementation's per-call timeout
//     (longer for sandbox creation, stops and image pulls) and by ctx.
//
// Implementations are safe for concurrent use.
type Runtime interface {
	// Version returns the runtime's name and versions.
	Version(ctx context.Context) (*runtimeapi.VersionResponse, error)
	// Status returns the runtime's conditions (RuntimeReady, NetworkReady).
	Status(ctx context.Context) (*runtimeapi.RuntimeStatus, error)
	// UpdateRuntimeConfig hands the runtime the node's configuration it
	// needs: the pod CIDRs, comma-separated, from which a runtime that
	// writes its own CNI configuration (containerd's conf_template) gives
	// the sandboxes their IPs.
	UpdateRuntimeConfig(ctx context.Context, config *runtimeapi.RuntimeConfig) error

	// RunPodSandbox creates and starts a sandbox with config in the runtime
	// handler (empty for the default) and returns its ID.
	RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error)
	// StopPodSandbox stops every container of the sandbox and releases its
	// network. Idempotent.
	StopPodSandbox(ctx context.Context, sandboxID string) error
	// RemovePodSandbox removes a sandbox and its containers. Idempotent.
	RemovePodSandbox(ctx context.Context, sandboxID string) error
	// PodSandboxStatus returns the sandbox's status (not verbose).
	PodSandboxStatus(ctx context.Context, sandboxID string) (*runtimeapi.PodSandboxStatus, error)
	// PodSandboxPid returns the host PID of the sandbox's infra process, as
	// the runtime's verbose status tells it, or 0 when it does not.
	PodSandboxPid(ctx context.Context, sandboxID string) (int, error)
	// ListPodSandboxes returns the owned sandboxes that match filter (nil for
	// all).
	ListPodSandboxes(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)

	// CreateContainer creates a container in an owned sandbox and returns
	// its ID. sandboxConfig is the config the sandbox was run with.
	CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
	// StartContainer starts a created container.
	StartContainer(ctx context.Context, containerID string) error
	// StopContainer stops a container, killing it after timeoutSeconds.
	// Idempotent.
	StopContainer(ctx context.Context, containerID string, timeoutSeconds int64) error
	// RemoveContainer removes a container. Idempotent.
	RemoveContainer(ctx context.Context, containerID string) error
	// UpdateContainerResources changes the Linux resources (cgroup settings)
	// of a created or running container in place.
	UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.LinuxContainerResources) error
	// ContainerStatus returns the container's status (not verbose).
	ContainerStatus(ctx context.Context, containerID string) (*runtimeapi.ContainerStatus, error)
	// ListContainers returns the owned containers that match filter (nil for
	// all).
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	// ExecSync runs cmd in a container and returns its output. A command
	// that exits non-zero returns an error wrapping a
	// k8s.io/utils/exec.ExitError; timeout 0 means none but the caller's.
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error)
	// ReadLogs writes the log file at path of container containerID to
	// stdout and stderr, by stream, as opts ask (k8s.io/cri-client/pkg/logs).
	// When following, it returns once the container stopped and its log
	// was read to the end, or when ctx is done.
	ReadLogs(ctx context.Context, path, containerID string, opts *logs.LogOptions, stdout, stderr io.Writer) error
	// CheckpointContainer has the runtime write a checkpoint of a running
	// container (its processes' state, by CRIU, and its changed files) to
	// the archive at location; timeout 0 is the runtime request timeout.
	CheckpointContainer(ctx context.Context, containerID, location string, timeout time.Duration) error

	// Exec, Attach and PortForward prepare a streaming session on the
	// runtime's streaming server and return its URL; the session starts
	// when a client connects to that URL (once, shortly after).
	Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error)
	Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error)
	PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error)

	// ListContainerStats returns the stats of the owned containers that
	// match filter (nil for all).
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
	// ListPodSandboxStats returns the stats of the owned sandboxes that
	// match filter (nil for all). Runtimes that do not implement it return
	// gRPC Unimplemented (IsUnimplemented).
	ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error)

	// PullImage pulls an image with optional credentials and returns its
	// reference (the image ID or digest the runtime resolved it to).
	PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
	// ImageStatus returns an image, or nil without error when it is not
	// present.
	ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec) (*runtimeapi.Image, error)
	// ImageFsInfo returns the usage of the filesystems that hold images and
	// container writable layers.
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
	// ListImages returns the images that match filter (nil for all).
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
	// RemoveImage removes an image by ID or reference. Idempotent: an
	// image the runtime does not hold is not an error.
	RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error
	// ImagesInUse returns the image IDs and references of every container
	// the runtime holds, whoever made it: the one read that crosses
	// ownership, because an image is shared by everything on the runtime
	// and must not be removed while anything uses it.
	ImagesInUse(ctx context.Context) (map[string]bool, error)

	// ReopenContainerLog asks the runtime to reopen an owned running
	// container's log file, after it was renamed for rotation.
	ReopenContainerLog(ctx context.Context, containerID string) error
}

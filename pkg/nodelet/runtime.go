package nodelet

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/cri"
)

// Runtime is what a reconciler may ask of the container runtime (the CRI):
// reads of the sandboxes and containers this nodelet made, and images.
// Objects that another agent sharing the runtime made are invisible: lists
// leave them out and reads by ID fail. Every call is bounded by ctx and by
// nodelet's runtimeRequestTimeout, but for PullImage, which is bounded by
// ctx and 30 minutes; each is counted in the kubelet_runtime_operations_*
// metrics. An error says what was being done and wraps the runtime's gRPC
// status, which status.FromError (google.golang.org/grpc/status) finds;
// IsNotFound tests for NotFound. Returned objects are shared: do not modify
// them.
type Runtime interface {
	// Version returns the runtime's name and versions.
	Version(ctx context.Context) (*runtimeapi.VersionResponse, error)
	// Status returns the runtime's conditions (RuntimeReady, NetworkReady).
	Status(ctx context.Context) (*runtimeapi.RuntimeStatus, error)

	// ListPodSandboxes returns this nodelet's sandboxes that match filter
	// (nil for all). Their labels carry the pod's namespace, name and UID
	// (k8s.io/kubelet/pkg/types).
	ListPodSandboxes(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	// PodSandboxStatus returns a sandbox's status.
	PodSandboxStatus(ctx context.Context, sandboxID string) (*runtimeapi.PodSandboxStatus, error)
	// ListContainers returns this nodelet's containers that match filter
	// (nil for all).
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	// ContainerStatus returns a container's status.
	ContainerStatus(ctx context.Context, containerID string) (*runtimeapi.ContainerStatus, error)
	// ListContainerStats returns the stats of this nodelet's containers that
	// match filter (nil for all).
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)

	// PullImage pulls an image with optional credentials (auth may be nil;
	// sandboxConfig may be nil outside a pod) and returns the reference the
	// runtime resolved it to.
	PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
	// ImageStatus returns an image, or nil without error when it is not
	// present.
	ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec) (*runtimeapi.Image, error)
	// ListImages returns the images that match filter (nil for all).
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
	// ImageFsInfo returns the usage of the filesystems that hold images and
	// containers' writable layers.
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
}

// IsNotFound reports whether err says that the runtime does not know a
// sandbox or container (gRPC NotFound).
func IsNotFound(err error) bool { return cri.IsNotFound(err) }

// ownedRuntime lends the reads and image calls of nodelet's runtime client,
// and nothing else: no type assertion reaches its stop, remove or create
// calls.
type ownedRuntime struct{ rt cri.Runtime }

func (o ownedRuntime) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	return o.rt.Version(ctx)
}

func (o ownedRuntime) Status(ctx context.Context) (*runtimeapi.RuntimeStatus, error) {
	return o.rt.Status(ctx)
}

func (o ownedRuntime) ListPodSandboxes(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	return o.rt.ListPodSandboxes(ctx, filter)
}

func (o ownedRuntime) PodSandboxStatus(ctx context.Context, sandboxID string) (*runtimeapi.PodSandboxStatus, error) {
	return o.rt.PodSandboxStatus(ctx, sandboxID)
}

func (o ownedRuntime) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return o.rt.ListContainers(ctx, filter)
}

func (o ownedRuntime) ContainerStatus(ctx context.Context, containerID string) (*runtimeapi.ContainerStatus, error) {
	return o.rt.ContainerStatus(ctx, containerID)
}

func (o ownedRuntime) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	return o.rt.ListContainerStats(ctx, filter)
}

func (o ownedRuntime) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	return o.rt.PullImage(ctx, image, auth, sandboxConfig)
}

func (o ownedRuntime) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec) (*runtimeapi.Image, error) {
	return o.rt.ImageStatus(ctx, image)
}

func (o ownedRuntime) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	return o.rt.ListImages(ctx, filter)
}

func (o ownedRuntime) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return o.rt.ImageFsInfo(ctx)
}

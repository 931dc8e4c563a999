package cri

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	oteltrace "go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"

	"github.com/nodelet/nodelet/internal/metrics"
)

const (
	// DefaultRuntimeRequestTimeout bounds a CRI call when
	// Options.RuntimeRequestTimeout is zero, as the kubelet's default.
	DefaultRuntimeRequestTimeout = 2 * time.Minute
	// DefaultImagePullTimeout bounds an image pull when
	// Options.ImagePullTimeout is zero. cri-client sets no deadline on pulls;
	// nodelet bounds them so that a stalled registry cannot hold the pull
	// queue forever, generously enough for large images on slow links.
	DefaultImagePullTimeout = 30 * time.Minute
)

// Options configure a Client.
type Options struct {
	// NodeName is the node whose objects this Client owns. Required.
	NodeName string
	// RuntimeRequestTimeout bounds every call but image pulls. Sandbox
	// creation gets twice as long, StopContainer and ExecSync get their own
	// timeout on top, as cri-client does. Zero means
	// DefaultRuntimeRequestTimeout.
	RuntimeRequestTimeout time.Duration
	// ImagePullTimeout bounds an image pull. Zero means
	// DefaultImagePullTimeout.
	ImagePullTimeout time.Duration
	// TracerProvider, when set, traces every CRI call (Dial only) and
	// passes the trace context on to the runtime.
	TracerProvider oteltrace.TracerProvider
}

func (o Options) withDefaults() Options {
	if o.RuntimeRequestTimeout <= 0 {
		o.RuntimeRequestTimeout = DefaultRuntimeRequestTimeout
	}
	if o.ImagePullTimeout <= 0 {
		o.ImagePullTimeout = DefaultImagePullTimeout
	}
	return o
}

// Client implements Runtime over a CRI runtime and image service.
type Client struct {
	node    string
	opts    Options
	runtime internalapi.RuntimeService
	images  internalapi.ImageManagerService
	owned   ownedIDs
	// brief is the connection of brief lists (see Brief); nil lists
	// through runtime.
	brief *grpc.ClientConn
	// briefStrings are the strings of brief lists.
	briefStrings interner
	// briefRecall is the objects of the last unfiltered brief lists.
	briefRecall recall
	// briefRequests are the requests of unfiltered brief lists.
	briefRequests briefRequests
}

// ownedIDs remembers the sandboxes and containers known to be ours: those
// this Client created and those whose ownership label it checked. A CRI
// object's ID is never reused and its labels never change, so a call on a
// remembered ID needs no second look at its labels (a runtime round trip
// per stop, start or removal). IDs are forgotten when the object is
// removed; a container is also forgotten with its sandbox.
type ownedIDs struct {
	mu sync.Mutex
	// ids maps an owned object's ID to its sandbox's ID for a container,
	// to "" for a sandbox (or a container whose sandbox is not known).
	ids map[string]string
	// in holds the remembered containers of each sandbox ID, so that a
	// sandbox is forgotten without a scan of every ID.
	in map[string]map[string]struct{}
}

func (o *ownedIDs) has(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.ids[id]
	return ok
}

// add remembers id as owned; sandboxID is a container's sandbox.
func (o *ownedIDs) add(id, sandboxID string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ids == nil {
		o.ids, o.in = map[string]string{}, map[string]map[string]struct{}{}
	}
	if prev, ok := o.ids[id]; ok && prev != "" && prev != sandboxID {
		o.unlink(id, prev)
	}
	o.ids[id] = sandboxID
	if sandboxID != "" {
		if o.in[sandboxID] == nil {
			o.in[sandboxID] = map[string]struct{}{}
		}
		o.in[sandboxID][id] = struct{}{}
	}
}

// forget drops id and, for a sandbox, the containers remembered in it.
func (o *ownedIDs) forget(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if sb, ok := o.ids[id]; ok && sb != "" {
		o.unlink(id, sb)
	}
	delete(o.ids, id)
	for cid := range o.in[id] {
		delete(o.ids, cid)
	}
	delete(o.in, id)
}

// unlink drops container id from sandbox sb's containers.
func (o *ownedIDs) unlink(id, sb string) {
	delete(o.in[sb], id)
	if len(o.in[sb]) == 0 {
		delete(o.in, sb)
	}
}

// len is how many IDs and sandboxes with containers are remembered.
func (o *ownedIDs) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.ids) + len(o.in)
}

var _ Runtime = (*Client)(nil)

// New returns a Client over the given services, which it does not close
// unless Close is called.
func New(runtime internalapi.RuntimeService, images internalapi.ImageManagerService, opts Options) (*Client, error) {
	if opts.NodeName == "" {
		return nil, errors.New("creating CRI client: node name is required")
	}
	if runtime == nil || images == nil {
		return nil, errors.New("creating CRI client: runtime and image services are required")
	}
	opts = opts.withDefaults()
	return &Client{node: opts.NodeName, opts: opts, runtime: runtime, images: images}, nil
}

// Dial connects to the CRI runtime service at runtimeEndpoint and the image
// service at imageEndpoint (runtimeEndpoint when empty), such as
// "unix:///run/containerd/containerd.sock", and returns a Client over them.
// The connection is checked before Dial returns.
func Dial(ctx context.Context, runtimeEndpoint, imageEndpoint string, opts Options) (*Client, error) {
	opts = opts.withDefaults()
	if imageEndpoint == "" {
		imageEndpoint = runtimeEndpoint
	}
	rs, err := remote.NewRemoteRuntimeServiceBuilder().
		WithEndpoint(runtimeEndpoint).
		WithConnectionTimeout(opts.RuntimeRequestTimeout).
		WithTracerProvider(opts.TracerProvider).
		Build(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting to CRI runtime service %s: %w", runtimeEndpoint, err)
	}
	is, err := remote.NewRemoteImageServiceBuilder().
		WithEndpoint(imageEndpoint).
		WithConnectionTimeout(opts.RuntimeRequestTimeout).
		WithTracerProvider(opts.TracerProvider).
		Build(ctx)
	if err != nil {
		_ = rs.Close(ctx)
		return nil, fmt.Errorf("connecting to CRI image service %s: %w", imageEndpoint, err)
	}
	brief, err := dialBrief(ctx, runtimeEndpoint, opts.RuntimeRequestTimeout)
	if err != nil {
		_ = rs.Close(ctx)
		_ = is.Close(ctx)
		return nil, err
	}
	c, err := New(rs, is, opts)
	if err != nil {
		_ = rs.Close(ctx)
		_ = is.Close(ctx)
		if brief != nil {
			_ = brief.Close()
		}
		return nil, err
	}
	c.brief = brief
	return c, nil
}

// Close closes the connections to both services.
func (c *Client) Close(ctx context.Context) error {
	err := errors.Join(c.runtime.Close(ctx), c.images.Close(ctx))
	if c.brief != nil {
		err = errors.Join(err, c.brief.Close())
	}
	return err
}

// timeout bounds ctx by the default per-call timeout.
func (c *Client) timeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.opts.RuntimeRequestTimeout)
}

// Version implements Runtime.
func (c *Client) Version(ctx context.Context) (_ *runtimeapi.VersionResponse, err error) {
	defer func(start time.Time) { observe("version", start, err) }(time.Now())
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	v, err := c.runtime.Version(ctx, "v1")
	if err != nil {
		return nil, fmt.Errorf("getting runtime version: %w", err)
	}
	return v, nil
}

// Status implements Runtime.
func (c *Client) Status(ctx context.Context) (_ *runtimeapi.RuntimeStatus, err error) {
	defer func(start time.Time) { observe("status", start, err) }(time.Now())
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	resp, err := c.runtime.Status(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("getting runtime status: %w", err)
	}
	if resp.GetStatus() == nil {
		return nil, errors.New("getting runtime status: runtime returned no status")
	}
	return resp.GetStatus(), nil
}

// RunPodSandbox implements Runtime.
func (c *Client) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (_ string, err error) {
	defer func(start time.Time) { observe("run_podsandbox", start, err) }(time.Now())
	labels, err := withOwner(config.GetLabels(), c.node)
	if err != nil {
		return "", fmt.Errorf("running sandbox %s: %w", sandboxName(config), err)
	}
	config = proto.Clone(config).(*runtimeapi.PodSandboxConfig)
	config.Labels = labels
	ctx, cancel := context.WithTimeout(ctx, 2*c.opts.RuntimeRequestTimeout)
	defer cancel()
	id, err := c.runtime.RunPodSandbox(ctx, config, runtimeHandler)
	if err != nil {
		return "", fmt.Errorf("running sandbox %s: %w", sandboxName(config), err)
	}
	c.owned.add(id, "")
	return id, nil
}

// StopPodSandbox implements Runtime.
func (c *Client) StopPodSandbox(ctx context.Context, sandboxID string) (err error) {
	defer func(start time.Time) { observe("stop_podsandbox", start, err) }(time.Now())
	if err := c.checkSandboxOwned(ctx, sandboxID); err != nil {
		return ignoreNotFound(fmt.Errorf("stopping sandbox %s: %w", sandboxID, err))
	}
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	if err := c.runtime.StopPodSandbox(ctx, sandboxID); err != nil {
		return ignoreNotFound(fmt.Errorf("stopping sandbox %s: %w", sandboxID, err))
	}
	return nil
}

// RemovePodSandbox implements Runtime.
func (c *Client) RemovePodSandbox(ctx context.Context, sandboxID string) (err error) {
	defer func(start time.Time) { observe("remove_podsandbox", start, err) }(time.Now())
	if err := c.checkSandboxOwned(ctx, sandboxID); err != nil {
		if IsNotFound(err) {
			c.owned.forget(sandboxID)
		}
		return ignoreNotFound(fmt.Errorf("removing sandbox %s: %w", sandboxID, err))
	}
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	if err := c.runtime.RemovePodSandbox(ctx, sandboxID); err != nil && !IsNotFound(err) {
		return fmt.Errorf("removing sandbox %s: %w", sandboxID, err)
	}
	c.owned.forget(sandboxID)
	return nil
}

// PodSandboxStatus implements Runtime.
func (c *Client) PodSandboxStatus(ctx context.Context, sandboxID string) (_ *runtimeapi.PodSandboxStatus, err error) {
	defer func(start time.Time) { observe("podsandbox_status", start, err) }(time.Now())
	s, err := c.ownedSandbox(ctx, sandboxID)
	if err != nil {
		return nil, fmt.Errorf("getting status of sandbox %s: %w", sandboxID, err)
	}
	return s, nil
}

// ListPodSandboxes implements Runtime.
func (c *Client) ListPodSandboxes(ctx context.Context, filter *runtimeapi.PodSandboxFilter) (_ []*runtimeapi.PodSandbox, err error) {
	defer func(start time.Time) { observe("list_podsandbox", start, err) }(time.Now())
	f := &runtimeapi.PodSandboxFilter{}
	if filter != nil {
		f = proto.Clone(filter).(*runtimeapi.PodSandboxFilter)
	}
	f.LabelSelector = ownerSelector(f.GetLabelSelector(), c.node)
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	all, err := c.runtime.ListPodSandbox(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("listing sandboxes: %w", err)
	}
	// The selector already filters; this guards against a runtime that
	// ignores it.
	return keepOwned(all, c.node), nil
}

// CreateContainer implements Runtime.
func (c *Client) CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (_ string, err error) {
	defer func(start time.Time) { observe("create_container", start, err) }(time.Now())
	name := config.GetMetadata().GetName()
	labels, err := withOwner(config.GetLabels(), c.node)
	if err != nil {
		return "", fmt.Errorf("creating container %s in sandbox %s: %w", name, sandboxID, err)
	}
	if err := c.checkSandboxOwned(ctx, sandboxID); err != nil {
		return "", fmt.Errorf("creating container %s in sandbox %s: %w", name, sandboxID, err)
	}
	config = proto.Clone(config).(*runtimeapi.ContainerConfig)
	config.Labels = labels
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	id, err := c.runtime.CreateContainer(ctx, sandboxID, config, sandboxConfig)
	if err != nil {
		return "", fmt.Errorf("creating container %s in sandbox %s: %w", name, sandboxID, err)
	}
	c.owned.add(id, sandboxID)
	return id, nil
}

// StartContainer implements Runtime.
func (c *Client) StartContainer(ctx context.Context, containerID string) (err error) {
	defer func(start time.Time) { observe("start_container", start, err) }(time.Now())
	if err := c.checkContainerOwned(ctx, containerID); err != nil {
		return fmt.Errorf("starting container %s: %w", containerID, err)
	}
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	if err := c.runtime.StartContainer(ctx, containerID); err != nil {
		return fmt.Errorf("starting container %s: %w", containerID, err)
	}
	return nil
}

// StopContainer implements Runtime.
func (c *Client) StopContainer(ctx context.Context, containerID string, timeoutSeconds int64) (err error) {
	defer func(start time.Time) { observe("stop_container", start, err) }(time.Now())
	if err := c.checkContainerOwned(ctx, containerID); err != nil {
		return ignoreNotFound(fmt.Errorf("stopping container %s: %w", containerID, err))
	}
	grace := time.Duration(max(timeoutSeconds, 0)) * time.Second
	ctx, cancel := context.WithTimeout(ctx, c.opts.RuntimeRequestTimeout+grace)
	defer cancel()
	if err := c.runtime.StopContainer(ctx, containerID, timeoutSeconds); err != nil {
		return ignoreNotFound(fmt.Errorf("stopping container %s: %w", containerID, err))
	}
	return nil
}

// RemoveContainer implements Runtime.
func (c *Client) RemoveContainer(ctx context.Context, containerID string) (err error) {
	defer func(start time.Time) { observe("remove_container", start, err) }(time.Now())
	if err := c.checkContainerOwned(ctx, containerID); err != nil {
		if IsNotFound(err) {
			c.owned.forget(containerID)
		}
		return ignoreNotFound(fmt.Errorf("removing container %s: %w", containerID, err))
	}
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	if err := c.runtime.RemoveContainer(ctx, containerID); err != nil && !IsNotFound(err) {
		return fmt.Errorf("removing container %s: %w", containerID, err)
	}
	c.owned.forget(containerID)
	return nil
}

// UpdateContainerResources implements Runtime.
func (c *Client) UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.LinuxContainerResources) (err error) {
	defer func(start time.Time) { observe("update_container", start, err) }(time.Now())
	if err := c.checkContainerOwned(ctx, containerID); err != nil {
		return fmt.Errorf("updating resources of container %s: %w", containerID, err)
	}
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	if err := c.runtime.UpdateContainerResources(ctx, containerID, &runtimeapi.ContainerResources{Linux: resources}); err != nil {
		return fmt.Errorf("updating resources of container %s: %w", containerID, err)
	}
	return nil
}

// CheckpointContainer implements Runtime.
func (c *Client) CheckpointContainer(ctx context.Context, containerID, location string, timeout time.Duration) (err error) {
	defer func(start time.Time) { observe("checkpoint_container", start, err) }(time.Now())
	if err := c.checkContainerOwned(ctx, containerID); err != nil {
		return fmt.Errorf("checkpointing container %s: %w", containerID, err)
	}
	if timeout <= 0 {
		timeout = c.opts.RuntimeRequestTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req := &runtimeapi.CheckpointContainerRequest{ContainerId: containerID, Location: location, Timeout: int64(timeout / time.Second)}
	if err := c.runtime.CheckpointContainer(ctx, req); err != nil {
		return fmt.Errorf("checkpointing container %s: %w", containerID, err)
	}
	return nil
}

// ContainerStatus implements Runtime.
func (c *Client) ContainerStatus(ctx context.Context, containerID string) (_ *runtimeapi.ContainerStatus, err error) {
	defer func(start time.Time) { observe("container_status", start, err) }(time.Now())
	s, err := c.ownedContainer(ctx, containerID)
	if err != nil {
		return nil, fmt.Errorf("getting status of container %s: %w", containerID, err)
	}
	return s, nil
}

// ListContainers implements Runtime.
func (c *Client) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) (_ []*runtimeapi.Container, err error) {
	defer func(start time.Time) { observe("list_containers", start, err) }(time.Now())
	f := &runtimeapi.ContainerFilter{}
	if filter != nil {
		f = proto.Clone(filter).(*runtimeapi.ContainerFilter)
	}
	f.LabelSelector = ownerSelector(f.GetLabelSelector(), c.node)
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	all, err := c.runtime.ListContainers(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	return keepOwned(all, c.node), nil
}

// ExecSync implements Runtime.
func (c *Client) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error) {
	defer func(start time.Time) { observe("exec_sync", start, err) }(time.Now())
	if err := c.checkContainerOwned(ctx, containerID); err != nil {
		return nil, nil, fmt.Errorf("running command in container %s: %w", containerID, err)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.RuntimeRequestTimeout+timeout)
		defer cancel()
	}
	stdout, stderr, err = c.runtime.ExecSync(ctx, containerID, cmd, timeout)
	if err != nil {
		return stdout, stderr, fmt.Errorf("running command in container %s: %w", containerID, err)
	}
	return stdout, stderr, nil
}

// PullImage implements Runtime.
func (c *Client) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (_ string, err error) {
	defer func(start time.Time) { observe("pull_image", start, err) }(time.Now())
	ctx, cancel := context.WithTimeout(ctx, c.opts.ImagePullTimeout)
	defer cancel()
	ref, err := c.images.PullImage(ctx, image, auth, sandboxConfig)
	if err != nil {
		return "", fmt.Errorf("pulling image %q: %w", image.GetImage(), err)
	}
	return ref, nil
}

// ImageStatus implements Runtime.
func (c *Client) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec) (_ *runtimeapi.Image, err error) {
	defer func(start time.Time) { observe("image_status", start, err) }(time.Now())
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	resp, err := c.images.ImageStatus(ctx, image, false)
	if err != nil {
		return nil, fmt.Errorf("getting status of image %q: %w", image.GetImage(), err)
	}
	return resp.GetImage(), nil
}

// ListImages implements Runtime.
func (c *Client) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) (_ []*runtimeapi.Image, err error) {
	defer func(start time.Time) { observe("list_images", start, err) }(time.Now())
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	images, err := c.images.ListImages(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("listing images: %w", err)
	}
	return images, nil
}

// ownedSandbox returns the status of a sandbox, or an error wrapping
// ErrNotOwned when it is not ours. A NotFound from the runtime is returned
// as is.
func (c *Client) ownedSandbox(ctx context.Context, id string) (*runtimeapi.PodSandboxStatus, error) {
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	resp, err := c.runtime.PodSandboxStatus(ctx, id, false)
	if err != nil {
		return nil, err
	}
	if s := resp.GetStatus(); s != nil && IsOwned(s.GetLabels(), c.node) {
		c.owned.add(id, "")
		return s, nil
	}
	return nil, ErrNotOwned
}

// checkSandboxOwned is ownedSandbox for the calls that act on a sandbox:
// a sandbox remembered as ours is not looked at again.
func (c *Client) checkSandboxOwned(ctx context.Context, id string) error {
	if c.owned.has(id) {
		return nil
	}
	_, err := c.ownedSandbox(ctx, id)
	return err
}

// ownedContainer is ownedSandbox for a container.
func (c *Client) ownedContainer(ctx context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	resp, err := c.runtime.ContainerStatus(ctx, id, false)
	if err != nil {
		return nil, err
	}
	if s := resp.GetStatus(); s != nil && IsOwned(s.GetLabels(), c.node) {
		if !c.owned.has(id) {
			c.owned.add(id, "")
		}
		return s, nil
	}
	return nil, ErrNotOwned
}

// checkContainerOwned is ownedContainer for the calls that act on a
// container. It lists by ID rather than asking for the status, because
// cri-client logs every failed status call as an error, and a container
// already gone is routine for an idempotent stop or removal. A container the
// runtime does not know is reported as gRPC NotFound. A container remembered
// as ours is not looked at again: the runtime's own NotFound then tells a
// container that is gone.
func (c *Client) checkContainerOwned(ctx context.Context, id string) error {
	if c.owned.has(id) {
		return nil
	}
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	found, err := c.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{Id: id})
	if err != nil {
		return err
	}
	for _, ctr := range found {
		if ctr.GetId() != id {
			continue
		}
		if IsOwned(ctr.GetLabels(), c.node) {
			c.owned.add(id, ctr.GetPodSandboxId())
			return nil
		}
		return ErrNotOwned
	}
	return status.Error(codes.NotFound, "container "+id+" not found")
}

// ignoreNotFound turns a runtime NotFound into success, for the idempotent
// calls.
func ignoreNotFound(err error) error {
	if IsNotFound(err) {
		return nil
	}
	return err
}

// ownerSelector returns a copy of selector that also requires our
// ownership label; a caller's value for that label is overridden.
func ownerSelector(selector map[string]string, node string) map[string]string {
	out, err := withOwner(selector, node)
	if err != nil {
		out = OwnerLabels(node)
		for k, v := range selector {
			if k != LabelNode {
				out[k] = v
			}
		}
	}
	return out
}

// keepOwned returns the objects whose labels mark them as owned by node.
func keepOwned[T interface{ GetLabels() map[string]string }](objs []T, node string) []T {
	i := 0
	for i < len(objs) && IsOwned(objs[i].GetLabels(), node) {
		i++
	}
	if i == len(objs) {
		return objs // the runtime applied the selector: the usual case
	}
	out := make([]T, i, len(objs)-1)
	copy(out, objs[:i])
	for _, o := range objs[i+1:] {
		if IsOwned(o.GetLabels(), node) {
			out = append(out, o)
		}
	}
	return out
}

func sandboxName(config *runtimeapi.PodSandboxConfig) string {
	m := config.GetMetadata()
	return m.GetNamespace() + "/" + m.GetName()
}

// observe records one CRI operation that started at start and ended with
// err, under the kubelet's operation names.
func observe(operation string, start time.Time, err error) {
	metrics.RuntimeOperations.WithLabelValues(operation).Inc()
	metrics.RuntimeOperationsDuration.WithLabelValues(operation).Observe(time.Since(start).Seconds())
	if err != nil {
		metrics.RuntimeOperationsErrors.WithLabelValues(operation).Inc()
	}
}

package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodelet/nodelet/internal/checkpoint"
)

const (
	// DirName is the device plugins directory under the root directory.
	DirName = "device-plugins"
	// SocketName is the Registration server's socket in that directory.
	SocketName = "kubelet.sock"
	// DefaultGracePeriod is how long a resource whose plugin went away
	// stays in the Node's capacity (with nothing allocatable), as the
	// kubelet's endpoint stop grace period.
	DefaultGracePeriod = 5 * time.Minute
	// DefaultCallTimeout bounds each call on a plugin.
	DefaultCallTimeout = 10 * time.Second
)

// Options configure a Manager.
type Options struct {
	// Dir is the device plugins directory (<rootDir>/device-plugins).
	Dir string
	// GracePeriod is how long a stopped plugin's resource stays in the
	// capacity; zero is DefaultGracePeriod.
	GracePeriod time.Duration
	// CallTimeout bounds each plugin call; zero is DefaultCallTimeout.
	CallTimeout time.Duration
	// OnChange, when set, is called (without waiting on it being done)
	// when the resources the Node reports change.
	OnChange func()
	// OnHealthChange, when set (the ResourceHealthStatus gate), is told
	// of the pods holding a device whose health changed, so that their
	// status is written again; it must not block.
	OnHealthChange func(pods []types.UID)
	Logger         logr.Logger
}

// Manager serves the Registration API, watches the registered plugins and
// hands their devices to containers. Start it with Start (a
// manager.Runnable).
type Manager struct {
	opts  Options
	store checkpoint.Manager

	// allocMu serializes allocations, so a device picked is recorded
	// before the next pick.
	allocMu sync.Mutex

	mu        sync.Mutex
	resources map[string]*endpoint
	// removed are resources whose plugin stayed away past the grace
	// period: the Node's capacity drops them.
	removed     map[string]bool
	assignments map[key]*Assignment
	// generation numbers the endpoints.
	generation uint64
	// running is Start's context once it started: the life of the
	// plugins registered through the plugin watcher.
	running context.Context
}

// key names one container's share of one resource.
type key struct {
	pod       types.UID
	container string
	resource  string
}

// endpoint is one registered resource and its plugin.
type endpoint struct {
	socket  string
	gen     uint64
	client  pluginapi.DevicePluginClient
	conn    *grpc.ClientConn
	options *pluginapi.DevicePluginOptions
	cancel  context.CancelFunc
	// devices maps a device ID to its health.
	devices map[string]bool
	// listed: the plugin listed its devices since it registered (until
	// then devices holds those it had before, unhealthy).
	listed bool
	// stopped is when its stream ended; zero while it runs.
	stopped time.Time
}

// New returns a Manager for opts.Dir, reading the checkpointed state
// there. A corrupt checkpoint is set aside and logged; the manager starts
// empty.
func New(opts Options) (*Manager, error) {
	if opts.GracePeriod <= 0 {
		opts.GracePeriod = DefaultGracePeriod
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	store, err := checkpoint.NewFileStore(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("opening device plugins directory: %w", err)
	}
	m := &Manager{opts: opts, store: store, resources: map[string]*endpoint{}, removed: map[string]bool{}, assignments: map[key]*Assignment{}}
	st, err := LoadState(store)
	if err != nil {
		opts.Logger.Error(err, "Unable to read the device assignments, starting without them")
	}
	now := time.Now()
	for _, a := range st.Assignments {
		m.assignments[key{a.PodUID, a.ContainerName, a.ResourceName}] = &a
	}
	// A resource registered before the restart is kept, without devices,
	// as the kubelet keeps it: the Node reports it with capacity 0 until
	// its plugin registers again, and drops it after the grace period.
	for name := range st.Registered {
		m.resources[name] = &endpoint{devices: map[string]bool{}, stopped: now}
	}
	return m, nil
}

// Start serves the Registration API on Dir/kubelet.sock until ctx ends.
// The socket is made anew, so that plugins watching it register again.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	m.running = ctx
	m.mu.Unlock()
	sock := filepath.Join(m.opts.Dir, SocketName)
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing stale device plugin registration socket: %w", err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		// Pods without devices must not stop with it (a root directory
		// too deep for a socket path, in tests and simulations).
		m.opts.Logger.Error(err, "Unable to serve device plugin registrations, no device plugin can register", "socket", sock)
		<-ctx.Done()
		return nil
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		_ = l.Close()
		return fmt.Errorf("restricting device plugin registration socket: %w", err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, &registration{m: m, ctx: ctx})
	m.mu.Lock()
	for name, ep := range m.resources {
		if ep.client == nil {
			m.expireLater(name, ep)
		}
	}
	m.mu.Unlock()
	m.opts.Logger.Info("Serving device plugin registrations", "socket", sock)
	go func() {
		<-ctx.Done()
		srv.Stop()
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, ep := range m.resources {
			if ep.cancel != nil {
				ep.cancel()
			}
		}
	}()
	if err := srv.Serve(l); err != nil && ctx.Err() == nil {
		return fmt.Errorf("serving device plugin registrations: %w", err)
	}
	return nil
}

type registration struct {
	pluginapi.UnimplementedRegistrationServer
	m   *Manager
	ctx context.Context
}

func (r *registration) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	if err := ValidateRegistration(req); err != nil {
		r.m.opts.Logger.Info("Refused device plugin registration", "resource", req.GetResourceName(), "endpoint", req.GetEndpoint(), "err", err)
		return nil, err
	}
	r.m.opts.Logger.Info("Registering device plugin", "resource", req.GetResourceName(), "endpoint", req.GetEndpoint())
	// Connect after answering: a plugin may serve only once registered.
	go r.m.connect(r.ctx, req.GetResourceName(), filepath.Join(r.m.opts.Dir, req.GetEndpoint()), req.GetOptions())
	return &pluginapi.Empty{}, nil
}

// connect dials a registered plugin and watches its devices, replacing the
// resource's earlier endpoint.
func (m *Manager) connect(ctx context.Context, name, socket string, opts *pluginapi.DevicePluginOptions) {
	log := m.opts.Logger.WithValues("resource", name, "endpoint", socket)
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Error(err, "Unable to connect to device plugin")
		return
	}
	client := pluginapi.NewDevicePluginClient(conn)
	sctx, cancel := context.WithCancel(ctx)
	stream, err := client.ListAndWatch(sctx, &pluginapi.Empty{})
	if err != nil {
		cancel()
		_ = conn.Close()
		log.Error(err, "Unable to watch device plugin's devices")
		return
	}
	if opts == nil {
		opts = &pluginapi.DevicePluginOptions{}
	}
	m.mu.Lock()
	before := m.healthViewLocked(name)
	m.generation++
	ep := &endpoint{socket: socket, gen: m.generation, client: client, conn: conn, options: opts, cancel: cancel, devices: map[string]bool{}}
	if old := m.resources[name]; old != nil {
		ep.devices = old.devices // unhealthy until the plugin lists them
		for id := range ep.devices {
			ep.devices[id] = false
		}
		if old.cancel != nil {
			old.cancel()
		}
	}
	m.resources[name] = ep
	delete(m.removed, name)
	pods := m.podsToUpdateLocked(name, before)
	m.mu.Unlock()
	m.healthChanged(pods)
	for {
		resp, err := stream.Recv()
		if err != nil {
			log.Info("Device plugin stream ended, its devices are unhealthy", "err", err)
			m.stop(name, ep)
			return
		}
		devices := map[string]bool{}
		for _, d := range resp.GetDevices() {
			devices[d.GetID()] = d.GetHealth() == pluginapi.Healthy
		}
		m.mu.Lock()
		var pods []types.UID
		if m.resources[name] == ep {
			before := m.healthViewLocked(name)
			ep.devices = devices
			ep.listed = true
			pods = m.podsToUpdateLocked(name, before)
		}
		m.mu.Unlock()
		log.V(1).Info("Device plugin listed devices", "devices", len(devices))
		m.changed()
		m.healthChanged(pods)
	}
}

// stop marks a plugin's devices unhealthy (their health Unknown in pod
// statuses) when its stream ends, and drops the resource after the grace
// period unless it registers again.
func (m *Manager) stop(name string, ep *endpoint) {
	m.mu.Lock()
	ep.cancel()
	_ = ep.conn.Close()
	if m.resources[name] != ep {
		m.mu.Unlock()
		m.changed()
		return // replaced by a new registration
	}
	before := m.healthViewLocked(name)
	for id := range ep.devices {
		ep.devices[id] = false
	}
	ep.stopped = time.Now()
	ep.client = nil
	m.expireLater(name, ep)
	m.saveLocked()
	pods := m.podsToUpdateLocked(name, before)
	m.mu.Unlock()
	m.changed()
	m.healthChanged(pods)
}

// expireLater drops the resource after the grace period if ep is still its
// endpoint then. m.mu is held.
func (m *Manager) expireLater(name string, ep *endpoint) {
	time.AfterFunc(time.Until(ep.stopped.Add(m.opts.GracePeriod)), func() {
		m.mu.Lock()
		if m.resources[name] != ep {
			m.mu.Unlock()
			return
		}
		delete(m.resources, name)
		m.removed[name] = true
		m.saveLocked()
		m.mu.Unlock()
		m.opts.Logger.Info("Device plugin resource removed after its grace period", "resource", name)
		m.changed()
	})
}

func (m *Manager) changed() {
	if m.opts.OnChange != nil {
		m.opts.OnChange()
	}
}

// Resources returns the device resources for the Node's status: capacity
// and allocatable of the registered ones, and the resources to drop.
func (m *Manager) Resources() (capacity, allocatable corev1.ResourceList, removed []corev1.ResourceName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	counts := map[string]Counts{}
	for name, ep := range m.resources {
		counts[name] = CountDevices(ep.devices)
	}
	for name := range m.removed {
		removed = append(removed, corev1.ResourceName(name))
	}
	capacity, allocatable = ResourceLists(counts)
	return capacity, allocatable, removed
}

// saveLocked checkpoints the state; m.mu is held. A failed write is
// logged: the state in memory stays right, the next write retries.
func (m *Manager) saveLocked() {
	st := State{Registered: map[string][]string{}}
	for name, ep := range m.resources {
		st.Registered[name] = slices.Sorted(maps.Keys(ep.devices))
	}
	for _, a := range m.assignments {
		st.Assignments = append(st.Assignments, *a)
	}
	if err := SaveState(m.store, st); err != nil {
		m.opts.Logger.Error(err, "Unable to save device assignments")
	}
}

// Allocate gives each container of pod that asks for a plugin's resource
// the devices it needs, asking the plugin to allocate them, and records
// the assignments; containers that hold theirs already keep them. Pods not
// in active (and not pod) lose their devices first. On error the pod holds
// no devices.
func (m *Manager) Allocate(ctx context.Context, pod *corev1.Pod, active map[types.UID]bool) error {
	m.allocMu.Lock()
	defer m.allocMu.Unlock()
	m.mu.Lock()
	freed := false
	for k := range m.assignments {
		if k.pod != pod.UID && !active[k.pod] {
			delete(m.assignments, k)
			freed = true
		}
	}
	if freed {
		m.saveLocked()
	}
	m.mu.Unlock()
	if err := m.allocatePod(ctx, pod); err != nil {
		m.Free(pod.UID)
		return err
	}
	return nil
}

func (m *Manager) allocatePod(ctx context.Context, pod *corev1.Pod) error {
	known := func(name string) bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		_, ok := m.resources[name]
		return ok
	}
	// reusable are the devices the pod's finished init containers held.
	reusable := map[string][]string{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if err := m.allocateContainer(ctx, pod, c, known, reusable); err != nil {
			return err
		}
		if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			m.mu.Lock()
			for name := range Need(c, func(string) bool { return true }) {
				if a := m.assignments[key{pod.UID, c.Name, name}]; a != nil {
					reusable[name] = slices.Clone(a.DeviceIDs)
				}
			}
			m.mu.Unlock()
		}
	}
	for i := range pod.Spec.Containers {
		if err := m.allocateContainer(ctx, pod, &pod.Spec.Containers[i], known, reusable); err != nil {
			return err
		}
	}
	return nil
}

func (m *Manager) allocateContainer(ctx context.Context, pod *corev1.Pod, c *corev1.Container, known func(string) bool, reusable map[string][]string) error {
	for _, name := range slices.Sorted(maps.Keys(Need(c, known))) {
		n := Need(c, known)[name]
		k := key{pod.UID, c.Name, name}
		m.mu.Lock()
		if _, done := m.assignments[k]; done {
			m.mu.Unlock()
			continue
		}
		ep := m.resources[name]
		if ep == nil || ep.client == nil {
			m.mu.Unlock()
			return fmt.Errorf("device plugin of resource %s is not running", name)
		}
		inUse := map[string]bool{}
		for ak, a := range m.assignments {
			if ak.resource == name {
				for _, id := range a.DeviceIDs {
					inUse[id] = true
				}
			}
		}
		// An init container's devices pass to the pod's next containers,
		// unless one of them took them over already.
		var reuse []string
		for _, id := range reusable[name] {
			if !inUse[id] || m.heldOnlyByInit(pod, name, id) {
				reuse = append(reuse, id)
			}
		}
		available := Available(ep.devices, inUse)
		client, opts := ep.client, ep.options
		m.mu.Unlock()

		var preferred []string
		if opts.GetGetPreferredAllocationAvailable() {
			p, err := m.preferred(ctx, client, n, reuse, available)
			if err != nil {
				return err
			}
			preferred = p
		}
		ids, err := PickDevices(name, n, reuse, available, preferred)
		if err != nil {
			return err
		}
		reusable[name] = slices.DeleteFunc(reusable[name], func(id string) bool { return slices.Contains(ids, id) })
		a := &Assignment{PodUID: pod.UID, ContainerName: c.Name, ResourceName: name, DeviceIDs: ids}
		m.mu.Lock()
		m.assignments[k] = a
		m.mu.Unlock()
		resp, err := m.allocateCall(ctx, client, ids)
		if err != nil {
			return fmt.Errorf("allocating devices %v of %s for container %s: %w", ids, name, c.Name, err)
		}
		m.mu.Lock()
		a.AllocResp = resp
		m.saveLocked()
		m.mu.Unlock()
		m.opts.Logger.Info("Allocated devices", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "resource", name, "devices", ids)
	}
	return nil
}

// heldOnlyByInit says whether the pod's own non-sidecar init containers
// are all that hold device id of name. m.mu is held.
func (m *Manager) heldOnlyByInit(pod *corev1.Pod, name, id string) bool {
	for k, a := range m.assignments {
		if k.resource != name || !slices.Contains(a.DeviceIDs, id) {
			continue
		}
		if k.pod != pod.UID || !isPlainInit(pod, k.container) {
			return false
		}
	}
	return true
}

func isPlainInit(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways
		}
	}
	return false
}

func (m *Manager) preferred(ctx context.Context, client pluginapi.DevicePluginClient, n int, must, available []string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, m.opts.CallTimeout)
	defer cancel()
	resp, err := client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
		AvailableDeviceIDs: append(slices.Clone(must), available...), MustIncludeDeviceIDs: must, AllocationSize: int32(n),
	}}})
	if err != nil {
		return nil, fmt.Errorf("asking the device plugin for a preferred allocation: %w", err)
	}
	if rs := resp.GetContainerResponses(); len(rs) > 0 {
		return rs[0].GetDeviceIDs(), nil
	}
	return nil, nil
}

func (m *Manager) allocateCall(ctx context.Context, client pluginapi.DevicePluginClient, ids []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, m.opts.CallTimeout)
	defer cancel()
	resp, err := client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
	if err != nil {
		return nil, err
	}
	if len(resp.GetContainerResponses()) != 1 {
		return nil, fmt.Errorf("the plugin answered %d container responses for 1 request", len(resp.GetContainerResponses()))
	}
	b, err := proto.Marshal(resp.GetContainerResponses()[0])
	if err != nil {
		return nil, fmt.Errorf("encoding the allocate response: %w", err)
	}
	return b, nil
}

// Free drops the pod's assignments (the pod is terminal or gone).
func (m *Manager) Free(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	freed := false
	for k := range m.assignments {
		if k.pod == uid {
			delete(m.assignments, k)
			freed = true
		}
	}
	if freed {
		m.saveLocked()
	}
}

// Assigned returns the devices the container holds, by resource.
func (m *Manager) Assigned(uid types.UID, container string) map[string][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]string{}
	for k, a := range m.assignments {
		if k.pod == uid && k.container == container {
			out[k.resource] = slices.Clone(a.DeviceIDs)
		}
	}
	return out
}

// Healthy returns the healthy devices of each registered resource, sorted.
func (m *Manager) Healthy() map[string][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]string{}
	for name, ep := range m.resources {
		out[name] = Available(ep.devices, nil)
	}
	return out
}

package dradriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	resourceapi "k8s.io/api/resource/v1"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// EnvName is the variable each device's CDI spec sets to the device's
	// name.
	EnvName = "DRA_DEVICE"
	// MountPath is where each device's CDI spec mounts the driver's share
	// directory, which holds a file named after the device.
	MountPath = "/dra"
	// CDIKind is the kind of the driver's CDI devices: their IDs are
	// <CDIKind>=<device>.
	CDIKind = "nodelet.test/dra"
	// HealthTimeout is the health_check_timeout_seconds of the driver's
	// health reports: it reports only on change, so each report holds
	// long.
	HealthTimeout = 10 * time.Minute
)

// Driver is a stand-in DRA driver.
type Driver struct {
	drapb.UnimplementedDRAPluginServer

	// Name is the driver's name, as allocations and DeviceClasses name it.
	Name string
	// RegistryDir is the agent's plugins_registry directory, where the
	// registration socket <Name>-reg.sock goes.
	RegistryDir string
	// PluginDir holds the driver's DRA socket (dra.sock) and its share
	// directory.
	PluginDir string
	// CDIDir is where the driver writes its CDI spec; "" writes none.
	CDIDir string
	// Reader reads the claims the agent asks to prepare.
	Reader client.Reader
	// FailPrepare, when set, is the error each claim's preparation
	// answers.
	FailPrepare string

	mu          sync.Mutex
	servers     []*grpc.Server
	devices     map[string]bool
	prepared    []string
	unprepared  []string
	registered  []bool
	regMessages []string
	// health is each device's health, by pool and device, as SetHealth
	// set it; watchers are the open health streams' wake-ups.
	health   map[string]*drahealthv1.DeviceHealth
	watchers map[chan struct{}]bool
}

// Endpoint is the driver's DRA socket.
func (d *Driver) Endpoint() string { return filepath.Join(d.PluginDir, "dra.sock") }

// RegistrationSocket is the driver's registration socket.
func (d *Driver) RegistrationSocket() string {
	return filepath.Join(d.RegistryDir, d.Name+"-reg.sock")
}

// ShareDir is the host directory each device's CDI spec mounts.
func (d *Driver) ShareDir() string { return filepath.Join(d.PluginDir, "share") }

// Start serves the DRA socket, then the registration socket (made anew):
// the agent registers the driver once it sees it.
func (d *Driver) Start() error {
	if err := os.MkdirAll(d.ShareDir(), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(d.RegistryDir, 0o750); err != nil {
		return err
	}
	dra, err := listen(d.Endpoint())
	if err != nil {
		return err
	}
	reg, err := listen(d.RegistrationSocket())
	if err != nil {
		_ = dra.Close()
		return err
	}
	draSrv, regSrv := grpc.NewServer(), grpc.NewServer()
	drapb.RegisterDRAPluginServer(draSrv, d)
	drahealthv1.RegisterDRAResourceHealthServer(draSrv, healthServer{d: d})
	registerapi.RegisterRegistrationServer(regSrv, registration{d: d})
	d.mu.Lock()
	d.servers = []*grpc.Server{draSrv, regSrv}
	d.mu.Unlock()
	go func() { _ = draSrv.Serve(dra) }()
	go func() { _ = regSrv.Serve(reg) }()
	return nil
}

func listen(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	return l, nil
}

// Stop removes the registration socket (the agent deregisters the
// driver) and stops serving.
func (d *Driver) Stop() {
	_ = os.Remove(d.RegistrationSocket())
	d.mu.Lock()
	servers := d.servers
	d.servers = nil
	d.mu.Unlock()
	for _, s := range servers {
		s.Stop()
	}
	_ = os.Remove(d.Endpoint())
}

// Prepared returns the UIDs of the claims of each NodePrepareResources
// call so far, in order.
func (d *Driver) Prepared() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.prepared)
}

// Unprepared returns the UIDs of the claims of each
// NodeUnprepareResources call so far, in order.
func (d *Driver) Unprepared() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.unprepared)
}

// Registrations returns the outcome of each registration the agent
// reported, and its error messages.
func (d *Driver) Registrations() ([]bool, []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.registered), slices.Clone(d.regMessages)
}

// NodePrepareResources answers each claim with its devices of this
// driver, one CDI device each, and writes their CDI spec first.
func (d *Driver) NodePrepareResources(ctx context.Context, req *drapb.NodePrepareResourcesRequest) (*drapb.NodePrepareResourcesResponse, error) {
	resp := &drapb.NodePrepareResourcesResponse{Claims: map[string]*drapb.NodePrepareResourceResponse{}}
	for _, c := range req.GetClaims() {
		d.mu.Lock()
		d.prepared = append(d.prepared, c.GetUid())
		d.mu.Unlock()
		if d.FailPrepare != "" {
			resp.Claims[c.GetUid()] = &drapb.NodePrepareResourceResponse{Error: d.FailPrepare}
			continue
		}
		devices, err := d.devicesOf(ctx, c)
		if err != nil {
			resp.Claims[c.GetUid()] = &drapb.NodePrepareResourceResponse{Error: err.Error()}
			continue
		}
		resp.Claims[c.GetUid()] = &drapb.NodePrepareResourceResponse{Devices: devices}
	}
	return resp, nil
}

// devicesOf reads the claim and returns its devices of this driver,
// with their CDI spec written.
func (d *Driver) devicesOf(ctx context.Context, c *drapb.Claim) ([]*drapb.Device, error) {
	claim := &resourceapi.ResourceClaim{}
	if err := d.Reader.Get(ctx, client.ObjectKey{Namespace: c.GetNamespace(), Name: c.GetName()}, claim); err != nil {
		return nil, fmt.Errorf("reading claim %s/%s: %w", c.GetNamespace(), c.GetName(), err)
	}
	if string(claim.UID) != c.GetUid() || claim.Status.Allocation == nil {
		return nil, fmt.Errorf("claim %s/%s is not the allocated claim %s", c.GetNamespace(), c.GetName(), c.GetUid())
	}
	var out []*drapb.Device
	var names []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != d.Name {
			continue
		}
		out = append(out, &drapb.Device{
			RequestNames: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device,
			CdiDeviceIds: []string{CDIKind + "=" + r.Device},
		})
		names = append(names, r.Device)
	}
	if err := d.writeSpec(names); err != nil {
		return nil, err
	}
	return out, nil
}

// writeSpec adds devices to the driver's CDI spec and rewrites it.
func (d *Driver) writeSpec(devices []string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.devices == nil {
		d.devices = map[string]bool{}
	}
	for _, name := range devices {
		d.devices[name] = true
		if err := os.WriteFile(filepath.Join(d.ShareDir(), name), []byte(name+"\n"), 0o644); err != nil {
			return err
		}
	}
	if d.CDIDir == "" {
		return nil
	}
	type mount struct {
		HostPath      string   `json:"hostPath"`
		ContainerPath string   `json:"containerPath"`
		Options       []string `json:"options"`
	}
	type edits struct {
		Env    []string `json:"env"`
		Mounts []mount  `json:"mounts"`
	}
	type device struct {
		Name           string `json:"name"`
		ContainerEdits edits  `json:"containerEdits"`
	}
	spec := struct {
		CDIVersion string   `json:"cdiVersion"`
		Kind       string   `json:"kind"`
		Devices    []device `json:"devices"`
	}{CDIVersion: "0.6.0", Kind: CDIKind}
	for _, name := range slices.Sorted(maps.Keys(d.devices)) {
		spec.Devices = append(spec.Devices, device{Name: name, ContainerEdits: edits{
			Env:    []string{EnvName + "=" + name},
			Mounts: []mount{{HostPath: d.ShareDir(), ContainerPath: MountPath, Options: []string{"rbind", "ro"}}},
		}})
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d.CDIDir, 0o755); err != nil {
		return err
	}
	// Written aside and renamed: the runtime watches the directory.
	path := filepath.Join(d.CDIDir, "nodelet.test-dra.json")
	if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// NodeUnprepareResources records the claims and answers each with no
// error.
func (d *Driver) NodeUnprepareResources(_ context.Context, req *drapb.NodeUnprepareResourcesRequest) (*drapb.NodeUnprepareResourcesResponse, error) {
	resp := &drapb.NodeUnprepareResourcesResponse{Claims: map[string]*drapb.NodeUnprepareResourceResponse{}}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range req.GetClaims() {
		d.unprepared = append(d.unprepared, c.GetUid())
		resp.Claims[c.GetUid()] = &drapb.NodeUnprepareResourceResponse{}
	}
	return resp, nil
}

// registration is the driver's registration service.
type registration struct {
	registerapi.UnimplementedRegistrationServer
	d *Driver
}

func (r registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.DRAPlugin,
		Name:              r.d.Name,
		Endpoint:          r.d.Endpoint(),
		SupportedVersions: []string{drapb.DRAPluginService, drahealthv1.DRAResourceHealthService},
	}, nil
}

func (r registration) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	r.d.registered = append(r.d.registered, st.GetPluginRegistered())
	if st.GetError() != "" {
		r.d.regMessages = append(r.d.regMessages, st.GetError())
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// SetHealth sets a device's health and message, and sends the health of
// every device set so far on each open health stream.
func (d *Driver) SetHealth(pool, device string, health drahealthv1.HealthStatus, message string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.health == nil {
		d.health = map[string]*drahealthv1.DeviceHealth{}
	}
	d.health[pool+"/"+device] = &drahealthv1.DeviceHealth{
		Device:                    &drahealthv1.DeviceIdentifier{PoolName: pool, DeviceName: device},
		Health:                    health,
		Message:                   message,
		LastUpdatedTime:           time.Now().Unix(),
		HealthCheckTimeoutSeconds: int64(HealthTimeout / time.Second),
	}
	for ch := range d.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (d *Driver) healthReport() *drahealthv1.NodeWatchResourcesResponse {
	d.mu.Lock()
	defer d.mu.Unlock()
	resp := &drahealthv1.NodeWatchResourcesResponse{}
	for _, key := range slices.Sorted(maps.Keys(d.health)) {
		resp.Devices = append(resp.Devices, d.health[key])
	}
	return resp
}

// healthServer is the driver's DRAResourceHealth service.
type healthServer struct {
	drahealthv1.UnimplementedDRAResourceHealthServer
	d *Driver
}

// NodeWatchResources sends the health of every device set so far, and
// again at each change, until the agent closes the stream.
func (h healthServer) NodeWatchResources(_ *drahealthv1.NodeWatchResourcesRequest, s grpc.ServerStreamingServer[drahealthv1.NodeWatchResourcesResponse]) error {
	wake := make(chan struct{}, 1)
	h.d.mu.Lock()
	if h.d.watchers == nil {
		h.d.watchers = map[chan struct{}]bool{}
	}
	h.d.watchers[wake] = true
	h.d.mu.Unlock()
	defer func() {
		h.d.mu.Lock()
		delete(h.d.watchers, wake)
		h.d.mu.Unlock()
	}()
	for {
		if err := s.Send(h.d.healthReport()); err != nil {
			return err
		}
		select {
		case <-s.Context().Done():
			return nil
		case <-wake:
		}
	}
}

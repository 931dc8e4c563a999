package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// EnvName is the variable Allocate sets to the allocated device IDs,
// comma-separated.
const EnvName = "DEVICE_ID"

// Plugin is a stand-in device plugin.
type Plugin struct {
	pluginapi.UnimplementedDevicePluginServer

	// Dir is the agent's device plugins directory; Resource the extended
	// resource; Endpoint the socket's file name in Dir; Devices the device
	// IDs it advertises, all healthy.
	Dir, Resource, Endpoint string
	Devices                 []string
	// PreStartRequired and Preferred are the options it registers with.
	PreStartRequired, Preferred bool
	// RegistryDir, when set, is the agent's plugins_registry directory:
	// the plugin registers through the plugin watcher there (a
	// registration socket named after Endpoint) instead of kubelet.sock.
	RegistryDir string

	mu        sync.Mutex
	server    *grpc.Server
	regServer *grpc.Server
	// registered are the plugin watcher's answers, in order.
	registered []bool
	unhealthy  map[string]bool
	updates    chan struct{}
	allocated  [][]string
	preStarts  [][]string
}

// Start serves the plugin's socket (made anew) and registers with the
// agent's kubelet.sock.
func (p *Plugin) Start(ctx context.Context) error {
	sock := filepath.Join(p.Dir, p.Endpoint)
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", sock, err)
	}
	p.mu.Lock()
	p.server = grpc.NewServer()
	p.updates = make(chan struct{}, 1)
	pluginapi.RegisterDevicePluginServer(p.server, p)
	srv := p.server
	p.mu.Unlock()
	go func() { _ = srv.Serve(l) }()
	if p.RegistryDir != "" {
		return p.serveRegistration()
	}
	return p.Register(ctx)
}

// serveRegistration serves the plugin watcher's Registration service on
// RegistryDir/<Endpoint>.
func (p *Plugin) serveRegistration() error {
	sock := filepath.Join(p.RegistryDir, p.Endpoint)
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", sock, err)
	}
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, registration{p: p})
	p.mu.Lock()
	p.regServer = srv
	p.mu.Unlock()
	go func() { _ = srv.Serve(l) }()
	return nil
}

// Registered returns the plugin watcher's answers so far (true: accepted).
func (p *Plugin) Registered() []bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.registered)
}

// registration is the plugin's Registration service for the plugin
// watcher.
type registration struct {
	registerapi.UnimplementedRegistrationServer
	p *Plugin
}

func (r registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.DevicePlugin,
		Name:              r.p.Resource,
		Endpoint:          filepath.Join(r.p.Dir, r.p.Endpoint),
		SupportedVersions: []string{pluginapi.Version},
	}, nil
}

func (r registration) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	r.p.registered = append(r.p.registered, st.GetPluginRegistered())
	return &registerapi.RegistrationStatusResponse{}, nil
}

// Register registers the plugin with the agent (again).
func (p *Plugin) Register(ctx context.Context) error {
	conn, err := grpc.NewClient("unix://"+filepath.Join(p.Dir, "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: p.Endpoint, ResourceName: p.Resource,
		Options: &pluginapi.DevicePluginOptions{PreStartRequired: p.PreStartRequired, GetPreferredAllocationAvailable: p.Preferred},
	})
	if err != nil {
		return fmt.Errorf("registering %s: %w", p.Resource, err)
	}
	return nil
}

// Stop stops serving: the agent's streams end.
func (p *Plugin) Stop() {
	p.mu.Lock()
	srv, reg := p.server, p.regServer
	p.server, p.regServer = nil, nil
	p.mu.Unlock()
	if reg != nil {
		reg.Stop()
		_ = os.Remove(filepath.Join(p.RegistryDir, p.Endpoint))
	}
	if srv != nil {
		srv.Stop()
	}
	_ = os.Remove(filepath.Join(p.Dir, p.Endpoint))
}

// SetHealthy changes one device's health and tells the agent.
func (p *Plugin) SetHealthy(id string, healthy bool) {
	p.mu.Lock()
	if p.unhealthy == nil {
		p.unhealthy = map[string]bool{}
	}
	p.unhealthy[id] = !healthy
	ch := p.updates
	p.mu.Unlock()
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Allocated returns the device IDs of each Allocate call so far.
func (p *Plugin) Allocated() [][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]string(nil), p.allocated...)
}

// PreStarts returns the device IDs of each PreStartContainer call so far.
func (p *Plugin) PreStarts() [][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]string(nil), p.preStarts...)
}

// GetDevicePluginOptions returns the options the plugin registers with.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{PreStartRequired: p.PreStartRequired, GetPreferredAllocationAvailable: p.Preferred}, nil
}

func (p *Plugin) list() *pluginapi.ListAndWatchResponse {
	p.mu.Lock()
	defer p.mu.Unlock()
	resp := &pluginapi.ListAndWatchResponse{}
	for _, id := range p.Devices {
		h := pluginapi.Healthy
		if p.unhealthy[id] {
			h = pluginapi.Unhealthy
		}
		resp.Devices = append(resp.Devices, &pluginapi.Device{ID: id, Health: h})
	}
	return resp
}

// ListAndWatch sends the devices, and again at each health change.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	p.mu.Lock()
	updates := p.updates
	p.mu.Unlock()
	for {
		if err := s.Send(p.list()); err != nil {
			return err
		}
		select {
		case <-s.Context().Done():
			return nil
		case <-updates:
		}
	}
}

// GetPreferredAllocation prefers the last devices, so a test can tell the
// preference was asked for and followed.
func (p *Plugin) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, r := range req.GetContainerRequests() {
		ids := append([]string(nil), r.GetMustIncludeDeviceIDs()...)
		avail := r.GetAvailableDeviceIDs()
		for i := len(avail) - 1; i >= 0 && len(ids) < int(r.GetAllocationSize()); i-- {
			if !contains(ids, avail[i]) {
				ids = append(ids, avail[i])
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Allocate answers each container request with DEVICE_ID=<ids> and an
// annotation naming them.
func (p *Plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range req.GetContainerRequests() {
		p.allocated = append(p.allocated, r.GetDevicesIds())
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs:        map[string]string{EnvName: strings.Join(r.GetDevicesIds(), ",")},
			Annotations: map[string]string{"test.nodelet.io/devices": strings.Join(r.GetDevicesIds(), ",")},
		})
	}
	return resp, nil
}

// PreStartContainer records the devices it was called for.
func (p *Plugin) PreStartContainer(_ context.Context, req *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.preStarts = append(p.preStarts, req.GetDevicesIds())
	return &pluginapi.PreStartContainerResponse{}, nil
}

package csi

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/equality"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

const regTestDriver = "hostpath.csi.example.com"

// startWatcher runs a watcher on a fresh registry directory for the rest of
// the test.
func startWatcher(t *testing.T, dir string) (*Registry, *fakeInstaller) {
	t.Helper()
	return startWatcherCtx(t, context.Background(), dir)
}

// startWatcherCtx is startWatcher with the watcher's context (its logger).
func startWatcherCtx(t *testing.T, parent context.Context, dir string) (*Registry, *fakeInstaller) {
	t.Helper()
	reg := NewRegistry()
	inst := &fakeInstaller{}
	w := NewWatcher(WatcherOptions{Dir: dir, Registry: reg, Installer: inst, RetryPeriod: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(parent)
	done := make(chan error, 1)
	go func() { done <- w.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watcher: %v", err)
		}
		reg.Close()
	})
	return reg, inst
}

func csiInfo(name, endpoint string, versions ...string) *registerapi.PluginInfo {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: name, Endpoint: endpoint, SupportedVersions: versions}
}

func nodeInfoResponse() *csipb.NodeGetInfoResponse {
	return &csipb.NodeGetInfoResponse{
		NodeId:             "node-1",
		MaxVolumesPerNode:  7,
		AccessibleTopology: &csipb.Topology{Segments: map[string]string{"topology.hostpath.csi/node": "node-1"}},
	}
}

func TestWatcherRegistersCSIDriver(t *testing.T) {
	base := shortTempDir(t)
	dir := filepath.Join(base, "plugins_registry")
	drv := startCSINodeFake(t, base, nodeInfoResponse())
	reg, inst := startWatcher(t, dir)
	eventually(t, "the registry directory", func() bool { _, err := os.Stat(dir); return err == nil })
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o750 {
		t.Errorf("registry directory mode = %v, want 0750", fi.Mode().Perm())
	}
	// Not a socket: ignored.
	if err := os.WriteFile(filepath.Join(dir, "not-a-socket"), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	r := startRegistrar(t, filepath.Join(dir, regTestDriver+"-reg.sock"), csiInfo(regTestDriver, drv.endpoint, "1.0.0"))
	if s := r.nextStatus(t); !s.PluginRegistered || s.Error != "" {
		t.Fatalf("status = %+v, want registered", s)
	}
	d, ok := reg.Driver(regTestDriver)
	if !ok {
		t.Fatal("driver not in the registry after a successful registration")
	}
	if d.Endpoint != drv.endpoint || d.Socket != r.path || strings.Join(d.Versions, ",") != "1.0.0" {
		t.Errorf("registered driver = %+v", d)
	}
	want := DriverNodeInfo{NodeID: "node-1", MaxVolumes: 7, Topology: map[string]string{"topology.hostpath.csi/node": "node-1"}}
	if got, ok := inst.get(regTestDriver); !ok || !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("installed = %+v, %v; want %+v", got, ok, want)
	}
	if drv.calls() != 1 {
		t.Errorf("NodeGetInfo calls = %d, want 1", drv.calls())
	}
	nc, err := reg.NodeClient(context.Background(), regTestDriver)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.NodeGetInfo(context.Background(), &csipb.NodeGetInfoRequest{}); err != nil {
		t.Fatalf("NodeGetInfo through the registry: %v", err)
	}
	if names := reg.Names(); len(names) != 1 || names[0] != regTestDriver {
		t.Errorf("names = %v", names)
	}
}

func TestWatcherRegistersSocketsPresentAtStart(t *testing.T) {
	base := shortTempDir(t)
	dir := filepath.Join(base, "plugins_registry")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o750); err != nil {
		t.Fatal(err)
	}
	drv := startCSINodeFake(t, base, nodeInfoResponse())
	r := startRegistrar(t, filepath.Join(dir, "sub", "reg.sock"), csiInfo(regTestDriver, drv.endpoint, "1.0.0"))
	hidden := startRegistrar(t, filepath.Join(dir, ".hidden.sock"), csiInfo("hidden.example.com", drv.endpoint, "1.0.0"))
	reg, _ := startWatcher(t, dir)
	if s := r.nextStatus(t); !s.PluginRegistered {
		t.Fatalf("status = %+v, want registered", s)
	}
	if _, ok := reg.Driver(regTestDriver); !ok {
		t.Fatal("driver not registered")
	}
	select {
	case s := <-hidden.statuses:
		t.Errorf("a socket whose name starts with a dot was registered: %+v", s)
	case <-time.After(300 * time.Millisecond):
	}
}

func TestWatcherEndpointDefaultsToSocket(t *testing.T) {
	dir := filepath.Join(shortTempDir(t), "plugins_registry")
	reg, _ := startWatcher(t, dir)
	eventually(t, "the registry directory", func() bool { _, err := os.Stat(dir); return err == nil })
	// The registration socket serves the CSI node service too.
	path := filepath.Join(dir, "csi.sock")
	drv := &csiNodeFake{endpoint: path, info: nodeInfoResponse()}
	r := startRegistrar(t, path, csiInfo(regTestDriver, "", "1.0.0"), drv)
	if s := r.nextStatus(t); !s.PluginRegistered {
		t.Fatalf("status = %+v, want registered", s)
	}
	if d, ok := reg.Driver(regTestDriver); !ok || d.Endpoint != path {
		t.Errorf("driver = %+v, %v; want the endpoint %s", d, ok, path)
	}
	if drv.calls() != 1 {
		t.Errorf("NodeGetInfo calls on the registration socket = %d, want 1", drv.calls())
	}
}

func TestWatcherRefusesRegistrations(t *testing.T) {
	tests := []struct {
		name    string
		info    func(endpoint string) *registerapi.PluginInfo
		wantErr []string
	}{{
		name: "device plugin",
		info: func(endpoint string) *registerapi.PluginInfo {
			return &registerapi.PluginInfo{Type: registerapi.DevicePlugin, Name: "example.com/gpu", Endpoint: endpoint, SupportedVersions: []string{"v1beta1"}}
		},
		wantErr: []string{"RegisterPlugin error -- no handler registered for plugin type: DevicePlugin at socket ", "CSIPlugin plugins only"},
	}, {
		name: "DRA plugin",
		info: func(endpoint string) *registerapi.PluginInfo {
			return &registerapi.PluginInfo{Type: registerapi.DRAPlugin, Name: "dra.example.com", Endpoint: endpoint, SupportedVersions: []string{"v1beta1.DRAPlugin"}}
		},
		wantErr: []string{"no handler registered for plugin type: DRAPlugin"},
	}, {
		name:    "unsupported version",
		info:    func(endpoint string) *registerapi.PluginInfo { return csiInfo(regTestDriver, endpoint, "2.0.0") },
		wantErr: []string{"RegisterPlugin error -- plugin validation failed with err: validation failed for CSI Driver " + regTestDriver, `None of the versions specified ["2.0.0"] are supported`},
	}, {
		name:    "0.x version",
		info:    func(endpoint string) *registerapi.PluginInfo { return csiInfo(regTestDriver, endpoint, "0.3.0") },
		wantErr: []string{"must be v1.x"},
	}, {
		name:    "no versions",
		info:    func(endpoint string) *registerapi.PluginInfo { return csiInfo(regTestDriver, endpoint) },
		wantErr: []string{"Plugin returned an empty list for supported versions"},
	}, {
		name:    "no name",
		info:    func(endpoint string) *registerapi.PluginInfo { return csiInfo("", endpoint, "1.0.0") },
		wantErr: []string{"plugin validation failed", "empty driver name"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := shortTempDir(t)
			dir := filepath.Join(base, "plugins_registry")
			drv := startCSINodeFake(t, base, nodeInfoResponse())
			reg, inst := startWatcher(t, dir)
			eventually(t, "the registry directory", func() bool { _, err := os.Stat(dir); return err == nil })
			r := startRegistrar(t, filepath.Join(dir, "reg.sock"), tt.info(drv.endpoint))
			s := r.nextStatus(t)
			if s.PluginRegistered {
				t.Fatalf("status = %+v, want refused", s)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(s.Error, want) {
					t.Errorf("error %q does not contain %q", s.Error, want)
				}
			}
			// Refused before acceptance: tried again while the socket exists.
			if s := r.nextStatus(t); s.PluginRegistered {
				t.Errorf("retry status = %+v, want refused again", s)
			}
			if names := reg.Names(); len(names) != 0 {
				t.Errorf("registered %v", names)
			}
			if drv.calls() != 0 {
				t.Errorf("NodeGetInfo called %d times for a refused plugin", drv.calls())
			}
			if _, ok := inst.get(regTestDriver); ok {
				t.Error("refused driver installed")
			}
		})
	}
}

func TestWatcherNodeGetInfoFailure(t *testing.T) {
	base := shortTempDir(t)
	dir := filepath.Join(base, "plugins_registry")
	drv := startCSINodeFake(t, base, nil)
	drv.infoErr = status.Error(codes.Unavailable, "not ready")
	reg, inst := startWatcher(t, dir)
	eventually(t, "the registry directory", func() bool { _, err := os.Stat(dir); return err == nil })
	r := startRegistrar(t, filepath.Join(dir, "reg.sock"), csiInfo(regTestDriver, drv.endpoint, "1.0.0"))
	s := r.nextStatus(t)
	if s.PluginRegistered || !strings.HasPrefix(s.Error, "RegisterPlugin error -- plugin registration failed with err: ") || !strings.Contains(s.Error, "not ready") {
		t.Fatalf("status = %+v", s)
	}
	if _, ok := reg.Driver(regTestDriver); ok {
		t.Error("driver registered although NodeGetInfo failed")
	}
	if _, ok := inst.get(regTestDriver); ok {
		t.Error("driver installed although NodeGetInfo failed")
	}
	// Accepted then failed: not tried again until the socket is created
	// again (the registrar restarts), as with the kubelet.
	select {
	case s := <-r.statuses:
		t.Errorf("registration tried again on the same socket: %+v", s)
	case <-time.After(500 * time.Millisecond):
	}
}

func TestWatcherTopologyRestrictedLabel(t *testing.T) {
	base := shortTempDir(t)
	dir := filepath.Join(base, "plugins_registry")
	resp := nodeInfoResponse()
	resp.AccessibleTopology.Segments = map[string]string{"node-restriction.kubernetes.io/zone": "a"}
	drv := startCSINodeFake(t, base, resp)
	reg, _ := startWatcher(t, dir)
	eventually(t, "the registry directory", func() bool { _, err := os.Stat(dir); return err == nil })
	r := startRegistrar(t, filepath.Join(dir, "reg.sock"), csiInfo(regTestDriver, drv.endpoint, "1.0.0"))
	if s := r.nextStatus(t); s.PluginRegistered || !strings.Contains(s.Error, "node-restriction.kubernetes.io/zone") {
		t.Fatalf("status = %+v", s)
	}
	if _, ok := reg.Driver(regTestDriver); ok {
		t.Error("driver registered with a topology the node may not label itself with")
	}
}

func TestWatcherDeregistersRemovedSocket(t *testing.T) {
	base := shortTempDir(t)
	dir := filepath.Join(base, "plugins_registry")
	drv := startCSINodeFake(t, base, nodeInfoResponse())
	reg, inst := startWatcher(t, dir)
	eventually(t, "the registry directory", func() bool { _, err := os.Stat(dir); return err == nil })
	r := startRegistrar(t, filepath.Join(dir, "reg.sock"), csiInfo(regTestDriver, drv.endpoint, "1.0.0"))
	if s := r.nextStatus(t); !s.PluginRegistered {
		t.Fatalf("status = %+v", s)
	}
	r.stop(t)
	eventually(t, "deregistration", func() bool { _, ok := reg.Driver(regTestDriver); return !ok })
	if _, ok := inst.get(regTestDriver); ok {
		t.Error("driver still installed after deregistration")
	}
	_, err := reg.NodeClient(context.Background(), regTestDriver)
	if err == nil || err.Error() != "driver name "+regTestDriver+" not found in the list of registered CSI drivers" {
		t.Errorf("NodeClient of a deregistered driver: %v", err)
	}
}

func TestWatcherReregistersRecreatedSocket(t *testing.T) {
	base := shortTempDir(t)
	dir := filepath.Join(base, "plugins_registry")
	drv := startCSINodeFake(t, base, nodeInfoResponse())
	drv2 := startCSINodeFake(t, shortTempDir(t), &csipb.NodeGetInfoResponse{NodeId: "node-2"})
	reg, inst := startWatcher(t, dir)
	eventually(t, "the registry directory", func() bool { _, err := os.Stat(dir); return err == nil })
	path := filepath.Join(dir, "reg.sock")
	r := startRegistrar(t, path, csiInfo(regTestDriver, drv.endpoint, "1.0.0"))
	if s := r.nextStatus(t); !s.PluginRegistered {
		t.Fatalf("status = %+v", s)
	}
	r.stop(t)
	r2 := startRegistrar(t, path, csiInfo(regTestDriver, drv2.endpoint, "1.0.0"))
	if s := r2.nextStatus(t); !s.PluginRegistered {
		t.Fatalf("second status = %+v", s)
	}
	eventually(t, "the new endpoint", func() bool {
		d, ok := reg.Driver(regTestDriver)
		return ok && d.Endpoint == drv2.endpoint
	})
	eventually(t, "the new node ID", func() bool { i, ok := inst.get(regTestDriver); return ok && i.NodeID == "node-2" })
}

func TestWatcherSecondSocketOfDriver(t *testing.T) {
	base := shortTempDir(t)
	dir := filepath.Join(base, "plugins_registry")
	drv := startCSINodeFake(t, base, nodeInfoResponse())
	drv2 := startCSINodeFake(t, shortTempDir(t), &csipb.NodeGetInfoResponse{NodeId: "node-2"})
	reg, _ := startWatcher(t, dir)
	eventually(t, "the registry directory", func() bool { _, err := os.Stat(dir); return err == nil })
	r := startRegistrar(t, filepath.Join(dir, "a.sock"), csiInfo(regTestDriver, drv.endpoint, "1.2.0"))
	if s := r.nextStatus(t); !s.PluginRegistered {
		t.Fatalf("status = %+v", s)
	}
	// A lower version from another socket is refused.
	low := startRegistrar(t, filepath.Join(dir, "b.sock"), csiInfo(regTestDriver, drv2.endpoint, "1.0.0"))
	if s := low.nextStatus(t); s.PluginRegistered || !strings.Contains(s.Error, "already registered with a higher supported version") {
		t.Fatalf("status of the lower version = %+v", s)
	}
	low.stop(t)
	// The same version from another socket replaces the registration; the
	// first socket going away afterwards leaves it.
	r3 := startRegistrar(t, filepath.Join(dir, "c.sock"), csiInfo(regTestDriver, drv2.endpoint, "1.2.0"))
	if s := r3.nextStatus(t); !s.PluginRegistered {
		t.Fatalf("status of the replacement = %+v", s)
	}
	r.stop(t)
	time.Sleep(300 * time.Millisecond)
	d, ok := reg.Driver(regTestDriver)
	if !ok || d.Endpoint != drv2.endpoint {
		t.Errorf("driver after the first socket went away = %+v, %v", d, ok)
	}
}

func TestWatcherLogsRefusedConnectionsOnceAsErrors(t *testing.T) {
	dir := filepath.Join(shortTempDir(t), "plugins_registry")
	var mu sync.Mutex
	var lines []string
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{Verbosity: 1})
	startWatcherCtx(t, logr.NewContext(context.Background(), logger), dir)
	eventually(t, "the registry directory", func() bool { _, err := os.Stat(dir); return err == nil })
	// A socket nothing listens on: every attempt is refused.
	l, err := net.Listen("unix", filepath.Join(dir, "dead.sock"))
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = l.Close()
	// The kinds of the registration lines, in order: "retry" or "error".
	kinds := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, line := range lines {
			switch {
			case strings.Contains(line, `"msg"="Failed to register plugin"`):
				out = append(out, "error")
			case strings.Contains(line, `"msg"="Failed to register plugin, will retry"`):
				out = append(out, "retry")
			}
		}
		return out
	}
	eventually(t, "four attempts", func() bool { return len(kinds()) >= 4 })
	// The first refusal may be a server not listening yet; the second is
	// an error; the same error again is not logged as one.
	if got := strings.Join(kinds()[:4], ","); got != "retry,error,retry,retry" {
		t.Errorf("registration log lines = %s, want retry,error,retry,retry", got)
	}
}

// fakeHandler is a PluginHandler that records what it was asked.
type fakeHandler struct {
	mu         sync.Mutex
	invalid    string
	registered map[string]string
	removed    []string
}

func (h *fakeHandler) ValidatePlugin(_, _ string, _ []string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.invalid != "" {
		return errors.New(h.invalid)
	}
	return nil
}

func (h *fakeHandler) RegisterPlugin(name, endpoint string, _ []string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.registered == nil {
		h.registered = map[string]string{}
	}
	h.registered[name] = endpoint
	return nil
}

func (h *fakeHandler) DeRegisterPlugin(name, endpoint string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.registered, name)
	h.removed = append(h.removed, name+" "+endpoint)
}

func (h *fakeHandler) endpoint(name string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.registered[name]
	return e, ok
}

func TestWatcherHandsOtherTypesToTheirHandler(t *testing.T) {
	dir := filepath.Join(shortTempDir(t), "plugins_registry")
	h := &fakeHandler{}
	w := NewWatcher(WatcherOptions{Dir: dir, Registry: NewRegistry(), RetryPeriod: 100 * time.Millisecond,
		Handlers: map[string]PluginHandler{registerapi.DRAPlugin: h}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watcher: %v", err)
		}
	})
	eventually(t, "the registry directory", func() bool { _, err := os.Stat(dir); return err == nil })

	info := &registerapi.PluginInfo{Type: registerapi.DRAPlugin, Name: "dra.example.com", Endpoint: "/run/dra.sock", SupportedVersions: []string{"v1.DRAPlugin"}}
	r := startRegistrar(t, filepath.Join(dir, "dra.sock"), info)
	if s := r.nextStatus(t); !s.PluginRegistered || s.Error != "" {
		t.Fatalf("status = %+v, want registered", s)
	}
	if e, ok := h.endpoint("dra.example.com"); !ok || e != "/run/dra.sock" {
		t.Fatalf("handler got %q, %v; want the plugin's endpoint", e, ok)
	}
	r.stop(t)
	eventually(t, "the deregistration", func() bool { _, ok := h.endpoint("dra.example.com"); return !ok })
	if got := strings.Join(h.removed, ","); got != "dra.example.com /run/dra.sock" {
		t.Errorf("deregistered %q", got)
	}

	h.mu.Lock()
	h.invalid = "bad versions"
	h.mu.Unlock()
	refused := startRegistrar(t, filepath.Join(dir, "dra2.sock"), info)
	if s := refused.nextStatus(t); s.PluginRegistered || !strings.Contains(s.Error, "plugin validation failed with err: bad versions") {
		t.Fatalf("status = %+v, want refused by the handler", s)
	}
	devicePlugin := startRegistrar(t, filepath.Join(dir, "dp.sock"), &registerapi.PluginInfo{Type: registerapi.DevicePlugin, Name: "example.com/gpu", SupportedVersions: []string{"v1beta1"}})
	if s := devicePlugin.nextStatus(t); s.PluginRegistered || !strings.Contains(s.Error, "nodelet registers CSIPlugin, DRAPlugin plugins only") {
		t.Fatalf("status = %+v, want refused naming the types registered", s)
	}
}

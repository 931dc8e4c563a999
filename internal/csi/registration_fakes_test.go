package csi

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// shortTempDir is a temp dir with a path short enough for unix sockets.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// fakeRegistrar is a registration service on a unix socket, as the
// node-driver-registrar serves it.
type fakeRegistrar struct {
	registerapi.UnimplementedRegistrationServer
	info     *registerapi.PluginInfo
	statuses chan *registerapi.RegistrationStatus
	server   *grpc.Server
	path     string
}

// startRegistrar serves info on a socket at path; drivers' services are
// served there too.
func startRegistrar(t *testing.T, path string, info *registerapi.PluginInfo, drivers ...*csiNodeFake) *fakeRegistrar {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	r := &fakeRegistrar{info: info, statuses: make(chan *registerapi.RegistrationStatus, 100), server: grpc.NewServer(), path: path}
	registerapi.RegisterRegistrationServer(r.server, r)
	for _, d := range drivers {
		csipb.RegisterIdentityServer(r.server, d)
		csipb.RegisterNodeServer(r.server, d)
	}
	go func() { _ = r.server.Serve(l) }()
	t.Cleanup(r.server.Stop)
	return r
}

func (r *fakeRegistrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return r.info, nil
}

func (r *fakeRegistrar) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r.statuses <- s
	return &registerapi.RegistrationStatusResponse{}, nil
}

// stop stops serving and removes the socket, as the registrar does when it
// exits.
func (r *fakeRegistrar) stop(t *testing.T) {
	t.Helper()
	r.server.Stop()
	_ = os.Remove(r.path)
}

// nextStatus waits for the next registration status.
func (r *fakeRegistrar) nextStatus(t *testing.T) *registerapi.RegistrationStatus {
	t.Helper()
	select {
	case s := <-r.statuses:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no registration status within 10s")
		return nil
	}
}

// csiNodeFake is a CSI driver's Identity and Node services on a unix
// socket; it records the NodeGetInfo calls.
type csiNodeFake struct {
	csipb.UnimplementedIdentityServer
	csipb.UnimplementedNodeServer
	endpoint string

	mu        sync.Mutex
	info      *csipb.NodeGetInfoResponse
	infoErr   error
	infoCalls int
}

func startCSINodeFake(t *testing.T, dir string, info *csipb.NodeGetInfoResponse) *csiNodeFake {
	t.Helper()
	endpoint := filepath.Join(dir, "csi.sock")
	l, err := net.Listen("unix", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	d := &csiNodeFake{endpoint: endpoint, info: info}
	s := grpc.NewServer()
	csipb.RegisterIdentityServer(s, d)
	csipb.RegisterNodeServer(s, d)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return d
}

func (d *csiNodeFake) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.infoCalls++
	return d.info, d.infoErr
}

func (d *csiNodeFake) calls() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.infoCalls
}

// fakeInstaller records what the watcher installs.
type fakeInstaller struct {
	mu        sync.Mutex
	installed map[string]DriverNodeInfo
	events    []string
}

func (f *fakeInstaller) InstallDriver(name string, info DriverNodeInfo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.installed == nil {
		f.installed = map[string]DriverNodeInfo{}
	}
	f.installed[name] = info
	f.events = append(f.events, "install "+name)
}

func (f *fakeInstaller) UninstallDriver(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.installed, name)
	f.events = append(f.events, "uninstall "+name)
}

func (f *fakeInstaller) get(name string) (DriverNodeInfo, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i, ok := f.installed[name]
	return i, ok
}

// eventually polls cond for up to 10s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventuallyWithin(t, 10*time.Second, what, cond)
}

// eventuallyWithin polls cond for up to timeout.
func eventuallyWithin(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

package dra

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/testing/protocmp"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
)

// socketIn listens on a unix socket in a short temporary directory.
func socketIn(t *testing.T, name string) string {
	t.Helper()
	path, _ := listenIn(t, name)
	return path
}

// listenIn listens on a unix socket in a short temporary directory (a
// socket's path is limited to about 100 bytes), closed at the test's end.
func listenIn(t *testing.T, name string) (string, net.Listener) {
	t.Helper()
	dir, err := os.MkdirTemp("", "dra")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, name)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return path, l
}

// serveIn serves the services register adds on a unix socket in a short
// temporary directory until the test ends, and returns the socket's path.
func serveIn(t *testing.T, name string, register func(*grpc.Server)) string {
	t.Helper()
	path, l := listenIn(t, name)
	srv := grpc.NewServer()
	register(srv)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return path
}

func TestValidatePlugin(t *testing.T) {
	sock := socketIn(t, "dra.sock")
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	v1 := []string{drapb.DRAPluginService}
	cases := []struct {
		name, driver, endpoint string
		services               []string
		wantErr                string
	}{
		{name: "v1", driver: "dra.example.com", endpoint: sock, services: v1},
		{name: "v1 among others", driver: "dra.example.com", endpoint: sock, services: []string{"v1beta1.DRAPlugin", drapb.DRAPluginService}},
		{name: "no name", endpoint: sock, services: v1, wantErr: "has no name"},
		{name: "no services", driver: "dra.example.com", endpoint: sock,
			wantErr: "invalid supported gRPC versions of DRA driver plugin dra.example.com at endpoint " + sock + ": empty list of supported gRPC services"},
		{name: "only v1beta1", driver: "dra.example.com", endpoint: sock, services: []string{"v1beta1.DRAPlugin"}},
		{name: "v1beta1 and health", driver: "dra.example.com", endpoint: sock, services: []string{"v1alpha1.DRAResourceHealth", "v1beta1.DRAPlugin"}},
		{name: "only unknown services", driver: "dra.example.com", endpoint: sock, services: []string{"v1alpha3.Node", "v1.DRAResourceHealth"},
			wantErr: `none of services supported by the plugin (["v1alpha3.Node" "v1.DRAResourceHealth"]) are supported by nodelet (["v1.DRAPlugin" "v1beta1.DRAPlugin"])`},
		{name: "a relative endpoint", driver: "dra.example.com", endpoint: "dra.sock", services: v1, wantErr: "is not an absolute path"},
		{name: "an endpoint that does not exist", driver: "dra.example.com", endpoint: sock + ".gone", services: v1, wantErr: "no such file"},
		{name: "an endpoint that is no socket", driver: "dra.example.com", endpoint: file, services: v1, wantErr: "is not a socket"},
	}
	d := NewDrivers(DriversOptions{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errorAsWanted(t, d.ValidatePlugin(tc.driver, tc.endpoint, tc.services), tc.wantErr)
		})
	}
}

func TestRegisterPlugins(t *testing.T) {
	old, newer := socketIn(t, "old.sock"), socketIn(t, "new.sock")
	d := NewDrivers(DriversOptions{})
	defer d.Close()
	v1 := []string{drapb.DRAPluginService}
	if _, _, err := d.Client("dra.example.com"); err == nil || err.Error() != "DRA driver dra.example.com is not registered" {
		t.Fatalf("a driver not registered: %v", err)
	}
	if err := d.RegisterPlugin("dra.example.com", old, v1); err != nil {
		t.Fatal(err)
	}
	if err := d.RegisterPlugin("dra.example.com", old, v1); err == nil {
		t.Error("a second plugin took the first one's endpoint")
	}
	// A rolling update: the new plugin registers before the old one goes.
	if err := d.RegisterPlugin("dra.example.com", newer, v1); err != nil {
		t.Fatal(err)
	}
	d.DeRegisterPlugin("dra.example.com", old)
	if _, timeout, err := d.Client("dra.example.com"); err != nil || timeout != DefaultCallTimeout {
		t.Fatalf("driver with one plugin left: %v, %v", timeout, err)
	}
	if got := d.Names(); !slices.Equal(got, []string{"dra.example.com"}) {
		t.Errorf("names %v", got)
	}
	d.DeRegisterPlugin("dra.example.com", newer)
	if _, _, err := d.Client("dra.example.com"); err == nil {
		t.Error("a driver without plugins still has a client")
	}
}

// fakeSlices records what is deleted.
type fakeSlices struct {
	mu      sync.Mutex
	drivers []string
	deleted []string
	fails   int
}

func (f *fakeSlices) DriversWithSlices(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.drivers), nil
}

func (f *fakeSlices) DeleteSlices(_ context.Context, driver string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fails > 0 {
		f.fails--
		return errors.New("unavailable")
	}
	f.deleted = append(f.deleted, driver)
	return nil
}

func (f *fakeSlices) got() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.deleted, ",")
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSlicesOfGoneDriversAreDeleted(t *testing.T) {
	a, b := socketIn(t, "a.sock"), socketIn(t, "b.sock")
	v1 := []string{drapb.DRAPluginService}
	slicesAPI := &fakeSlices{drivers: []string{"a.example.com", "gone.example.com"}, fails: 1}
	d := NewDrivers(DriversOptions{Slices: slicesAPI, WipeDelay: 200 * time.Millisecond})
	defer d.Close()
	if err := d.RegisterPlugin("a.example.com", a, v1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	}()

	// At start, after one failure: the driver not registered only.
	waitFor(t, "the startup deletion", func() bool { return slicesAPI.got() == "gone.example.com" })

	// A driver that comes back within the delay keeps its slices.
	d.DeRegisterPlugin("a.example.com", a)
	if err := d.RegisterPlugin("a.example.com", a, v1); err != nil {
		t.Fatal(err)
	}
	if err := d.RegisterPlugin("b.example.com", b, v1); err != nil {
		t.Fatal(err)
	}
	// One that does not loses them.
	d.DeRegisterPlugin("b.example.com", b)
	waitFor(t, "the deletion of the gone driver's slices", func() bool { return slicesAPI.got() == "gone.example.com,b.example.com" })
	time.Sleep(300 * time.Millisecond)
	if got := slicesAPI.got(); got != "gone.example.com,b.example.com" {
		t.Errorf("deleted %s; the driver that came back lost its slices", got)
	}
}

// v1beta1Driver is a DRA driver's plugin that serves only the v1beta1
// service: it prepares each claim with one device and records the calls.
type v1beta1Driver struct {
	drapbv1beta1.UnimplementedDRAPluginServer

	mu         sync.Mutex
	prepared   []string
	unprepared []string
}

func (f *v1beta1Driver) NodePrepareResources(_ context.Context, in *drapbv1beta1.NodePrepareResourcesRequest) (*drapbv1beta1.NodePrepareResourcesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &drapbv1beta1.NodePrepareResourcesResponse{Claims: map[string]*drapbv1beta1.NodePrepareResourceResponse{}}
	for _, c := range in.GetClaims() {
		f.prepared = append(f.prepared, c.GetNamespace()+"/"+c.GetName())
		resp.Claims[c.GetUid()] = &drapbv1beta1.NodePrepareResourceResponse{Devices: []*drapbv1beta1.Device{{
			RequestNames: []string{"r"}, PoolName: "node", DeviceName: "dev-" + c.GetName(),
			CdiDeviceIds: []string{"v1beta1.example.com/dev=" + c.GetName()},
		}}}
	}
	return resp, nil
}

func (f *v1beta1Driver) NodeUnprepareResources(_ context.Context, in *drapbv1beta1.NodeUnprepareResourcesRequest) (*drapbv1beta1.NodeUnprepareResourcesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &drapbv1beta1.NodeUnprepareResourcesResponse{Claims: map[string]*drapbv1beta1.NodeUnprepareResourceResponse{}}
	for _, c := range in.GetClaims() {
		f.unprepared = append(f.unprepared, c.GetNamespace()+"/"+c.GetName())
		resp.Claims[c.GetUid()] = &drapbv1beta1.NodeUnprepareResourceResponse{}
	}
	return resp, nil
}

// TestV1beta1OnlyDriver calls a plugin that announces and serves only the
// v1beta1 service, over its socket, through the v1 client nodelet uses.
func TestV1beta1OnlyDriver(t *testing.T) {
	fake := &v1beta1Driver{}
	sock := serveIn(t, "v1beta1.sock", func(s *grpc.Server) { drapbv1beta1.RegisterDRAPluginServer(s, fake) })
	d := NewDrivers(DriversOptions{})
	defer d.Close()
	if err := d.RegisterPlugin("v1beta1.example.com", sock, []string{drapbv1beta1.DRAPluginService}); err != nil {
		t.Fatal(err)
	}
	c, timeout, err := d.Client("v1beta1.example.com")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	claim := &drapb.Claim{Namespace: "ns", Uid: "uid-1", Name: "gpu"}
	prep, err := c.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{claim}})
	if err != nil {
		t.Fatalf("NodePrepareResources: %v", err)
	}
	want := &drapb.NodePrepareResourcesResponse{Claims: map[string]*drapb.NodePrepareResourceResponse{"uid-1": {Devices: []*drapb.Device{{
		RequestNames: []string{"r"}, PoolName: "node", DeviceName: "dev-gpu", CdiDeviceIds: []string{"v1beta1.example.com/dev=gpu"},
	}}}}}
	if diff := cmp.Diff(want, prep, protocmp.Transform()); diff != "" {
		t.Errorf("NodePrepareResources answer (-want +got):\n%s", diff)
	}
	unprep, err := c.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{claim}})
	if err != nil {
		t.Fatalf("NodeUnprepareResources: %v", err)
	}
	if _, ok := unprep.GetClaims()["uid-1"]; !ok || len(unprep.GetClaims()) != 1 {
		t.Errorf("NodeUnprepareResources answered %v", unprep.GetClaims())
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if !slices.Equal(fake.prepared, []string{"ns/gpu"}) || !slices.Equal(fake.unprepared, []string{"ns/gpu"}) {
		t.Errorf("the v1beta1 service prepared %v and unprepared %v, want ns/gpu each", fake.prepared, fake.unprepared)
	}
}

// TestClientPrefersV1 checks which service a plugin that announces both
// is called on: v1, whatever the order of its announcement.
func TestClientPrefersV1(t *testing.T) {
	cases := []struct {
		name      string
		announced []string
		want      string
	}{
		{name: "v1 only", announced: []string{drapb.DRAPluginService}, want: drapb.DRAPluginService},
		{name: "v1beta1 only", announced: []string{drapbv1beta1.DRAPluginService}, want: drapbv1beta1.DRAPluginService},
		{name: "v1beta1 first", announced: []string{drapbv1beta1.DRAPluginService, drapb.DRAPluginService}, want: drapb.DRAPluginService},
		{name: "v1 first", announced: []string{drapb.DRAPluginService, drapbv1beta1.DRAPluginService}, want: drapb.DRAPluginService},
		{name: "with a health service", announced: []string{"v1.DRAResourceHealth", drapbv1beta1.DRAPluginService}, want: drapbv1beta1.DRAPluginService},
		{name: "none", announced: []string{"v1alpha3.Node"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := pluginService(tc.announced); got != tc.want {
				t.Errorf("pluginService(%q) = %q, want %q", tc.announced, got, tc.want)
			}
		})
	}
}

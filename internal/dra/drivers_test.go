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

	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
)

// socketIn listens on a unix socket in a short temporary directory.
func socketIn(t *testing.T, name string) string {
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
		{name: "only v1beta1", driver: "dra.example.com", endpoint: sock, services: []string{"v1beta1.DRAPlugin"},
			wantErr: `none of services supported by the plugin (["v1beta1.DRAPlugin"]) are supported by nodelet (["v1.DRAPlugin"])`},
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

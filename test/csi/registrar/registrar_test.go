package registrar_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/nodelet/nodelet/test/csi/hostpath"
	"github.com/nodelet/nodelet/test/csi/registrar"
)

func waitFor(t *testing.T, p string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(p); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", p)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRegistration asks a running driver for its name, answers GetInfo on
// <dir>/<name>-reg.sock, and stops with an error, the socket removed,
// when told the registration failed.
func TestRegistration(t *testing.T) {
	dir := t.TempDir()
	csiSocket := filepath.Join(dir, "csi.sock")
	d, err := hostpath.New(hostpath.Config{Endpoint: csiSocket, DriverName: "x.csi.test", NodeID: "n", StateDir: filepath.Join(dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = d.Run(ctx) }()

	nameCtx, nameCancel := context.WithTimeout(ctx, 10*time.Second)
	defer nameCancel()
	name, err := registrar.DriverName(nameCtx, csiSocket, time.Second)
	if err != nil || name != "x.csi.test" {
		t.Fatalf("DriverName: %q, %v; want x.csi.test", name, err)
	}

	regDir := filepath.Join(dir, "plugins_registry")
	served := make(chan error, 1)
	go func() { served <- registrar.NewServer(name, "/var/lib/kubelet/plugins/x/csi.sock").Serve(ctx, regDir) }()
	regSocket := filepath.Join(regDir, "x.csi.test-reg.sock")
	waitFor(t, regSocket)

	conn, err := grpc.NewClient("unix://"+regSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	client := registerapi.NewRegistrationClient(conn)
	info, err := client.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetType() != registerapi.CSIPlugin || info.GetName() != "x.csi.test" ||
		info.GetEndpoint() != "/var/lib/kubelet/plugins/x/csi.sock" || len(info.GetSupportedVersions()) != 1 || info.GetSupportedVersions()[0] != "1.0.0" {
		t.Fatalf("GetInfo: %+v", info)
	}
	if _, err := client.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-served:
		t.Fatalf("the registrar stopped after a successful registration: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := client.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: false, Error: "bad"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-served:
		if err == nil {
			t.Fatal("the registrar stopped without an error after a failed registration")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the registrar kept serving after a failed registration")
	}
	if _, err := os.Stat(regSocket); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the registration socket after the registrar stopped: %v, want it gone", err)
	}
}

// TestServeStops: the end of the context (SIGTERM in the command) stops
// the service without an error and removes the socket.
func TestServeStops(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- registrar.NewServer("y.csi.test", "/x/csi.sock").Serve(ctx, dir) }()
	socket := filepath.Join(dir, "y.csi.test-reg.sock")
	waitFor(t, socket)
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve after its context ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve kept serving after its context ended")
	}
	if _, err := os.Stat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the registration socket after Serve returned: %v, want it gone", err)
	}
}

package csi

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	utilversion "k8s.io/apimachinery/pkg/util/version"
)

// countingRegistry is a registry whose dials are counted and kept.
func countingRegistry() (*Registry, *[]*grpc.ClientConn) {
	r := NewRegistry()
	var conns []*grpc.ClientConn
	r.dial = func(endpoint string) (*grpc.ClientConn, error) {
		c, err := dialEndpoint(endpoint)
		if err == nil {
			conns = append(conns, c)
		}
		return c, err
	}
	return r, &conns
}

func TestRegistrySharesOneConnectionPerEndpoint(t *testing.T) {
	r, conns := countingRegistry()
	v := utilversion.MustParseGeneric("1.0.0")
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(r.add(RegisteredDriver{Name: "a", Endpoint: "/tmp/x/csi.sock", Socket: "/reg/a"}, v))
	must(r.add(RegisteredDriver{Name: "b", Endpoint: "unix:///tmp/y/csi.sock", Socket: "/reg/b"}, v))
	must(r.add(RegisteredDriver{Name: "c", Endpoint: "/tmp/x/csi.sock", Socket: "/reg/c"}, v))
	for range 3 {
		for _, name := range []string{"a", "b", "c"} {
			if _, err := r.NodeClient(ctx, name); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(*conns) != 2 {
		t.Fatalf("dialed %d times, want once per endpoint (2)", len(*conns))
	}
	x := (*conns)[0]

	if r.remove("a", "/reg/other") {
		t.Error("removed a driver registered from another socket")
	}
	if !r.remove("a", "/reg/a") {
		t.Fatal("did not remove a")
	}
	if x.GetState() == connectivity.Shutdown {
		t.Error("connection closed while driver c still uses it")
	}
	if !r.remove("c", "/reg/c") {
		t.Fatal("did not remove c")
	}
	if x.GetState() != connectivity.Shutdown {
		t.Errorf("connection of the last driver on an endpoint not closed: %v", x.GetState())
	}

	// Re-registration on another endpoint releases the old one.
	y := (*conns)[1]
	must(r.add(RegisteredDriver{Name: "b", Endpoint: "/tmp/z/csi.sock", Socket: "/reg/b2"}, v))
	if y.GetState() != connectivity.Shutdown {
		t.Errorf("old endpoint's connection not closed on re-registration: %v", y.GetState())
	}
	if d, _ := r.Driver("b"); d.Endpoint != "/tmp/z/csi.sock" || d.Socket != "/reg/b2" {
		t.Errorf("b = %+v", d)
	}
	if _, err := r.NodeClient(ctx, "a"); err == nil || err.Error() != "driver name a not found in the list of registered CSI drivers" {
		t.Errorf("NodeClient(a) = %v", err)
	}
}

func TestRegistryValidate(t *testing.T) {
	r := NewRegistry()
	if err := r.add(RegisteredDriver{Name: "d", Endpoint: "/e", Socket: "/reg/1"}, utilversion.MustParseGeneric("1.5.0")); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tests := []struct {
		name, driver, socket string
		versions             []string
		wantErr              bool
	}{
		{"new driver", "e", "/reg/2", []string{"1.0.0"}, false},
		{"several versions, highest 1.x", "e", "/reg/2", []string{"0.3.0", "1.0.0", "2.0.0"}, false},
		{"only 2.x", "e", "/reg/2", []string{"2.0.0"}, true},
		{"unparsable", "e", "/reg/2", []string{"v1"}, true},
		{"empty", "e", "/reg/2", nil, true},
		{"no name", "", "/reg/2", []string{"1.0.0"}, true},
		{"lower version, other socket", "d", "/reg/2", []string{"1.0.0"}, true},
		{"same version, other socket", "d", "/reg/2", []string{"1.5.0"}, false},
		{"lower version, same socket", "d", "/reg/1", []string{"1.0.0"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.validate(tt.driver, "/e", tt.socket, tt.versions)
			if (err != nil) != tt.wantErr {
				t.Errorf("validate = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

func TestSocketPath(t *testing.T) {
	for in, want := range map[string]string{
		"/var/lib/kubelet/plugins/d/csi.sock":        "/var/lib/kubelet/plugins/d/csi.sock",
		"unix:///var/lib/kubelet/plugins/d/csi.sock": "/var/lib/kubelet/plugins/d/csi.sock",
		"unix:/var/lib/kubelet/plugins/d/csi.sock":   "/var/lib/kubelet/plugins/d/csi.sock",
	} {
		if got := socketPath(in); got != want {
			t.Errorf("socketPath(%q) = %q, want %q", in, got, want)
		}
	}
}

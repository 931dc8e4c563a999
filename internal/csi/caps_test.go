package csi

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	utilversion "k8s.io/apimachinery/pkg/util/version"

	"github.com/nodelet/nodelet/internal/volumestats"
)

// capsDriver is a node service over gRPC that counts NodeGetCapabilities
// and fails the first failFirst of them.
type capsDriver struct {
	csipb.UnimplementedNodeServer
	mu        sync.Mutex
	calls     int
	failFirst int
}

func (d *capsDriver) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if d.calls <= d.failFirst {
		return nil, status.Error(codes.Unavailable, "starting")
	}
	return &csipb.NodeGetCapabilitiesResponse{Capabilities: []*csipb.NodeServiceCapability{{
		Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS}},
	}}}, nil
}

func (d *capsDriver) NodeGetVolumeStats(context.Context, *csipb.NodeGetVolumeStatsRequest) (*csipb.NodeGetVolumeStatsResponse, error) {
	return &csipb.NodeGetVolumeStatsResponse{}, nil
}

func (d *capsDriver) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls
}

// serveCapsDriver serves d on a unix socket in a temporary directory and
// returns the socket.
func serveCapsDriver(t *testing.T, d *capsDriver) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "csi.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csipb.RegisterNodeServer(srv, d)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return sock
}

// TestRegistryNodeCapabilities checks that the registry asks a driver for
// its capabilities once per registration, asks again after the driver
// registers again, forgets them with the driver, and does not remember a
// failed answer.
func TestRegistryNodeCapabilities(t *testing.T) {
	v := utilversion.MustParseGeneric("1.5.0")
	type step struct {
		do        string // "ask", "register", "deregister"
		wantCalls int    // the driver's NodeGetCapabilities so far
		wantErr   string
	}
	tests := []struct {
		name      string
		failFirst int
		steps     []step
	}{
		{"asked once per registration", 0, []step{
			{"ask", 1, ""}, {"ask", 1, ""}, {"ask", 1, ""},
		}},
		{"asked again after the driver registers again", 0, []step{
			{"ask", 1, ""}, {"register", 1, ""}, {"ask", 2, ""}, {"ask", 2, ""},
		}},
		{"forgotten with the driver", 0, []step{
			{"ask", 1, ""}, {"deregister", 1, ""},
			{"ask", 1, "not found in the list of registered CSI drivers"},
			{"register", 1, ""}, {"ask", 2, ""},
		}},
		{"a failed answer is not remembered", 1, []step{
			{"ask", 1, "starting"}, {"ask", 2, ""}, {"ask", 2, ""},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &capsDriver{failFirst: tt.failFirst}
			drv := RegisteredDriver{Name: "d", Endpoint: serveCapsDriver(t, d), Socket: "/reg/d"}
			r := NewRegistry()
			t.Cleanup(r.Close)
			if err := r.add(drv, v); err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				var err error
				switch s.do {
				case "ask":
					var resp *csipb.NodeGetCapabilitiesResponse
					resp, err = r.NodeCapabilities(t.Context(), "d")
					if err == nil && len(resp.GetCapabilities()) != 1 {
						t.Fatalf("step %d: capabilities %v", i, resp.GetCapabilities())
					}
				case "register":
					err = r.add(drv, v)
				case "deregister":
					if !r.remove("d", drv.Socket) {
						t.Fatalf("step %d: not removed", i)
					}
				}
				if s.wantErr == "" && err != nil || s.wantErr != "" && (err == nil || !strings.Contains(err.Error(), s.wantErr)) {
					t.Fatalf("step %d (%s): error %v, want %q", i, s.do, err, s.wantErr)
				}
				if got := d.count(); got != s.wantCalls {
					t.Fatalf("step %d (%s): %d NodeGetCapabilities, want %d", i, s.do, got, s.wantCalls)
				}
			}
		})
	}
}

// TestCapsCacheDropsAnAnswerAskedBeforeAForget checks that an answer
// asked before the driver registered again is not stored after it.
func TestCapsCacheDropsAnAnswerAskedBeforeAForget(t *testing.T) {
	var c capsCache
	_, gen, ok := c.lookup("d")
	if ok {
		t.Fatal("empty cache answered")
	}
	c.forget("d")
	c.store("d", gen, &csipb.NodeGetCapabilitiesResponse{})
	if _, _, ok := c.lookup("d"); ok {
		t.Fatal("a stale answer was stored")
	}
	_, gen, _ = c.lookup("d")
	c.store("d", gen, &csipb.NodeGetCapabilitiesResponse{})
	if _, _, ok := c.lookup("d"); !ok {
		t.Fatal("a fresh answer was not stored")
	}
	c.forgetAll()
	if _, _, ok := c.lookup("d"); ok {
		t.Fatal("forgetAll kept an answer")
	}
}

// staticDrivers serves one node client and remembers nothing.
type staticDrivers struct{ client csipb.NodeClient }

func (s staticDrivers) NodeClient(context.Context, string) (csipb.NodeClient, error) {
	return s.client, nil
}

// TestStatsAndPublishAskCapabilitiesThroughTheRegistry checks the callers:
// volume stats and the publisher's capability probe ask the driver once
// through a Registry, and every time through a Drivers that remembers
// nothing.
func TestStatsAndPublishAskCapabilitiesThroughTheRegistry(t *testing.T) {
	d := &capsDriver{}
	sock := serveCapsDriver(t, d)
	r := NewRegistry()
	t.Cleanup(r.Close)
	if err := r.add(RegisteredDriver{Name: "d", Endpoint: sock, Socket: "/reg/d"}, utilversion.MustParseGeneric("1.5.0")); err != nil {
		t.Fatal(err)
	}
	client, err := r.NodeClient(t.Context(), "d")
	if err != nil {
		t.Fatal(err)
	}
	vol := volumestats.PodVolume{Driver: "d", VolumeHandle: "h", Path: t.TempDir()}
	for _, tt := range []struct {
		name    string
		drivers Drivers
		want    int
	}{
		{"registry", r, 1},
		{"no cache", staticDrivers{client}, 4},
	} {
		before := d.count()
		for range 2 {
			if _, err := (StatsMeasurer{Drivers: tt.drivers}).VolumeStats(t.Context(), nil, vol); err != nil && !errors.Is(err, ErrNoVolumeStats) {
				t.Fatalf("%s: stats: %v", tt.name, err)
			}
			p := &Publisher{drivers: tt.drivers}
			if _, err := p.nodeCapabilities(t.Context(), client, "d"); err != nil {
				t.Fatalf("%s: capabilities: %v", tt.name, err)
			}
		}
		if got := d.count() - before; got != tt.want {
			t.Errorf("%s: %d NodeGetCapabilities for 2 stats and 2 publishes, want %d", tt.name, got, tt.want)
		}
	}
}

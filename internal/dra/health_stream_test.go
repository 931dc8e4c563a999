package dra

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
)

// healthDriver is a DRA driver plugin's health service: each
// NodeWatchResources stream sends what is put on sends, and ends with
// what is put on ends, or when nodelet closes it (closed is told).
type healthDriver struct {
	drahealthv1.UnimplementedDRAResourceHealthServer
	sends  chan *drahealthv1.NodeWatchResourcesResponse
	ends   chan error
	opened chan struct{}
	closed chan struct{}
	calls  atomic.Int32
}

func newHealthDriver() *healthDriver {
	return &healthDriver{
		sends:  make(chan *drahealthv1.NodeWatchResourcesResponse),
		ends:   make(chan error),
		opened: make(chan struct{}, 10),
		closed: make(chan struct{}, 10),
	}
}

func (f *healthDriver) NodeWatchResources(_ *drahealthv1.NodeWatchResourcesRequest, s grpc.ServerStreamingServer[drahealthv1.NodeWatchResourcesResponse]) error {
	f.calls.Add(1)
	f.opened <- struct{}{}
	for {
		select {
		case r := <-f.sends:
			if err := s.Send(r); err != nil {
				return err
			}
		case err := <-f.ends:
			return err
		case <-s.Context().Done():
			f.closed <- struct{}{}
			return s.Context().Err()
		}
	}
}

// unimplementedHealth announces nothing it serves: every stream is
// refused as not implemented.
type unimplementedHealth struct {
	drahealthv1.UnimplementedDRAResourceHealthServer
	calls atomic.Int32
}

func (f *unimplementedHealth) NodeWatchResources(*drahealthv1.NodeWatchResourcesRequest, grpc.ServerStreamingServer[drahealthv1.NodeWatchResourcesResponse]) error {
	f.calls.Add(1)
	return status.Error(codes.Unimplemented, "no health here")
}

func deviceReport(device string, h drahealthv1.HealthStatus, msg string) *drahealthv1.NodeWatchResourcesResponse {
	return &drahealthv1.NodeWatchResourcesResponse{Devices: []*drahealthv1.DeviceHealth{{
		Device: &drahealthv1.DeviceIdentifier{PoolName: "node", DeviceName: device}, Health: h, Message: msg,
	}}}
}

// notices records a Health's notices.
type notices chan []DeviceKey

func (n notices) onChange(_ string, devices []DeviceKey) { n <- devices }

func (n notices) next(t *testing.T, what string) []DeviceKey {
	t.Helper()
	select {
	case d := <-n:
		return d
	case <-time.After(10 * time.Second):
		t.Fatalf("no health notice of %s", what)
		return nil
	}
}

func wait(t *testing.T, what string, c <-chan struct{}) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestHealthStream watches a plugin's health stream over its socket, in
// each version of the service nodelet knows: reports reach the cache, a
// broken stream forgets the driver's health and is opened again, and
// deregistration closes it.
func TestHealthStream(t *testing.T) {
	for _, service := range HealthServices {
		t.Run(service, func(t *testing.T) {
			fake := newHealthDriver()
			sock := serveIn(t, "health.sock", func(s *grpc.Server) {
				if service == drahealthv1alpha1.DRAResourceHealthService {
					drahealthv1alpha1.RegisterDRAResourceHealthServer(s, drahealthv1.V1ServerWrapper{Server: fake})
				} else {
					drahealthv1.RegisterDRAResourceHealthServer(s, fake)
				}
			})
			seen := make(notices, 10)
			health := NewHealth(logr.Discard(), seen.onChange)
			defer health.Close()
			d := NewDrivers(DriversOptions{Health: health, HealthRetry: 10 * time.Millisecond})
			defer d.Close()
			const driver = "gpu.example.com"
			if err := d.RegisterPlugin(driver, sock, []string{drapb.DRAPluginService, service}); err != nil {
				t.Fatal(err)
			}
			read := func() (v1.ResourceHealthStatus, string) { return health.Device(driver, gpu0) }

			wait(t, "the stream", fake.opened)
			fake.sends <- deviceReport("gpu-0", drahealthv1.HealthStatus_HEALTHY, "")
			if got := seen.next(t, "the first report"); !slices.Equal(got, []DeviceKey{gpu0}) {
				t.Fatalf("notice %v", got)
			}
			if h, _ := read(); h != healthy {
				t.Errorf("health %s after the first report", h)
			}
			fake.sends <- deviceReport("gpu-0", drahealthv1.HealthStatus_UNHEALTHY, "ECC errors")
			seen.next(t, "the device turning unhealthy")
			if h, msg := read(); h != sick || msg != "ECC errors" {
				t.Errorf("health %s %q, want Unhealthy with the driver's message", h, msg)
			}

			// The stream breaks: the driver's devices are Unknown until
			// the stream, opened again, says otherwise.
			fake.ends <- status.Error(codes.Unavailable, "restarting")
			if got := seen.next(t, "the broken stream"); !slices.Equal(got, []DeviceKey{gpu0}) {
				t.Fatalf("notice %v", got)
			}
			if h, msg := read(); h != unknown || msg != "" {
				t.Errorf("health %s %q after the stream broke, want Unknown", h, msg)
			}
			wait(t, "the stream opened again", fake.opened)
			fake.sends <- deviceReport("gpu-0", drahealthv1.HealthStatus_HEALTHY, "recovered")
			seen.next(t, "the report on the new stream")
			if h, msg := read(); h != healthy || msg != "recovered" {
				t.Errorf("health %s %q on the new stream", h, msg)
			}

			// The plugin goes: its stream is closed, its devices Unknown.
			d.DeRegisterPlugin(driver, sock)
			wait(t, "the stream closed", fake.closed)
			seen.next(t, "the plugin gone")
			if h, _ := read(); h != unknown {
				t.Errorf("health %s after the plugin went, want Unknown", h)
			}
			time.Sleep(100 * time.Millisecond)
			if n := fake.calls.Load(); n != 2 {
				t.Errorf("%d streams opened, want 2 (none after the plugin went)", n)
			}
		})
	}
}

// TestHealthStreamRollingUpdate checks that the end of the old plugin's
// stream does not forget what the new plugin of the driver reports.
func TestHealthStreamRollingUpdate(t *testing.T) {
	old, newer := newHealthDriver(), newHealthDriver()
	oldSock := serveIn(t, "old.sock", func(s *grpc.Server) { drahealthv1.RegisterDRAResourceHealthServer(s, old) })
	newSock := serveIn(t, "new.sock", func(s *grpc.Server) { drahealthv1.RegisterDRAResourceHealthServer(s, newer) })
	seen := make(notices, 10)
	health := NewHealth(logr.Discard(), seen.onChange)
	defer health.Close()
	d := NewDrivers(DriversOptions{Health: health, HealthRetry: 10 * time.Millisecond})
	defer d.Close()
	services := []string{drapb.DRAPluginService, drahealthv1.DRAResourceHealthService}
	if err := d.RegisterPlugin("gpu.example.com", oldSock, services); err != nil {
		t.Fatal(err)
	}
	wait(t, "the old plugin's stream", old.opened)
	if err := d.RegisterPlugin("gpu.example.com", newSock, services); err != nil {
		t.Fatal(err)
	}
	wait(t, "the new plugin's stream", newer.opened)
	newer.sends <- deviceReport("gpu-0", drahealthv1.HealthStatus_HEALTHY, "")
	seen.next(t, "the new plugin's report")
	d.DeRegisterPlugin("gpu.example.com", oldSock)
	wait(t, "the old stream closed", old.closed)
	time.Sleep(100 * time.Millisecond)
	if h, _ := health.Device("gpu.example.com", gpu0); h != healthy {
		t.Errorf("health %s after the old plugin went, want the new one's Healthy", h)
	}
	select {
	case got := <-seen:
		t.Errorf("notice %v when the old plugin went", got)
	default:
	}
}

// TestHealthStreamNotServed checks that a plugin announcing no health
// service gets no stream, and one that announces it but refuses it as not
// implemented is not asked again.
func TestHealthStreamNotServed(t *testing.T) {
	refusing, silent := &unimplementedHealth{}, &unimplementedHealth{}
	refusingSock := serveIn(t, "refusing.sock", func(s *grpc.Server) { drahealthv1.RegisterDRAResourceHealthServer(s, refusing) })
	silentSock := serveIn(t, "silent.sock", func(s *grpc.Server) { drahealthv1.RegisterDRAResourceHealthServer(s, silent) })
	health := NewHealth(logr.Discard(), nil)
	defer health.Close()
	d := NewDrivers(DriversOptions{Health: health, HealthRetry: 10 * time.Millisecond})
	defer d.Close()
	if err := d.RegisterPlugin("refusing.example.com", refusingSock, []string{drapb.DRAPluginService, drahealthv1.DRAResourceHealthService}); err != nil {
		t.Fatal(err)
	}
	if err := d.RegisterPlugin("silent.example.com", silentSock, []string{drapb.DRAPluginService}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the refused stream", func() bool { return refusing.calls.Load() > 0 })
	time.Sleep(200 * time.Millisecond)
	if n := refusing.calls.Load(); n != 1 {
		t.Errorf("a plugin that does not implement its health service was asked %d times, want once", n)
	}
	if n := silent.calls.Load(); n != 0 {
		t.Errorf("a plugin without a health service was asked %d times", n)
	}
}

// TestHealthStreamsOff checks that without a health receiver (the
// ResourceHealthStatus gate off) no stream is opened.
func TestHealthStreamsOff(t *testing.T) {
	fake := &unimplementedHealth{}
	sock := serveIn(t, "health.sock", func(s *grpc.Server) { drahealthv1.RegisterDRAResourceHealthServer(s, fake) })
	d := NewDrivers(DriversOptions{})
	defer d.Close()
	if err := d.RegisterPlugin("gpu.example.com", sock, []string{drapb.DRAPluginService, drahealthv1.DRAResourceHealthService}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if n := fake.calls.Load(); n != 0 {
		t.Errorf("%d streams opened with health off", n)
	}
}

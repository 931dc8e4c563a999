package nodeinfo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/version"
)

type fakeHost struct {
	files  map[string]string
	fs     Filesystem
	ifaces []Interface
}

func (h fakeHost) ReadFile(name string) ([]byte, error) {
	if s, ok := h.files[name]; ok {
		return []byte(s), nil
	}
	return nil, fs.ErrNotExist
}
func (h fakeHost) Statfs(string) (Filesystem, error) { return h.fs, nil }
func (fakeHost) NumCPU() int                         { return 2 }
func (fakeHost) KernelRelease() (string, error)      { return "6.1.0-test", nil }
func (h fakeHost) Interfaces() ([]Interface, error)  { return h.ifaces, nil }

func (h fakeHost) Interface(name string) (Interface, error) {
	for _, ifc := range h.ifaces {
		if ifc.Name == name {
			return ifc, nil
		}
	}
	return Interface{}, fmt.Errorf("no interface %s", name)
}

type fakeRuntime struct {
	err    error
	status *runtimeapi.RuntimeStatus
}

func (r fakeRuntime) Version(context.Context) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "containerd", RuntimeVersion: "1.6.20"}, r.err
}
func (r fakeRuntime) Status(context.Context) (*runtimeapi.RuntimeStatus, error) {
	return r.status, r.err
}
func (r fakeRuntime) ListImages(context.Context, *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	return []*runtimeapi.Image{{RepoTags: []string{"pause:3.9"}, Size: 700000}}, r.err
}

func newTestHost() fakeHost {
	return fakeHost{
		files: map[string]string{
			MeminfoPath:     "MemTotal: 4194304 kB\nMemAvailable: 2097152 kB\n",
			LoadavgPath:     "0.1 0.1 0.1 1/200 42\n",
			PIDMaxPath:      "4194304\n",
			BootIDPath:      "boot-1\n",
			MachineIDPath:   "machine-1\n",
			ProductUUIDPath: "ABCD-EF\n",
			OSReleasePath:   "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n",
			RoutePath:       routeTable,
		},
		fs:     Filesystem{CapacityBytes: 10 << 30, AvailableBytes: 5 << 30, Inodes: 100, InodesFree: 50},
		ifaces: []Interface{{Name: "eth0", Up: true, Addrs: []net.IP{net.ParseIP("172.17.0.5")}}},
	}
}

func testConfig() *v1alpha1.NodeletConfiguration {
	cfg := &v1alpha1.NodeletConfiguration{NodeName: "n1", SystemReserved: map[string]string{"cpu": "500m"}}
	v1alpha1.SetDefaults(cfg)
	return cfg
}

func TestObserve(t *testing.T) {
	readyStatus := runtimeStatus(
		&runtimeapi.RuntimeCondition{Type: runtimeapi.RuntimeReady, Status: true},
		&runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Status: true})
	o, err := NewObserver(testConfig(), newTestHost(), fakeRuntime{status: readyStatus})
	if err != nil {
		t.Fatal(err)
	}
	obs := o.Observe(context.Background())

	assertResources(t, obs.Capacity, rl("cpu", "2", "memory", "4Gi", "pods", "110", "ephemeral-storage", "10Gi"))
	assertResources(t, obs.Allocatable, rl("cpu", "1500m", "memory", "3996Mi", "pods", "110", "ephemeral-storage", "9Gi"))
	wantInfo := corev1.NodeSystemInfo{
		MachineID: "machine-1", SystemUUID: "abcd-ef", BootID: "boot-1", KernelVersion: "6.1.0-test",
		OSImage: "Debian GNU/Linux 12 (bookworm)", OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH,
		ContainerRuntimeVersion: "containerd://1.6.20", KubeletVersion: version.KubeletVersion(),
	}
	if obs.NodeInfo != wantInfo {
		t.Errorf("nodeInfo = %+v\nwant %+v", obs.NodeInfo, wantInfo)
	}
	wantAddrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.17.0.5"}, {Type: corev1.NodeHostName, Address: "n1"}}
	if len(obs.Addresses) != 2 || obs.Addresses[0] != wantAddrs[0] || obs.Addresses[1] != wantAddrs[1] {
		t.Errorf("addresses = %v, want %v", obs.Addresses, wantAddrs)
	}
	if obs.DaemonEndpoints.KubeletEndpoint.Port != v1alpha1.DefaultServerPort {
		t.Errorf("port = %d", obs.DaemonEndpoints.KubeletEndpoint.Port)
	}
	if len(obs.RuntimeProblems) != 0 || !obs.ImagesKnown || len(obs.Images) != 1 || obs.Pressure != (Pressure{}) {
		t.Errorf("observation = %+v", obs)
	}
}

func TestObserveConfiguredIPAndDownRuntime(t *testing.T) {
	cfg := testConfig()
	cfg.NodeIP = "192.0.2.10"
	o, err := NewObserver(cfg, newTestHost(), fakeRuntime{err: errors.New("dial unix /run/x.sock: connect: no such file or directory")})
	if err != nil {
		t.Fatal(err)
	}
	obs := o.Observe(context.Background())
	if obs.Addresses[0].Address != "192.0.2.10" {
		t.Errorf("InternalIP = %s, want the configured one", obs.Addresses[0].Address)
	}
	if len(obs.RuntimeProblems) != 1 || obs.ImagesKnown || obs.NodeInfo.ContainerRuntimeVersion != "" {
		t.Errorf("observation of a down runtime = %+v", obs)
	}
	s, _ := ComputeStatus(corev1.NodeStatus{}, obs, time.Now())
	r := condition(s, corev1.NodeReady)
	if r.Status != corev1.ConditionFalse || r.Message != "container runtime is down: dial unix /run/x.sock: connect: no such file or directory" {
		t.Errorf("Ready = %+v", r)
	}
}

func TestNewObserverRejectsBadReservations(t *testing.T) {
	cfg := testConfig()
	cfg.KubeReserved = map[string]string{"memory": "lots"}
	if _, err := NewObserver(cfg, newTestHost(), nil); err == nil {
		t.Error("want an error for an unparsable kubeReserved")
	}
}

// TestObserveHostRoot: in a container the host's machine ID and OS come
// from hostRoot, never from the image's own /etc; the boot ID is the
// kernel's and read from /proc as it is.
func TestObserveHostRoot(t *testing.T) {
	const debian = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"
	cases := []struct {
		name          string
		hostRoot      string
		files         map[string]string
		wantMachineID string
		wantOSImage   string
	}{
		{"default reads /", "/", map[string]string{
			"/etc/machine-id": "host-id\n", "/etc/os-release": debian,
		}, "host-id", "Debian GNU/Linux 12 (bookworm)"},
		{"host mounted under /host", "/host", map[string]string{
			"/etc/machine-id": "image-id\n", "/etc/os-release": "PRETTY_NAME=distroless\n",
			"/host/etc/machine-id": "host-id\n", "/host/etc/os-release": debian,
		}, "host-id", "Debian GNU/Linux 12 (bookworm)"},
		{"os-release only in usr/lib", "/host", map[string]string{
			"/host/etc/machine-id": "host-id\n", "/host/usr/lib/os-release": debian,
		}, "host-id", "Debian GNU/Linux 12 (bookworm)"},
		{"nothing mounted", "/host", map[string]string{
			"/etc/machine-id": "image-id\n", "/etc/os-release": "PRETTY_NAME=distroless\n",
		}, "", "Linux"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			host := newTestHost()
			delete(host.files, MachineIDPath)
			delete(host.files, OSReleasePath)
			for k, v := range tc.files {
				host.files[k] = v
			}
			cfg := testConfig()
			cfg.HostRoot = tc.hostRoot
			o, err := NewObserver(cfg, host, nil)
			if err != nil {
				t.Fatal(err)
			}
			info := o.Observe(context.Background()).NodeInfo
			if info.MachineID != tc.wantMachineID || info.OSImage != tc.wantOSImage || info.BootID != "boot-1" {
				t.Errorf("machineID %q osImage %q bootID %q; want %q, %q, boot-1",
					info.MachineID, info.OSImage, info.BootID, tc.wantMachineID, tc.wantOSImage)
			}
		})
	}
}

// TestObserveReportsServerPort: the Node's kubelet endpoint is the node
// API's configured port, which the API server dials for logs and exec.
func TestObserveReportsServerPort(t *testing.T) {
	cfg := testConfig()
	port := int32(10350)
	cfg.Server.Port = &port
	o, err := NewObserver(cfg, newTestHost(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := o.Observe(context.Background()).DaemonEndpoints.KubeletEndpoint.Port; got != port {
		t.Errorf("kubelet endpoint port = %d, want %d", got, port)
	}
}

package statstest

import (
	"context"
	"fmt"
	"io/fs"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fake "k8s.io/cri-api/pkg/apis/testing"
	kubetypes "k8s.io/kubelet/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/nodeinfo"
	"github.com/nodelet/nodelet/internal/stats"
)

// NodeName is the fixture's node.
const NodeName = "node-a"

// Host is a host whose files are the map's, by path (any other is missing),
// with one filesystem of 1000 bytes (400 available) and 100 inodes (60
// free) wherever it is asked, and 2 CPUs.
type Host map[string]string

// ReadFile returns the file at name, or fs.ErrNotExist.
func (h Host) ReadFile(name string) ([]byte, error) {
	if v, ok := h[name]; ok {
		return []byte(v), nil
	}
	return nil, fs.ErrNotExist
}

// Statfs returns the one filesystem, whatever the path.
func (Host) Statfs(string) (nodeinfo.Filesystem, error) {
	return nodeinfo.Filesystem{CapacityBytes: 1000, AvailableBytes: 400, Inodes: 100, InodesFree: 60}, nil
}

// NumCPU is 2.
func (Host) NumCPU() int { return 2 }

// KernelRelease is 6.1.
func (Host) KernelRelease() (string, error) { return "6.1", nil }

// Interfaces is none.
func (Host) Interfaces() ([]nodeinfo.Interface, error) { return nil, nil }

// Interface finds no interface: the Host has none.
func (Host) Interface(name string) (nodeinfo.Interface, error) {
	return nodeinfo.Interface{}, fmt.Errorf("no interface %s", name)
}

// Fixture is a provider of NodeName's summary over the CRI fake and a Host:
// pod ns/web (UID uid-web) has a ready sandbox and its container "app"
// running; ns/idle has none; ns/elsewhere is node-b's. The clock stands
// still until a test moves it.
type Fixture struct {
	Provider       *stats.Provider
	RuntimeService *fake.FakeRuntimeService
	Clock          *clocktesting.FakePassiveClock
	// ContainerID and SandboxID are web's container and sandbox.
	ContainerID string
	SandboxID   string
}

// New builds the fixture.
func New(t *testing.T) *Fixture {
	t.Helper()
	ctx := context.Background()
	rs := fake.NewFakeRuntimeService()
	rt, err := cri.New(rs, fake.NewFakeImageService(), cri.Options{NodeName: NodeName})
	if err != nil {
		t.Fatal(err)
	}
	mine := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: types.UID("uid-web")},
		Spec:       corev1.PodSpec{NodeName: NodeName, Containers: []corev1.Container{{Name: "app"}}},
	}
	idle := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "idle", Namespace: "ns", UID: types.UID("uid-idle")},
		Spec:       corev1.PodSpec{NodeName: NodeName, Containers: []corev1.Container{{Name: "app"}}},
	}
	other := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: "ns", UID: types.UID("uid-other")},
		Spec:       corev1.PodSpec{NodeName: "node-b"},
	}
	podLabels := map[string]string{kubetypes.KubernetesPodUIDLabel: "uid-web"}
	sb, err := rt.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "ns", Uid: "uid-web"}, Labels: podLabels}, "")
	if err != nil {
		t.Fatal(err)
	}
	ctrLabels := map[string]string{kubetypes.KubernetesPodUIDLabel: "uid-web", kubetypes.KubernetesContainerNameLabel: "app"}
	id, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "busybox"}, Labels: ctrLabels}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	clock := clocktesting.NewFakePassiveClock(time.Unix(2000, 0))
	return &Fixture{
		Provider: &stats.Provider{
			NodeName: NodeName, Runtime: rt, RootDir: "/var/lib/nodelet", PodLogsDir: t.TempDir(), Clock: clock,
			Pods: fakeclient.NewClientBuilder().WithObjects(mine, idle, other).Build(),
			Host: Host{
				"/proc/stat":    "cpu  100 0 100 1000 0 0 0 0 0 0\nbtime 1000\n",
				"/proc/meminfo": "MemTotal: 1000 kB\nMemFree: 400 kB\nInactive(file): 100 kB\n",
				"/proc/net/dev": "h|h\nh|h\n  eth0: 10 1 0 0 0 0 0 0 20 2 0 0 0 0 0 0\n",
			},
		},
		RuntimeService: rs, Clock: clock, ContainerID: id, SandboxID: sb,
	}
}

// SetCPU makes the runtime report total CPU nanoseconds for the container
// at the fixture's time, without a rate.
func (f *Fixture) SetCPU(total uint64) {
	owner := cri.OwnerLabels(NodeName)
	f.RuntimeService.SetFakeContainerStats([]*runtimeapi.ContainerStats{{
		Attributes: &runtimeapi.ContainerAttributes{Id: f.ContainerID, Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Labels: owner},
		Cpu:        &runtimeapi.CpuUsage{Timestamp: f.Clock.Now().UnixNano(), UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: total}},
		Memory:     &runtimeapi.MemoryUsage{Timestamp: f.Clock.Now().UnixNano(), WorkingSetBytes: &runtimeapi.UInt64Value{Value: 4096}},
	}})
}

package server

import (
	"context"
	"io/fs"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
)

const statsNode = "node-a"

type fakeHost map[string]string

func (h fakeHost) ReadFile(name string) ([]byte, error) {
	if v, ok := h[name]; ok {
		return []byte(v), nil
	}
	return nil, fs.ErrNotExist
}
func (fakeHost) Statfs(string) (nodeinfo.Filesystem, error) {
	return nodeinfo.Filesystem{CapacityBytes: 1000, AvailableBytes: 400, Inodes: 100, InodesFree: 60}, nil
}
func (fakeHost) NumCPU() int                               { return 2 }
func (fakeHost) KernelRelease() (string, error)            { return "6.1", nil }
func (fakeHost) Interfaces() ([]nodeinfo.Interface, error) { return nil, nil }

type statsFixture struct {
	provider *StatsProvider
	rs       *fake.FakeRuntimeService
	clock    *clocktesting.FakePassiveClock
	ctrID    string
	sbID     string
}

func newStatsFixture(t *testing.T) *statsFixture {
	t.Helper()
	ctx := context.Background()
	rs := fake.NewFakeRuntimeService()
	rt, err := cri.New(rs, fake.NewFakeImageService(), cri.Options{NodeName: statsNode})
	if err != nil {
		t.Fatal(err)
	}
	mine := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: types.UID("uid-web")},
		Spec:       corev1.PodSpec{NodeName: statsNode, Containers: []corev1.Container{{Name: "app"}}},
	}
	idle := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "idle", Namespace: "ns", UID: types.UID("uid-idle")},
		Spec:       corev1.PodSpec{NodeName: statsNode, Containers: []corev1.Container{{Name: "app"}}},
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
	return &statsFixture{
		provider: &StatsProvider{
			NodeName: statsNode, Runtime: rt, RootDir: "/var/lib/nodelet", PodLogsDir: t.TempDir(), Clock: clock,
			Pods: fakeclient.NewClientBuilder().WithObjects(mine, idle, other).Build(),
			Host: fakeHost{
				"/proc/stat":    "cpu  100 0 100 1000 0 0 0 0 0 0\nbtime 1000\n",
				"/proc/meminfo": "MemTotal: 1000 kB\nMemFree: 400 kB\nInactive(file): 100 kB\n",
				"/proc/net/dev": "h|h\nh|h\n  eth0: 10 1 0 0 0 0 0 0 20 2 0 0 0 0 0 0\n",
			},
		},
		rs: rs, clock: clock, ctrID: id, sbID: sb,
	}
}

// setCPU makes the runtime report total CPU nanoseconds for the container
// at the fixture's time, without a rate.
func (f *statsFixture) setCPU(total uint64) {
	owner := cri.OwnerLabels(statsNode)
	f.rs.SetFakeContainerStats([]*runtimeapi.ContainerStats{{
		Attributes: &runtimeapi.ContainerAttributes{Id: f.ctrID, Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Labels: owner},
		Cpu:        &runtimeapi.CpuUsage{Timestamp: f.clock.Now().UnixNano(), UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: total}},
		Memory:     &runtimeapi.MemoryUsage{Timestamp: f.clock.Now().UnixNano(), WorkingSetBytes: &runtimeapi.UInt64Value{Value: 4096}},
	}})
}

func TestSummaryListsTheNodesPodsWithCPUAndMemory(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newStatsFixture(t)
	f.setCPU(1_000_000_000)

	sum, err := f.provider.Summary(ctx, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sum.Node.NodeName).To(Equal(statsNode))
	g.Expect(*sum.Node.CPU.UsageCoreNanoSeconds).To(BeEquivalentTo(2_000_000_000))
	g.Expect(*sum.Node.Memory.WorkingSetBytes).To(BeEquivalentTo(500 * 1024))
	g.Expect(sum.Node.Network.Name).To(Equal("eth0"))
	g.Expect(*sum.Node.Fs.UsedBytes).To(BeEquivalentTo(600))
	g.Expect(sum.Pods).To(HaveLen(2), "the other node's pod is left out, the idle one is listed")
	for _, p := range sum.Pods {
		if p.PodRef.Name != "web" {
			g.Expect(p.Containers).To(BeEmpty())
			continue
		}
		g.Expect(p.PodRef.UID).To(Equal("uid-web"))
		g.Expect(p.Containers).To(HaveLen(1))
		g.Expect(*p.CPU.UsageCoreNanoSeconds).To(BeEquivalentTo(1_000_000_000))
		g.Expect(p.CPU.UsageNanoCores).To(BeNil(), "no rate from one sample")
		g.Expect(*p.Memory.WorkingSetBytes).To(BeEquivalentTo(4096))
	}

	// The rate comes from two samples when the runtime gives none.
	f.clock.SetTime(f.clock.Now().Add(2 * time.Second))
	f.setCPU(2_000_000_000)
	sum, err = f.provider.Summary(ctx, true)
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range sum.Pods {
		if p.PodRef.Name == "web" {
			g.Expect(*p.Containers[0].CPU.UsageNanoCores).To(BeEquivalentTo(500_000_000))
			g.Expect(p.Network).To(BeNil(), "only CPU and memory were asked for")
		}
	}
}

func TestSummaryUsesSandboxStatsAndStopsAskingWhenUnimplemented(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()

	f := newStatsFixture(t)
	f.setCPU(1)
	f.rs.SetFakePodSandboxStats([]*runtimeapi.PodSandboxStats{{
		Attributes: &runtimeapi.PodSandboxAttributes{Id: f.sbID, Metadata: &runtimeapi.PodSandboxMetadata{Uid: "uid-web"},
			Labels: cri.OwnerLabels(statsNode)},
		Linux: &runtimeapi.LinuxPodSandboxStats{
			Cpu: &runtimeapi.CpuUsage{UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: 42}},
			Network: &runtimeapi.NetworkUsage{DefaultInterface: &runtimeapi.NetworkInterfaceUsage{
				Name: "eth0", RxBytes: &runtimeapi.UInt64Value{Value: 7}}},
		},
	}})
	sum, err := f.provider.Summary(ctx, false)
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range sum.Pods {
		if p.PodRef.Name == "web" {
			g.Expect(*p.CPU.UsageCoreNanoSeconds).To(BeEquivalentTo(42), "the pod cgroup's CPU, not the sum")
			g.Expect(*p.Network.RxBytes).To(BeEquivalentTo(7))
		}
	}

	f = newStatsFixture(t)
	f.setCPU(1)
	f.rs.InjectError("ListPodSandboxStats", status.Error(codes.Unimplemented, "no"))
	_, err = f.provider.Summary(ctx, false)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = f.provider.Summary(ctx, false)
	g.Expect(err).NotTo(HaveOccurred())
	asked := 0
	for _, c := range f.rs.GetCalls() {
		if c == "ListPodSandboxStats" {
			asked++
		}
	}
	g.Expect(asked).To(Equal(1))
}

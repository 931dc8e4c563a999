package stats_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/stats/statstest"
)

func TestSummaryListsTheNodesPodsWithCPUAndMemory(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := statstest.New(t)
	f.SetCPU(1_000_000_000)

	sum, err := f.Provider.Summary(ctx, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sum.Node.NodeName).To(Equal(statstest.NodeName))
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
	f.Clock.SetTime(f.Clock.Now().Add(2 * time.Second))
	f.SetCPU(2_000_000_000)
	sum, err = f.Provider.Summary(ctx, true)
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

	f := statstest.New(t)
	f.SetCPU(1)
	f.RuntimeService.SetFakePodSandboxStats([]*runtimeapi.PodSandboxStats{{
		Attributes: &runtimeapi.PodSandboxAttributes{Id: f.SandboxID, Metadata: &runtimeapi.PodSandboxMetadata{Uid: "uid-web"},
			Labels: cri.OwnerLabels(statstest.NodeName)},
		Linux: &runtimeapi.LinuxPodSandboxStats{
			Cpu: &runtimeapi.CpuUsage{UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: 42}},
			Network: &runtimeapi.NetworkUsage{DefaultInterface: &runtimeapi.NetworkInterfaceUsage{
				Name: "eth0", RxBytes: &runtimeapi.UInt64Value{Value: 7}}},
		},
	}})
	sum, err := f.Provider.Summary(ctx, false)
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range sum.Pods {
		if p.PodRef.Name == "web" {
			g.Expect(*p.CPU.UsageCoreNanoSeconds).To(BeEquivalentTo(42), "the pod cgroup's CPU, not the sum")
			g.Expect(*p.Network.RxBytes).To(BeEquivalentTo(7))
		}
	}

	f = statstest.New(t)
	f.SetCPU(1)
	f.RuntimeService.InjectError("ListPodSandboxStats", status.Error(codes.Unimplemented, "no"))
	_, err = f.Provider.Summary(ctx, false)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = f.Provider.Summary(ctx, false)
	g.Expect(err).NotTo(HaveOccurred())
	asked := 0
	for _, c := range f.RuntimeService.GetCalls() {
		if c == "ListPodSandboxStats" {
			asked++
		}
	}
	g.Expect(asked).To(Equal(1))
}

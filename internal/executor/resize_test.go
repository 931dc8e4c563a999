package executor

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeruntime "k8s.io/cri-api/pkg/apis/testing"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

// resizingRuntime is the fake runtime, remembering the resources of every
// UpdateContainerResources.
type resizingRuntime struct {
	*fakeruntime.FakeRuntimeService
	mu      sync.Mutex
	updated map[string]*runtimeapi.LinuxContainerResources
}

func (r *resizingRuntime) UpdateContainerResources(ctx context.Context, id string, res *runtimeapi.ContainerResources) error {
	if err := r.FakeRuntimeService.UpdateContainerResources(ctx, id, res); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.updated[id] = res.GetLinux()
	return nil
}

func TestResizeKeepsNodeResourceSettings(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	e, _ := newFakeExecutor(t)
	e.Resources = criconfig.ResourceOptions{CgroupV2: true, OOMGroupKill: true,
		Swap: criconfig.Swap{Behavior: criconfig.NoSwap, Controller: true}, HugePageSizes: []string{"2MB"}}
	rs := &resizingRuntime{FakeRuntimeService: fakeruntime.NewFakeRuntimeService(), updated: map[string]*runtimeapi.LinuxContainerResources{}}
	rt, err := cri.New(rs, fakeruntime.NewFakeImageService(), cri.Options{NodeName: fakeNode})
	g.Expect(err).NotTo(HaveOccurred())
	e.Runtime = rt
	pod := fakePod("app")
	pod.Spec.Containers[0].Resources = memoryLimits("100m", "64Mi")
	st := state.NewPodState(pod.UID)
	st.InitAllocation(pod)
	running := runPod(t, ctx, e, pod, &st)
	id := running.Containers[0].ID
	rs.Lock()
	created := rs.Containers[id].LinuxResources
	rs.Unlock()
	g.Expect(created.GetUnified()).To(HaveKeyWithValue("memory.oom.group", "1"), "created with it")
	rs.SetFakeContainerStats([]*runtimeapi.ContainerStats{{
		Attributes: &runtimeapi.ContainerAttributes{Id: id, Labels: cri.OwnerLabels(fakeNode)},
		Memory:     &runtimeapi.MemoryUsage{UsageBytes: &runtimeapi.UInt64Value{Value: 1 << 20}},
	}})
	resized := pod.DeepCopy()
	resized.Generation = 2
	resized.Spec.Containers[0].Resources = memoryLimits("200m", "128Mi")
	st.AcceptResize(resized, time.Now())
	g.Expect(e.Resize(ctx, resized, []plan.ContainerResize{{Name: "app", ID: id}}, &st, func() error { return nil })).To(Succeed())
	g.Expect(rs.updated[id].Unified).To(HaveKeyWithValue("memory.oom.group", "1"), "kept by the update")
	g.Expect(rs.updated[id].Unified).To(HaveKeyWithValue("memory.swap.max", "0"), "no swap, kept by the update")
	g.Expect(rs.updated[id].HugepageLimits).To(HaveLen(1), "huge pages bounded, kept by the update")
}

func memoryLimits(cpu, memory string) v1.ResourceRequirements {
	q := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(memory)}
	return v1.ResourceRequirements{Requests: q, Limits: q}
}

func TestResizeUpdatesRunningContainersInPlace(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		usage     uint64
		want      v1.ResourceRequirements
		decrease  bool
		wantErr   string
		wantLimit int64
	}{
		{name: "cpu and memory up", usage: 40 << 20, want: memoryLimits("200m", "128Mi"), wantLimit: 128 << 20},
		{name: "memory down, above usage", usage: 20 << 20, want: memoryLimits("100m", "32Mi"), decrease: true, wantLimit: 32 << 20},
		{name: "memory down, below usage", usage: 40 << 20, want: memoryLimits("100m", "32Mi"), decrease: true,
			wantErr: `cannot decrease memory limits: attempting to set container "app" memory limit (33554432) below current usage (41943040)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			e, _ := newFakeExecutor(t)
			rs := &resizingRuntime{FakeRuntimeService: fakeruntime.NewFakeRuntimeService(), updated: map[string]*runtimeapi.LinuxContainerResources{}}
			rt, err := cri.New(rs, fakeruntime.NewFakeImageService(), cri.Options{NodeName: fakeNode})
			g.Expect(err).NotTo(HaveOccurred())
			e.Runtime = rt

			pod := fakePod("app")
			pod.Spec.Containers[0].Resources = memoryLimits("100m", "64Mi")
			st := state.NewPodState(pod.UID)
			st.InitAllocation(pod)
			running := runPod(t, ctx, e, pod, &st)
			id := running.Containers[0].ID
			g.Expect(st.Containers["app"].Actuated).To(Equal(&state.Actuated{ContainerID: id, Resources: pod.Spec.Containers[0].Resources}),
				"a created container's resources are recorded")
			rs.SetFakeContainerStats([]*runtimeapi.ContainerStats{{
				Attributes: &runtimeapi.ContainerAttributes{Id: id, Labels: cri.OwnerLabels(fakeNode)},
				Memory:     &runtimeapi.MemoryUsage{UsageBytes: &runtimeapi.UInt64Value{Value: tc.usage}},
			}})

			resized := pod.DeepCopy()
			resized.Generation = 2
			resized.Spec.Containers[0].Resources = tc.want
			st.AcceptResize(resized, time.Now())
			resizes := []plan.ContainerResize{{Name: "app", ID: id, Index: 0, MemoryLimitDecrease: tc.decrease}}
			saves := 0
			err = e.Resize(ctx, resized, resizes, &st, func() error { saves++; return nil })
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(tc.wantErr))
				g.Expect(rs.updated).To(BeEmpty(), "nothing is updated when a limit cannot be lowered")
				g.Expect(st.Containers["app"].Actuated.Resources).To(Equal(pod.Spec.Containers[0].Resources), "nor recorded")
				g.Expect(saves).To(BeZero())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(saves).To(Equal(1))
			g.Expect(rs.updated).To(HaveKey(id))
			g.Expect(rs.updated[id].MemoryLimitInBytes).To(Equal(tc.wantLimit))
			g.Expect(rs.updated[id].CpuQuota).To(Equal(tc.want.Limits.Cpu().MilliValue() * 100))
			g.Expect(rs.updated[id].Unified).To(BeEmpty(), "no memory.oom.group unless asked")
			g.Expect(st.Containers["app"].Actuated).To(Equal(&state.Actuated{ContainerID: id, Resources: tc.want}), "the update is recorded")
			g.Expect(e.Resize(ctx, resized, nil, &st, func() error { saves++; return nil })).To(Succeed())
			g.Expect(saves).To(Equal(1), "an empty plan does nothing")
		})
	}
}

package criconfig

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/kuberuntime/podtest"
)

const (
	mi = int64(1) << 20
	gi = int64(1) << 30
)

// resPod is a pod whose containers have these resources (the first
// named "app").
func resPod(rs ...v1.ResourceRequirements) *v1.Pod {
	pod := podtest.NewPod()
	pod.Spec.Containers = nil
	for i, r := range rs {
		name := "app"
		if i > 0 {
			name = "other"
		}
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: name, Image: "busybox:1", Resources: r})
	}
	return pod
}

func TestContainerSwap(t *testing.T) {
	res := podtest.Res
	burstable := res("100m", "", "1Gi", "2Gi")
	node := Swap{Controller: true, MemoryCapacity: 8 * gi, SwapCapacity: 2 * gi}
	limited, noSwap := node, node
	limited.Behavior, noSwap.Behavior = LimitedSwap, NoSwap
	withPriority := func(p int32) func(*v1.Pod) { return func(pod *v1.Pod) { pod.Spec.Priority = &p } }
	static := func(pod *v1.Pod) { pod.Annotations = map[string]string{"kubernetes.io/config.source": "file"} }
	mirror := func(pod *v1.Pod) { pod.Annotations = map[string]string{v1.MirrorPodAnnotationKey: "x"} }
	tests := []struct {
		name   string
		pod    *v1.Pod
		modify func(*v1.Pod)
		v2     bool
		swap   Swap
		// wantMax is memory.swap.max, "" for none; wantMemsw the v1 bound.
		wantMax   string
		wantMemsw int64
	}{
		{name: "v2 NoSwap: none", pod: resPod(burstable), v2: true, swap: noSwap, wantMax: "0"},
		{name: "v2 NoSwap, BestEffort: none", pod: resPod(v1.ResourceRequirements{}), v2: true, swap: noSwap, wantMax: "0"},
		{name: "v2 LimitedSwap, Burstable: its request's share of the swap", pod: resPod(burstable), v2: true, swap: limited, wantMax: "268435456"},
		{name: "v2 LimitedSwap, Burstable without a memory limit", pod: resPod(res("", "", "1Gi", "")), v2: true, swap: limited, wantMax: "268435456"},
		{name: "v2 LimitedSwap, memory limit without request: share of 0", pod: resPod(res("100m", "", "", "1Gi")), v2: true, swap: limited, wantMax: "0"},
		{name: "v2 LimitedSwap, request equal to limit in a Burstable pod", pod: resPod(res("100m", "", "1Gi", "1Gi")), v2: true, swap: limited, wantMax: "0"},
		{name: "v2 LimitedSwap, container asking no memory in a Burstable pod", pod: resPod(res("100m", "", "", ""), burstable), v2: true, swap: limited, wantMax: "0"},
		{name: "v2 LimitedSwap, Guaranteed", pod: resPod(res("1", "1", "1Gi", "1Gi")), v2: true, swap: limited, wantMax: "0"},
		{name: "v2 LimitedSwap, BestEffort", pod: resPod(v1.ResourceRequirements{}), v2: true, swap: limited, wantMax: "0"},
		{name: "v2 LimitedSwap, critical priority", pod: resPod(burstable), modify: withPriority(2000000000), v2: true, swap: limited, wantMax: "0"},
		{name: "v2 LimitedSwap, priority below critical", pod: resPod(burstable), modify: withPriority(1999999999), v2: true, swap: limited, wantMax: "268435456"},
		{name: "v2 LimitedSwap, static pod", pod: resPod(burstable), modify: static, v2: true, swap: limited, wantMax: "0"},
		{name: "v2 LimitedSwap, mirror pod", pod: resPod(burstable), modify: mirror, v2: true, swap: limited, wantMax: "0"},
		{name: "v2 LimitedSwap, request above the node's memory", pod: resPod(res("", "", "9Gi", "")), v2: true, swap: limited, wantMax: "0"},
		{name: "v2 LimitedSwap, no swap on the node", pod: resPod(burstable), v2: true,
			swap: Swap{Behavior: LimitedSwap, Controller: true, MemoryCapacity: 8 * gi}, wantMax: "0"},
		{name: "v2 without swap accounting: nothing set", pod: resPod(burstable), v2: true, swap: Swap{Behavior: LimitedSwap, MemoryCapacity: 8 * gi}},
		{name: "v1 NoSwap: memory and swap bounded at the memory limit", pod: resPod(burstable), swap: noSwap, wantMemsw: 2 * gi},
		{name: "v1 NoSwap without a memory limit: no bound", pod: resPod(res("100m", "", "1Gi", "")), swap: noSwap},
		{name: "v1 LimitedSwap is NoSwap", pod: resPod(burstable), swap: limited, wantMemsw: 2 * gi},
		{name: "v1 without swap accounting: nothing set", pod: resPod(burstable), swap: Swap{Behavior: NoSwap}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.modify != nil {
				tt.modify(tt.pod)
			}
			// MemoryQoS on v1 sets nothing; on v2 it is off here but for
			// memory.high=max, which the check leaves out.
			got := ContainerResources(tt.pod, &tt.pod.Spec.Containers[0], nil, ResourceOptions{CgroupV2: tt.v2, Swap: tt.swap})
			gotMax, ok := got.Unified[UnifiedSwapMax]
			if tt.wantMax == "" && ok {
				t.Errorf("memory.swap.max = %q, want none", gotMax)
			}
			if gotMax != tt.wantMax {
				t.Errorf("memory.swap.max = %q, want %q", gotMax, tt.wantMax)
			}
			if got.MemorySwapLimitInBytes != tt.wantMemsw {
				t.Errorf("MemorySwapLimitInBytes = %d, want %d", got.MemorySwapLimitInBytes, tt.wantMemsw)
			}
		})
	}
}

func TestSwapLimit(t *testing.T) {
	tests := []struct {
		name                  string
		request, memory, swap int64
		want                  int64
		wantErr               bool
	}{
		{name: "an eighth of the memory gets an eighth of the swap", request: gi, memory: 8 * gi, swap: 2 * gi, want: 256 * mi},
		{name: "rounded down", request: 1, memory: 3, swap: 2, want: 0},
		{name: "no request", request: 0, memory: 8 * gi, swap: 2 * gi, want: 0},
		{name: "all of the memory", request: 8 * gi, memory: 8 * gi, swap: 2 * gi, want: 2 * gi},
		{name: "more than the memory", request: 9 * gi, memory: 8 * gi, swap: 2 * gi, wantErr: true},
		{name: "unknown memory", request: gi, memory: 0, swap: 2 * gi, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SwapLimit(tt.request, tt.memory, tt.swap)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("SwapLimit = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestMemoryHigh(t *testing.T) {
	tests := []struct {
		name           string
		request, limit int64
		factor         float64
		want           int64
		wantOK         bool
	}{
		{name: "between request and limit, a page down", request: 128 * mi, limit: 256 * mi, factor: 0.9, want: 255012864, wantOK: true},
		{name: "half way", request: 100 * mi, limit: 200 * mi, factor: 0.5, want: 150 * mi, wantOK: true},
		{name: "no request", request: 0, limit: 10 * gi, factor: 0.9, want: 9 * gi, wantOK: true},
		{name: "factor 1 is the limit", request: 100 * mi, limit: 200 * mi, factor: 1, want: 200 * mi, wantOK: true},
		{name: "not above the request", request: 100*mi - 1, limit: 100 * mi, factor: 0.5, want: 100*mi - 4096},
		{name: "request equal to limit", request: 100 * mi, limit: 100 * mi, factor: 0.9, want: 100 * mi},
		{name: "no limit", request: 100 * mi, limit: 0, factor: 0.9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := MemoryHigh(tt.request, tt.limit, tt.factor, 4096)
			if ok != tt.wantOK || (ok && got != tt.want) {
				t.Errorf("MemoryHigh = %d, %v; want %d, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestContainerMemoryQoS(t *testing.T) {
	res := podtest.Res
	node := v1.ResourceList{v1.ResourceMemory: resource.MustParse("10Gi")}
	on := func(factor *float64, tiered bool) MemoryQoS {
		return MemoryQoS{Enabled: true, ThrottlingFactor: factor, TieredReservation: tiered, PageSize: 4096}
	}
	f09 := ptr.To(0.9)
	podLevel := func(pod *v1.Pod) {
		pod.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}}
	}
	tests := []struct {
		name   string
		pod    *v1.Pod
		modify func(*v1.Pod)
		v1     bool
		qos    MemoryQoS
		want   map[string]string
	}{
		{name: "cgroup v1: nothing", pod: resPod(res("", "", "128Mi", "256Mi")), v1: true, qos: on(f09, true)},
		{name: "gate off: memory.high cleared", pod: resPod(res("", "", "128Mi", "256Mi")), qos: MemoryQoS{ThrottlingFactor: f09},
			want: map[string]string{"memory.high": "max"}},
		{name: "gate on, the kubelet's defaults: no protection, no throttling", pod: resPod(res("", "", "128Mi", "256Mi")), qos: on(nil, false),
			want: map[string]string{"memory.min": "0", "memory.low": "0"}},
		{name: "Burstable: memory.high between request and limit", pod: resPod(res("", "", "128Mi", "256Mi")), qos: on(f09, false),
			want: map[string]string{"memory.min": "0", "memory.low": "0", "memory.high": "255012864"}},
		{name: "Burstable without a limit: towards the node's allocatable", pod: resPod(res("", "", "1Gi", "")), qos: on(f09, false),
			want: map[string]string{"memory.min": "0", "memory.low": "0", "memory.high": "9771048960"}},
		{name: "BestEffort: towards the node's allocatable", pod: resPod(v1.ResourceRequirements{}), qos: on(f09, false),
			want: map[string]string{"memory.min": "0", "memory.low": "0", "memory.high": "9663676416"}},
		{name: "Guaranteed: no memory.high", pod: resPod(res("1", "1", "256Mi", "256Mi")), qos: on(f09, false),
			want: map[string]string{"memory.min": "0", "memory.low": "0"}},
		{name: "Guaranteed, tiered: memory.min at the request", pod: resPod(res("1", "1", "256Mi", "256Mi")), qos: on(f09, true),
			want: map[string]string{"memory.min": "268435456"}},
		{name: "Burstable, tiered: memory.low at the request", pod: resPod(res("", "", "128Mi", "256Mi")), qos: on(f09, true),
			want: map[string]string{"memory.low": "134217728", "memory.high": "255012864"}},
		{name: "Burstable, tiered, no request: no protection", pod: resPod(res("100m", "", "", "")), qos: on(nil, true),
			want: map[string]string{"memory.min": "0", "memory.low": "0"}},
		{name: "request equal to limit in a Burstable pod: no memory.high", pod: resPod(res("100m", "", "256Mi", "256Mi")), qos: on(f09, false),
			want: map[string]string{"memory.min": "0", "memory.low": "0"}},
		{name: "pod-level memory limit throttles a container without one", pod: resPod(res("", "", "128Mi", "")), modify: podLevel, qos: on(f09, false),
			want: map[string]string{"memory.min": "0", "memory.low": "0"}},
		{name: "pod-level memory limit, container with its own", pod: resPod(res("", "", "128Mi", "256Mi")), modify: podLevel, qos: on(f09, false),
			want: map[string]string{"memory.min": "0", "memory.low": "0", "memory.high": "255012864"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.modify != nil {
				tt.modify(tt.pod)
			}
			got := ContainerResources(tt.pod, &tt.pod.Spec.Containers[0], node, ResourceOptions{CgroupV2: !tt.v1, MemoryQoS: tt.qos})
			if diff := cmp.Diff(tt.want, got.Unified); diff != "" {
				t.Errorf("unified (-want +got):\n%s", diff)
			}
		})
	}
}

func TestContainerHugepageLimits(t *testing.T) {
	rl := func(kv ...string) v1.ResourceList {
		l := v1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	sizes := []string{"2MB", "1GB"}
	limits := func(mb2, gb1 uint64) []*runtimeapi.HugepageLimit {
		return []*runtimeapi.HugepageLimit{{PageSize: "1GB", Limit: gb1}, {PageSize: "2MB", Limit: mb2}}
	}
	tests := []struct {
		name     string
		limits   v1.ResourceList
		podLevel v1.ResourceList
		sizes    []string
		want     []*runtimeapi.HugepageLimit
	}{
		{name: "none asked: 0 for every size", sizes: sizes, want: limits(0, 0)},
		{name: "one size asked, the other 0", limits: rl("hugepages-2Mi", "4Mi", "memory", "64Mi"), sizes: sizes, want: limits(4<<20, 0)},
		{name: "both sizes", limits: rl("hugepages-2Mi", "4Mi", "hugepages-1Gi", "2Gi"), sizes: sizes, want: limits(4<<20, 2<<30)},
		{name: "the size in another unit", limits: rl("hugepages-2048Ki", "6Mi"), sizes: sizes, want: limits(6<<20, 0)},
		{name: "pod-level limit for a container without one", podLevel: rl("hugepages-2Mi", "8Mi", "memory", "64Mi"), sizes: sizes, want: limits(8<<20, 0)},
		{name: "container limit over the pod-level one", limits: rl("hugepages-2Mi", "2Mi"), podLevel: rl("hugepages-2Mi", "8Mi"), sizes: sizes, want: limits(2<<20, 0)},
		{name: "a size the host lacks is left out", limits: rl("hugepages-16Gi", "16Gi"), sizes: sizes, want: limits(0, 0)},
		{name: "no huge pages on the host", limits: rl("hugepages-2Mi", "4Mi")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := resPod(v1.ResourceRequirements{Limits: tt.limits, Requests: tt.limits})
			if tt.podLevel != nil {
				pod.Spec.Resources = &v1.ResourceRequirements{Limits: tt.podLevel, Requests: tt.podLevel}
			}
			got := ContainerResources(pod, &pod.Spec.Containers[0], nil, ResourceOptions{HugePageSizes: tt.sizes}).HugepageLimits
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("hugepage limits (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHugePageSizeName(t *testing.T) {
	for _, tt := range []struct {
		size    int64
		want    string
		wantErr bool
	}{
		{size: 2 << 20, want: "2MB"},
		{size: 1 << 30, want: "1GB"},
		{size: 64 << 10, want: "64KB"},
		{size: 32 << 20, want: "32MB"},
		{size: 16 << 30, want: "16GB"},
		{size: 1000, want: "1000B"},
		{size: 0, wantErr: true},
		{size: 3000, wantErr: true},
	} {
		got, err := HugePageSizeName(tt.size)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("HugePageSizeName(%d) = %q, %v; want %q, error %v", tt.size, got, err, tt.want, tt.wantErr)
		}
	}
}

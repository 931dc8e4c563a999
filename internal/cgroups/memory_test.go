package cgroups

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	ocgroups "github.com/opencontainers/cgroups"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
)

var hostSizes = []string{"1GB", "2MB"}

func TestPodConfigHugePages(t *testing.T) {
	hp := func(size, q string) v1.ResourceList { return rl("cpu", "100m", "memory", "16Mi", size, q) }
	tests := []struct {
		name  string
		pod   *v1.Pod
		sizes []string
		want  map[string]int64
	}{
		{"no huge pages asked: 0 for every size", podWith(ctr("a", rl("cpu", "100m"), nil)), hostSizes,
			map[string]int64{"2MB": 0, "1GB": 0}},
		{"BestEffort: 0 for every size", podWith(ctr("a", nil, nil)), hostSizes, map[string]int64{"2MB": 0, "1GB": 0}},
		{"the size asked at its request, the other 0", podWith(ctr("a", hp("hugepages-2Mi", "4Mi"), hp("hugepages-2Mi", "4Mi"))), hostSizes,
			map[string]int64{"2MB": 4 * mi, "1GB": 0}},
		{"the containers' requests together", podWith(ctr("a", hp("hugepages-2Mi", "4Mi"), hp("hugepages-2Mi", "4Mi")),
			ctr("b", hp("hugepages-1Gi", "1Gi"), hp("hugepages-1Gi", "1Gi")), ctr("c", hp("hugepages-2Mi", "2Mi"), hp("hugepages-2Mi", "2Mi"))), hostSizes,
			map[string]int64{"2MB": 6 * mi, "1GB": 1 << 30}},
		{"pod-level request", func() *v1.Pod {
			p := podWith(ctr("a", nil, nil))
			p.Spec.Resources = &v1.ResourceRequirements{Requests: hp("hugepages-2Mi", "8Mi"), Limits: hp("hugepages-2Mi", "8Mi")}
			return p
		}(), hostSizes, map[string]int64{"2MB": 8 * mi, "1GB": 0}},
		{"a size the host lacks is left out", podWith(ctr("a", hp("hugepages-16Gi", "16Gi"), hp("hugepages-16Gi", "16Gi"))), hostSizes,
			map[string]int64{"2MB": 0, "1GB": 0}},
		{"no hugetlb controller: no bound", podWith(ctr("a", hp("hugepages-2Mi", "4Mi"), hp("hugepages-2Mi", "4Mi"))), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PodConfig(tt.pod, PodSettings{HugePageSizes: tt.sizes}).HugePages
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("huge pages (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodConfigMemoryQoS(t *testing.T) {
	withPod := func(p *v1.Pod, req, lim v1.ResourceList) *v1.Pod {
		p.Spec.Resources = &v1.ResourceRequirements{Requests: req, Limits: lim}
		return p
	}
	guaranteed := podWith(ctr("a", rl("cpu", "1", "memory", "256Mi"), rl("cpu", "1", "memory", "256Mi")))
	burstable := podWith(ctr("a", rl("memory", "128Mi"), rl("memory", "256Mi")))
	bestEffort := podWith(ctr("a", nil, nil))
	podLimited := withPod(podWith(ctr("a", nil, nil)), rl("memory", "128Mi"), rl("memory", "256Mi"))
	on := func(factor *float64, tiered bool) criconfig.MemoryQoS {
		return criconfig.MemoryQoS{Enabled: true, ThrottlingFactor: factor, TieredReservation: tiered, PageSize: 4096}
	}
	f09 := ptr.To(0.9)
	tests := []struct {
		name string
		pod  *v1.Pod
		v1   bool
		qos  criconfig.MemoryQoS
		want map[string]string
	}{
		{name: "cgroup v1: nothing", pod: guaranteed, v1: true, qos: on(f09, true)},
		{name: "gate off: nothing", pod: guaranteed, qos: criconfig.MemoryQoS{ThrottlingFactor: f09, TieredReservation: true}},
		{name: "the kubelet's defaults: nothing", pod: guaranteed, qos: on(nil, false)},
		{name: "tiered, Guaranteed: memory.min at the request", pod: guaranteed, qos: on(nil, true), want: map[string]string{"memory.min": "268435456"}},
		{name: "tiered, Burstable: memory.low at the request", pod: burstable, qos: on(nil, true), want: map[string]string{"memory.low": "134217728"}},
		{name: "tiered, BestEffort: nothing to protect", pod: bestEffort, qos: on(f09, true)},
		{name: "throttling without pod-level resources: containers only", pod: burstable, qos: on(f09, false)},
		{name: "pod-level memory limit: memory.high between request and limit", pod: podLimited, qos: on(f09, false),
			want: map[string]string{"memory.high": "255012864"}},
		{name: "pod-level, tiered and throttled", pod: podLimited, qos: on(f09, true),
			want: map[string]string{"memory.high": "255012864", "memory.low": "134217728"}},
		{name: "pod-level request equal to limit: no memory.high", pod: withPod(podWith(ctr("a", nil, nil)), rl("cpu", "1", "memory", "256Mi"), rl("cpu", "1", "memory", "256Mi")),
			qos: on(f09, false)},
		{name: "pod-level cpu only: no memory.high", pod: withPod(podWith(ctr("a", nil, nil)), rl("cpu", "1"), rl("cpu", "2")), qos: on(f09, false)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PodConfig(tt.pod, PodSettings{CgroupV2: !tt.v1, MemoryQoS: tt.qos}).Unified
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("unified (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQoSConfigsMemoryQoS(t *testing.T) {
	pods := []QoSPod{
		{Class: v1.PodQOSGuaranteed, MemoryRequest: 256 * mi},
		{Class: v1.PodQOSBurstable, MemoryRequest: 64 * mi},
		{Class: v1.PodQOSBurstable, MemoryRequest: 32 * mi},
		{Class: v1.PodQOSBestEffort},
	}
	tiered := criconfig.MemoryQoS{Enabled: true, TieredReservation: true}
	tests := []struct {
		name                        string
		s                           PodSettings
		wantKubepods, wantBurstable map[string]string
	}{
		{name: "tiered: the requests protected", s: PodSettings{CgroupV2: true, MemoryQoS: tiered},
			wantKubepods:  map[string]string{"memory.min": "369098752", "memory.low": "100663296"},
			wantBurstable: map[string]string{"memory.low": "100663296"}},
		{name: "None: nothing", s: PodSettings{CgroupV2: true, MemoryQoS: criconfig.MemoryQoS{Enabled: true}}},
		{name: "gate off: nothing", s: PodSettings{CgroupV2: true, MemoryQoS: criconfig.MemoryQoS{TieredReservation: true}}},
		{name: "cgroup v1: nothing", s: PodSettings{MemoryQoS: tiered}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kp, b, be := QoSConfigs(pods, tt.s)
			if diff := cmp.Diff(tt.wantKubepods, kp.Unified); diff != "" {
				t.Errorf("kubepods (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantBurstable, b.Unified); diff != "" {
				t.Errorf("burstable (-want +got):\n%s", diff)
			}
			if be.Unified != nil {
				t.Errorf("besteffort: %v, want nothing", be.Unified)
			}
		})
	}
}

func TestQoSSetup(t *testing.T) {
	unbounded := map[string]int64{"1GB": HugePagesUnbounded, "2MB": HugePagesUnbounded}
	tests := []struct {
		name                        string
		s                           PodSettings
		wantKubepods, wantBurstable map[string]string
		wantHugePages               map[string]int64
	}{
		{name: "cgroup v1, no huge pages: shares only", s: PodSettings{}},
		{name: "huge pages unbounded on the QoS cgroups", s: PodSettings{HugePageSizes: hostSizes}, wantHugePages: unbounded},
		{name: "cgroup v2 without tiered reservation: protection cleared", s: PodSettings{CgroupV2: true, MemoryQoS: criconfig.MemoryQoS{Enabled: true}},
			wantKubepods: map[string]string{"memory.min": "0", "memory.low": "0"}, wantBurstable: map[string]string{"memory.low": "0"}},
		{name: "cgroup v2, gate off: protection cleared", s: PodSettings{CgroupV2: true},
			wantKubepods: map[string]string{"memory.min": "0", "memory.low": "0"}, wantBurstable: map[string]string{"memory.low": "0"}},
		{name: "cgroup v2, tiered: left to the pods' sums", s: PodSettings{CgroupV2: true, MemoryQoS: criconfig.MemoryQoS{Enabled: true, TieredReservation: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kp, b, be := QoSSetup(tt.s)
			if diff := cmp.Diff(tt.wantKubepods, kp.Unified); diff != "" {
				t.Errorf("kubepods (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantBurstable, b.Unified); diff != "" {
				t.Errorf("burstable (-want +got):\n%s", diff)
			}
			if *b.CPUShares != MinShares || *be.CPUShares != MinShares || be.Unified != nil {
				t.Errorf("burstable %+v besteffort %+v", b, be)
			}
			if diff := cmp.Diff(tt.wantHugePages, b.HugePages); diff != "" {
				t.Errorf("burstable huge pages (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantHugePages, be.HugePages); diff != "" {
				t.Errorf("besteffort huge pages (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeConfigHugePages(t *testing.T) {
	got := NodeConfig(rl("cpu", "2", "memory", "4Gi", "hugepages-2Mi", "8Mi"))
	if diff := cmp.Diff(map[string]int64{"2MB": 8 * mi}, got.HugePages); diff != "" {
		t.Errorf("kubepods huge pages (-want +got):\n%s", diff)
	}
	if got := NodeConfig(rl("memory", "1Gi")); got.HugePages != nil {
		t.Errorf("huge pages bounded without any allocatable: %v", got.HugePages)
	}
}

func TestMaxHugePagesAndUnified(t *testing.T) {
	old := Config{HugePages: map[string]int64{"2MB": 4 * mi, "1GB": 0}, Unified: map[string]string{"memory.high": "100", "memory.low": "50"}}
	next := Config{HugePages: map[string]int64{"2MB": 2 * mi, "1GB": 1 << 30}, Unified: map[string]string{"memory.high": "max", "memory.low": "80", "memory.min": "10"}}
	want := Config{HugePages: map[string]int64{"2MB": 4 * mi, "1GB": 1 << 30}, Unified: map[string]string{"memory.high": "max", "memory.low": "80", "memory.min": "10"}}
	if diff := cmp.Diff(want, Max(old, next)); diff != "" {
		t.Errorf("Max (-want +got):\n%s", diff)
	}
	same := Config{HugePages: map[string]int64{"2MB": 4 * mi, "1GB": 0}, Unified: map[string]string{"memory.high": "100", "memory.low": "50"}}
	if !old.Equal(same) || old.Equal(next) {
		t.Error("Equal does not compare huge pages and unified files")
	}
	if got := Max(Config{}, Config{}); got.HugePages != nil || got.Unified != nil {
		t.Errorf("Max of nothing sets %+v", got)
	}
}

func TestLibResources(t *testing.T) {
	c := Config{HugePages: map[string]int64{"2MB": 4 * mi, "1GB": 0, "16GB": 0}, Unified: map[string]string{"memory.min": "0"}}
	limits := func(r *ocgroups.Resources) map[string]uint64 {
		if r.HugetlbLimit == nil {
			return nil
		}
		out := map[string]uint64{}
		for _, l := range r.HugetlbLimit {
			out[l.Pagesize] = l.Limit
		}
		return out
	}
	r := libResources(c, hostSizes, false)
	if diff := cmp.Diff(map[string]uint64{"2MB": 4 << 20, "1GB": 0}, limits(r)); diff != "" {
		t.Errorf("v1 hugetlb limits (-want +got):\n%s", diff)
	}
	if r.Unified != nil {
		t.Errorf("v1 gets unified files: %v", r.Unified)
	}
	if r := libResources(c, nil, true); r.HugetlbLimit != nil || r.Unified["memory.min"] != "0" {
		t.Errorf("v2 without hugetlb: limits %v unified %v", limits(r), r.Unified)
	}
}

func TestSwapOn(t *testing.T) {
	header := "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{header, false},
		{"", false},
		{header + "/swapfile                               file\t\t2097148\t\t0\t\t-2\n", true},
	} {
		if got := SwapOn([]byte(tt.in)); got != tt.want {
			t.Errorf("SwapOn(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestCheckSwap(t *testing.T) {
	tests := []struct {
		name               string
		swapOn, failSwapOn bool
		behavior           string
		v2                 bool
		wantErr            string
	}{
		{name: "no swap", failSwapOn: true, behavior: "NoSwap"},
		{name: "swap on, failSwapOn", swapOn: true, failSwapOn: true, behavior: "NoSwap", wantErr: "failSwapOn"},
		{name: "swap on, failSwapOn false", swapOn: true, behavior: "NoSwap"},
		{name: "LimitedSwap on cgroup v2", swapOn: true, behavior: "LimitedSwap", v2: true},
		{name: "LimitedSwap on cgroup v1", swapOn: true, behavior: "LimitedSwap", wantErr: "memorySwap.swapBehavior"},
		{name: "LimitedSwap on cgroup v1 without swap", behavior: "LimitedSwap", wantErr: "memorySwap.swapBehavior"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckSwap(tt.swapOn, tt.failSwapOn, tt.behavior, tt.v2)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("CheckSwap: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("CheckSwap error = %v, want one naming %s", err, tt.wantErr)
			}
		})
	}
}

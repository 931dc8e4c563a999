package cgroups

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
)

func rl(kv ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func ctr(name string, requests, limits v1.ResourceList) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: requests, Limits: limits}}
}

func podWith(cs ...v1.Container) *v1.Pod {
	p := &v1.Pod{Spec: v1.PodSpec{Containers: cs}}
	p.UID = "u-1"
	return p
}

const mi = 1 << 20

func cfg(shares uint64, quota, mem, pids int64) Config {
	return Config{CPUShares: &shares, CPUQuota: &quota, CPUPeriod: ptr.To[uint64](QuotaPeriod), Memory: &mem, PidsLimit: &pids}
}

func TestPodConfig(t *testing.T) {
	withOverhead := func(p *v1.Pod, o v1.ResourceList) *v1.Pod { p.Spec.Overhead = o; return p }
	withPod := func(p *v1.Pod, req, lim v1.ResourceList) *v1.Pod {
		p.Spec.Resources = &v1.ResourceRequirements{Requests: req, Limits: lim}
		return p
	}
	withInit := func(p *v1.Pod, c v1.Container) *v1.Pod {
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
		return p
	}
	tests := []struct {
		name string
		pod  *v1.Pod
		pids int64
		want Config
	}{
		{"best effort: least shares, no limits", podWith(ctr("a", nil, nil)), -1, cfg(2, -1, -1, -1)},
		{"best effort with pids limit", podWith(ctr("a", nil, nil)), 20, cfg(2, -1, -1, 20)},
		{
			"guaranteed: shares, quota and memory of the sum",
			podWith(ctr("a", rl("cpu", "500m", "memory", "64Mi"), rl("cpu", "500m", "memory", "64Mi")),
				ctr("b", rl("cpu", "250m", "memory", "32Mi"), rl("cpu", "250m", "memory", "32Mi"))),
			-1, cfg(768, 75000, 96*mi, -1),
		},
		{
			"burstable, every container limited",
			podWith(ctr("a", rl("cpu", "100m", "memory", "16Mi"), rl("cpu", "200m", "memory", "32Mi")),
				ctr("b", rl("cpu", "100m"), rl("cpu", "1", "memory", "32Mi"))),
			-1, cfg(204, 120000, 64*mi, -1),
		},
		{
			"burstable, one container without limits: no quota, no memory limit",
			podWith(ctr("a", rl("cpu", "100m"), rl("cpu", "200m", "memory", "32Mi")), ctr("b", nil, nil)),
			-1, cfg(102, -1, -1, -1),
		},
		{
			"burstable, every container memory-limited only",
			podWith(ctr("a", rl("cpu", "100m"), rl("memory", "32Mi")), ctr("b", nil, rl("memory", "16Mi"))),
			-1, cfg(102, -1, 48*mi, -1),
		},
		{
			"limits only: requests default to them (API defaulting aside), tiny quota floored",
			podWith(ctr("a", rl("cpu", "1m"), rl("cpu", "1m", "memory", "8Mi"))),
			-1, cfg(2, 1000, 8*mi, -1),
		},
		{
			"init container without a limit makes the pod unlimited",
			withInit(podWith(ctr("a", rl("cpu", "100m", "memory", "16Mi"), rl("cpu", "100m", "memory", "16Mi"))), ctr("init", nil, nil)),
			-1, cfg(102, -1, -1, -1),
		},
		{
			"overhead added to requests and limits",
			withOverhead(podWith(ctr("a", rl("cpu", "500m", "memory", "64Mi"), rl("cpu", "500m", "memory", "64Mi"))), rl("cpu", "250m", "memory", "16Mi")),
			-1, cfg(768, 75000, 80*mi, -1),
		},
		{
			"pod-level resources bound a pod whose containers have none",
			withPod(podWith(ctr("a", nil, nil), ctr("b", nil, nil)), rl("cpu", "200m", "memory", "32Mi"), rl("cpu", "400m", "memory", "48Mi")),
			10, cfg(204, 40000, 48*mi, 10),
		},
		{
			"pod-level resources win over the containers'",
			withPod(podWith(ctr("a", rl("cpu", "100m", "memory", "8Mi"), rl("cpu", "100m", "memory", "8Mi"))),
				rl("cpu", "1", "memory", "128Mi"), rl("cpu", "1", "memory", "128Mi")),
			-1, cfg(1024, 100000, 128*mi, -1),
		},
		{
			"pod-level memory limit only: no quota unless every container has a cpu limit",
			withPod(podWith(ctr("a", rl("cpu", "100m"), nil)), nil, rl("memory", "32Mi")),
			-1, cfg(102, -1, 32*mi, -1),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PodConfig(tt.pod, PodSettings{PidsLimit: tt.pids})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PodConfig (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQoSParentAndPodName(t *testing.T) {
	kp := Name{"nodelet", "kubepods"}
	g := podWith(ctr("a", rl("cpu", "1", "memory", "1Mi"), rl("cpu", "1", "memory", "1Mi")))
	b := podWith(ctr("a", rl("cpu", "1"), nil))
	be := podWith(ctr("a", nil, nil))
	statusSays := podWith(ctr("a", nil, nil))
	statusSays.Status.QOSClass = v1.PodQOSBurstable
	for _, tt := range []struct {
		pod  *v1.Pod
		want string
	}{
		{g, "/nodelet/kubepods/podu-1"},
		{b, "/nodelet/kubepods/burstable/podu-1"},
		{be, "/nodelet/kubepods/besteffort/podu-1"},
		{statusSays, "/nodelet/kubepods/burstable/podu-1"},
	} {
		if got := PodName(kp, tt.pod).Cgroupfs(); got != tt.want {
			t.Errorf("PodName = %q, want %q", got, tt.want)
		}
	}
	if got := QoSParent(kp, v1.PodQOSGuaranteed).Cgroupfs(); got != "/nodelet/kubepods" {
		t.Errorf("QoSParent(Guaranteed) = %q", got)
	}
}

func TestQoSConfigs(t *testing.T) {
	tests := []struct {
		pods       []QoSPod
		burstable  uint64
		besteffort uint64
	}{
		{nil, 2, 2},
		{[]QoSPod{{Class: v1.PodQOSBestEffort}, {Class: v1.PodQOSGuaranteed, CPURequest: 4000}}, 2, 2},
		{[]QoSPod{{Class: v1.PodQOSBurstable, CPURequest: 500}, {Class: v1.PodQOSBurstable, CPURequest: 250}, {Class: v1.PodQOSGuaranteed, CPURequest: 1000}}, 768, 2},
		{[]QoSPod{{Class: v1.PodQOSBurstable, CPURequest: 1000000}}, MaxShares, 2},
	}
	for _, tt := range tests {
		kp, b, be := QoSConfigs(tt.pods, PodSettings{})
		if !kp.Equal(Config{}) {
			t.Errorf("QoSConfigs(%v) sets kubepods without MemoryQoS: %+v", tt.pods, kp)
		}
		if *b.CPUShares != tt.burstable || *be.CPUShares != tt.besteffort {
			t.Errorf("QoSConfigs(%v) = %d, %d, want %d, %d", tt.pods, *b.CPUShares, *be.CPUShares, tt.burstable, tt.besteffort)
		}
		if b.Memory != nil || b.CPUQuota != nil {
			t.Errorf("QoSConfigs(%v) bounds more than shares: %+v", tt.pods, b)
		}
	}
}

func TestAllocatableAndNodeConfig(t *testing.T) {
	capacity := rl("cpu", "4", "memory", "8Gi", "pods", "110", "pid", "4096")
	alloc := Allocatable(capacity, rl("cpu", "500m", "memory", "1Gi"), rl("cpu", "500m", "memory", "7Gi", "pid", "5000"))
	want := rl("cpu", "3", "memory", "0", "pods", "110", "pid", "0")
	if diff := cmp.Diff(want, alloc, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("Allocatable (-want +got):\n%s", diff)
	}
	got := NodeConfig(rl("cpu", "3", "memory", "2Gi", "pid", "1000"))
	wantCfg := Config{CPUShares: ptr.To[uint64](3072), Memory: ptr.To[int64](2 << 30), PidsLimit: ptr.To[int64](1000)}
	if diff := cmp.Diff(wantCfg, got); diff != "" {
		t.Errorf("NodeConfig (-want +got):\n%s", diff)
	}
	if got := NodeConfig(rl("memory", "1Gi")); got.CPUShares != nil || got.PidsLimit != nil {
		t.Errorf("NodeConfig bounds what is not reserved: %+v", got)
	}
}

func TestMax(t *testing.T) {
	tests := []struct {
		name      string
		old, next Config
		want      Config
	}{
		{"grow everything", cfg(100, 10000, 64*mi, 10), cfg(200, 20000, 128*mi, 20), cfg(200, 20000, 128*mi, 20)},
		{"shrink everything: old kept until after", cfg(200, 20000, 128*mi, 20), cfg(100, 10000, 64*mi, 10), cfg(200, 20000, 128*mi, 20)},
		{"a limit lifted wins", cfg(100, 10000, 64*mi, 10), cfg(100, -1, -1, -1), cfg(100, -1, -1, -1)},
		{"a limit set on an unlimited pod waits", cfg(100, -1, -1, -1), cfg(100, 10000, 64*mi, 10), cfg(100, -1, -1, -1)},
		{"mixed", cfg(100, 20000, 64*mi, 10), cfg(200, 10000, 128*mi, 10), cfg(200, 20000, 128*mi, 10)},
		{"unset taken from the other", Config{}, cfg(1, 2, 3, 4), cfg(1, 2, 3, 4)},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, Max(tt.old, tt.next)); diff != "" {
			t.Errorf("%s: Max (-want +got):\n%s", tt.name, diff)
		}
		if !Max(tt.old, tt.next).Equal(tt.want) {
			t.Errorf("%s: Equal disagrees with cmp", tt.name)
		}
	}
}

func TestShareAndQuotaArithmetic(t *testing.T) {
	for _, tt := range []struct {
		milli  int64
		shares uint64
		quota  int64
	}{
		{0, 2, 0}, {1, 2, 1000}, {5, 5, 1000}, {100, 102, 10000}, {1000, 1024, 100000}, {2500, 2560, 250000}, {300000, 262144, 30000000},
	} {
		if got := MilliCPUToShares(tt.milli); got != tt.shares {
			t.Errorf("MilliCPUToShares(%d) = %d, want %d", tt.milli, got, tt.shares)
		}
		if got := (criconfig.CPUQuota{}).Of(tt.milli); got != tt.quota {
			t.Errorf("quota of %dm = %d, want %d", tt.milli, got, tt.quota)
		}
		if got := (criconfig.CPUQuota{Period: 50000}).Of(tt.milli); tt.quota != 0 && got != max(tt.quota/2, MinQuotaPeriod) {
			t.Errorf("quota of %dm over 50 ms = %d, want %d", tt.milli, got, max(tt.quota/2, MinQuotaPeriod))
		}
		if got := (criconfig.CPUQuota{Unenforced: true}).Of(tt.milli); got != 0 {
			t.Errorf("unenforced quota of %dm = %d, want none", tt.milli, got)
		}
	}
}

func TestPodConfigCPUQuota(t *testing.T) {
	pod := podWith(ctr("a", rl("cpu", "500m", "memory", "64Mi"), rl("cpu", "500m", "memory", "64Mi")))
	c := PodConfig(pod, PodSettings{CPUQuota: criconfig.CPUQuota{Period: 50000}})
	if *c.CPUPeriod != 50000 || *c.CPUQuota != 25000 {
		t.Errorf("50ms period: period %d quota %d, want 50000 25000", *c.CPUPeriod, *c.CPUQuota)
	}
	c = PodConfig(pod, PodSettings{CPUQuota: criconfig.CPUQuota{Unenforced: true}})
	if *c.CPUQuota != Unlimited || *c.CPUShares != 512 || *c.Memory != 64*mi {
		t.Errorf("unenforced: quota %d shares %d memory %d, want unlimited, 512, 64Mi", *c.CPUQuota, *c.CPUShares, *c.Memory)
	}
}

package cgroups

import (
	"maps"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
	"github.com/nodelet/nodelet/internal/podspec"
)

// CFS and shares arithmetic of the kubelet's cgroup manager.
const (
	MinShares      = 2
	MaxShares      = 262144
	SharesPerCPU   = 1024
	MilliCPUToCPU  = 1000
	QuotaPeriod    = 100000 // µs, the CFS period pods get
	MinQuotaPeriod = 1000   // µs, the smallest CFS quota
)

// Unlimited is the value of a quota, memory or pids limit that bounds
// nothing.
const Unlimited int64 = -1

// HugePagesUnbounded is the hugetlb limit of a cgroup that bounds no huge
// pages: the kubelet's for the QoS cgroups.
const HugePagesUnbounded int64 = 1 << 62

// Config is what a cgroup is set to. A nil field leaves the cgroup's value
// as it is; Unlimited lifts a limit.
type Config struct {
	CPUShares *uint64
	CPUQuota  *int64
	CPUPeriod *uint64
	Memory    *int64
	PidsLimit *int64
	// HugePages are hugetlb limits in bytes by page size, as cgroups name
	// them ("2MB"); a size not listed is left as it is.
	HugePages map[string]int64
	// Unified are cgroup v2 files (memory.min, memory.low, memory.high) by
	// name; written on cgroup v2 only.
	Unified map[string]string
}

// Equal reports whether c and o set the same values.
func (c Config) Equal(o Config) bool {
	return eqPtr(c.CPUShares, o.CPUShares) && eqPtr(c.CPUQuota, o.CPUQuota) &&
		eqPtr(c.CPUPeriod, o.CPUPeriod) && eqPtr(c.Memory, o.Memory) && eqPtr(c.PidsLimit, o.PidsLimit) &&
		maps.Equal(c.HugePages, o.HugePages) && maps.Equal(c.Unified, o.Unified)
}

func eqPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// Max is, value by value, the larger bound of c and o (Unlimited is the
// largest); a value only one of them sets is that one's. Setting a pod's
// cgroup to Max(old, new) before its containers change, and to new after,
// grows the pod before its containers and shrinks it after them.
func Max(c, o Config) Config {
	return Config{
		CPUShares: maxU(c.CPUShares, o.CPUShares),
		CPUQuota:  maxLimit(c.CPUQuota, o.CPUQuota),
		CPUPeriod: maxU(c.CPUPeriod, o.CPUPeriod),
		Memory:    maxLimit(c.Memory, o.Memory),
		PidsLimit: maxLimit(c.PidsLimit, o.PidsLimit),
		HugePages: mergeMaps(c.HugePages, o.HugePages, func(a, b int64) int64 { return max(a, b) }),
		Unified:   mergeMaps(c.Unified, o.Unified, maxUnified),
	}
}

// mergeMaps is a and b, key by key, pick choosing for a key both have;
// nil when both are.
func mergeMaps[V any](a, b map[string]V, pick func(x, y V) V) map[string]V {
	if a == nil && b == nil {
		return nil
	}
	out := maps.Clone(a)
	if out == nil {
		out = map[string]V{}
	}
	for k, v := range b {
		if old, ok := out[k]; ok {
			v = pick(old, v)
		}
		out[k] = v
	}
	return out
}

// maxUnified is the larger of two values of a cgroup v2 memory file:
// "max" is the largest, numbers compare as numbers.
func maxUnified(a, b string) string {
	if a == "max" || b == "max" {
		return "max"
	}
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	if errA != nil || errB != nil || y > x {
		return b
	}
	return a
}

func maxU(a, b *uint64) *uint64 {
	switch {
	case a == nil:
		return b
	case b == nil || *a >= *b:
		return a
	}
	return b
}

func maxLimit(a, b *int64) *int64 {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case *a < 0:
		return a
	case *b < 0 || *b > *a:
		return b
	}
	return a
}

// MilliCPUToShares is the CPU shares of a CPU request: 1024 per CPU, within
// [MinShares, MaxShares].
func MilliCPUToShares(milli int64) uint64 {
	shares := milli * SharesPerCPU / MilliCPUToCPU
	return uint64(min(max(shares, MinShares), MaxShares))
}

// QoSParent is the cgroup a pod of the QoS class goes under: kubepods for
// Guaranteed, kubepods/burstable and kubepods/besteffort for the others.
func QoSParent(kubepods Name, class v1.PodQOSClass) Name {
	switch class {
	case v1.PodQOSBurstable:
		return kubepods.Child(BurstableName)
	case v1.PodQOSBestEffort:
		return kubepods.Child(BestEffortName)
	}
	return kubepods
}

// PodName is the pod's cgroup: pod<uid> under its QoS class's cgroup.
func PodName(kubepods Name, pod *v1.Pod) Name {
	return QoSParent(kubepods, podspec.PodQOS(pod)).Child(PodPrefix + string(pod.UID))
}

// PodUID is the UID of a pod cgroup's name (pod<uid>), ok false for
// another name.
func PodUID(base string) (types.UID, bool) {
	uid, ok := strings.CutPrefix(base, PodPrefix)
	if !ok || uid == "" {
		return "", false
	}
	return types.UID(uid), true
}

// PodSettings are what a pod's cgroup takes from the node besides the pod.
type PodSettings struct {
	// PidsLimit (podPidsLimit) bounds the pod's processes when positive.
	PidsLimit int64
	// HugePageSizes are the huge page sizes the hugetlb controller bounds
	// ("2MB", "1GB"); none when the host has no huge pages or no hugetlb
	// controller.
	HugePageSizes []string
	// CgroupV2 says the host runs cgroup v2: the MemoryQoS settings act
	// there only.
	CgroupV2 bool
	// MemoryQoS is the MemoryQoS feature gate and its settings.
	MemoryQoS criconfig.MemoryQoS
	// CPUQuota makes the pod's CPU limits a CFS quota (cpuCFSQuota,
	// cpuCFSQuotaPeriod); unenforced, the pod's quota is unlimited.
	CPUQuota criconfig.CPUQuota
}

// PodConfig is what a pod's cgroup is set to, the kubelet's way: CPU
// shares from the pod's CPU requests; a CFS quota from its CPU limits when
// every container has one, and a memory limit when every container has
// one (pod-level resources, when they set the limit, decide instead; the
// overhead is added); BestEffort pods get the least shares and no limits.
// s.PidsLimit bounds the pod's processes when positive. Every huge page
// size of s.HugePageSizes is bounded by the pod's request of that size, 0
// when it asks for none, so that a pod cannot take the node's pool. With
// MemoryQoS on cgroup v2, the pod's memory request is protected under
// TieredReservation (memory.min for Guaranteed pods, memory.low for
// Burstable ones), and a pod whose pod-level resources limit its memory
// is throttled at memory.high (PodMemoryHigh).
func PodConfig(pod *v1.Pod, s PodSettings) Config {
	pidsLimit := s.PidsLimit
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	cpuLimited, memLimited := limitsDeclared(pod)

	period := uint64(s.CPUQuota.PeriodOrDefault())
	shares := MilliCPUToShares(reqs.Cpu().MilliValue())
	quota, mem := Unlimited, Unlimited
	switch podspec.PodQOS(pod) {
	case v1.PodQOSGuaranteed:
		quota = s.CPUQuota.Of(limits.Cpu().MilliValue())
		mem = limits.Memory().Value()
	case v1.PodQOSBurstable:
		if cpuLimited {
			quota = s.CPUQuota.Of(limits.Cpu().MilliValue())
		}
		if memLimited {
			mem = limits.Memory().Value()
		}
	default:
		shares = MinShares
	}
	if quota == 0 {
		quota = Unlimited
	}
	if mem == 0 {
		mem = Unlimited
	}
	pids := Unlimited
	if pidsLimit > 0 {
		pids = pidsLimit
	}
	c := Config{CPUShares: &shares, CPUQuota: &quota, CPUPeriod: &period, Memory: &mem, PidsLimit: &pids}
	c.HugePages = hugePageBounds(reqs, s.HugePageSizes)
	if s.CgroupV2 && s.MemoryQoS.Enabled {
		c.Unified = podMemoryQoS(pod, reqs, limits, memLimited, s.MemoryQoS)
	}
	return c
}

// PodMemoryLimit is the memory limit PodConfig gives the pod's cgroup, and
// whether it has one: a pod-level limit, else the containers' when every
// one declares a limit.
func PodMemoryLimit(pod *v1.Pod) (int64, bool) {
	c := PodConfig(pod, PodSettings{})
	if c.Memory == nil || *c.Memory <= 0 {
		return 0, false
	}
	return *c.Memory, true
}

// hugePageBounds are the hugetlb limits of each size: the huge pages of
// that size in requests, else 0. Sizes the host lacks are left out.
func hugePageBounds(requests v1.ResourceList, sizes []string) map[string]int64 {
	if len(sizes) == 0 {
		return nil
	}
	asked := criconfig.HugePageLimits(requests)
	out := make(map[string]int64, len(sizes))
	for _, size := range sizes {
		out[size] = asked[size]
	}
	return out
}

// podMemoryQoS are the pod cgroup's MemoryQoS files, or nil.
func podMemoryQoS(pod *v1.Pod, reqs, limits v1.ResourceList, memLimited bool, q criconfig.MemoryQoS) map[string]string {
	unified := map[string]string{}
	if request := reqs.Memory().Value(); q.TieredReservation && request > 0 {
		switch podspec.PodQOS(pod) {
		case v1.PodQOSGuaranteed:
			unified[criconfig.UnifiedMemoryMin] = strconv.FormatInt(request, 10)
		case v1.PodQOSBurstable:
			unified[criconfig.UnifiedMemoryLow] = strconv.FormatInt(request, 10)
		}
	}
	if q.ThrottlingFactor != nil && resourcehelper.IsPodLevelResourcesSet(pod) && memLimited {
		if high, ok := PodMemoryHigh(reqs.Memory().Value(), limits.Memory().Value(), *q.ThrottlingFactor, q.PageSize); ok {
			unified[criconfig.UnifiedMemoryHigh] = strconv.FormatInt(high, 10)
		}
	}
	if len(unified) == 0 {
		return nil
	}
	return unified
}

// PodMemoryHigh is the memory.high of a pod whose pod-level resources
// limit its memory, the kubelet's way: between its request and its limit
// (see criconfig.MemoryHigh); none without a limit or with a request
// equal to it.
func PodMemoryHigh(request, limit int64, factor float64, pageSize int64) (int64, bool) {
	if limit == 0 || request == limit {
		return 0, false
	}
	if pageSize <= 0 {
		pageSize = 4096
	}
	return criconfig.MemoryHigh(request, limit, factor, pageSize)
}

// limitsDeclared reports whether the pod's CPU and memory are limited as a
// whole: by a pod-level limit, else by a limit on every container.
func limitsDeclared(pod *v1.Pod) (cpu, memory bool) {
	if resourcehelper.IsPodLevelLimitsSet(pod) {
		_, cpu = pod.Spec.Resources.Limits[v1.ResourceCPU]
		_, memory = pod.Spec.Resources.Limits[v1.ResourceMemory]
		if cpu && memory {
			return true, true
		}
	}
	podCPU, podMem := cpu, memory
	cpu, memory = true, true
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if cs[i].Resources.Limits.Cpu().IsZero() {
				cpu = false
			}
			if cs[i].Resources.Limits.Memory().IsZero() {
				memory = false
			}
		}
	}
	return cpu || podCPU, memory || podMem
}

// QoSPod is what the QoS cgroups' settings need of a pod on the node.
type QoSPod struct {
	Class v1.PodQOSClass
	// CPURequest is the pod's CPU request in millicores.
	CPURequest int64
	// MemoryRequest is the pod's memory request in bytes.
	MemoryRequest int64
}

// QoSPodOf summarizes pod for QoSConfigs.
func QoSPodOf(pod *v1.Pod) QoSPod {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return QoSPod{Class: podspec.PodQOS(pod), CPURequest: reqs.Cpu().MilliValue(), MemoryRequest: reqs.Memory().Value()}
}

// QoSConfigs are the settings of the kubepods, burstable and besteffort
// cgroups that follow the pods, the kubelet's way: burstable gets the
// shares of its pods' CPU requests together, besteffort the least shares.
// With MemoryQoS's TieredReservation on cgroup v2, kubepods protects the
// memory requests of the Guaranteed and Burstable pods (memory.min) and
// of the Burstable ones (memory.low), and burstable those of its pods
// (memory.low); kubepods has nothing else to set then.
func QoSConfigs(pods []QoSPod, s PodSettings) (kubepods, burstable, besteffort Config) {
	var milli, guaranteedMem, burstableMem int64
	for _, p := range pods {
		switch p.Class {
		case v1.PodQOSBurstable:
			milli += p.CPURequest
			burstableMem += p.MemoryRequest
		case v1.PodQOSGuaranteed:
			guaranteedMem += p.MemoryRequest
		}
	}
	b, be := MilliCPUToShares(milli), uint64(MinShares)
	burstable, besteffort = Config{CPUShares: &b}, Config{CPUShares: &be}
	if s.CgroupV2 && s.MemoryQoS.Enabled && s.MemoryQoS.TieredReservation {
		kubepods.Unified = map[string]string{
			criconfig.UnifiedMemoryMin: strconv.FormatInt(guaranteedMem+burstableMem, 10),
			criconfig.UnifiedMemoryLow: strconv.FormatInt(burstableMem, 10),
		}
		burstable.Unified = map[string]string{criconfig.UnifiedMemoryLow: strconv.FormatInt(burstableMem, 10)}
	}
	return kubepods, burstable, besteffort
}

// QoSSetup are what the kubepods, burstable and besteffort cgroups are
// set to at start, besides kubepods's bound: the QoS cgroups bound no
// huge pages (the pods' cgroups do); on cgroup v2, unless MemoryQoS's
// TieredReservation protects memory (which QoSConfigs then sets), the
// protection an earlier configuration may have left is cleared.
func QoSSetup(s PodSettings) (kubepods, burstable, besteffort Config) {
	_, burstable, besteffort = QoSConfigs(nil, s)
	burstable.Unified, besteffort.Unified = nil, nil
	if len(s.HugePageSizes) > 0 {
		burstable.HugePages, besteffort.HugePages = map[string]int64{}, map[string]int64{}
		for _, size := range s.HugePageSizes {
			burstable.HugePages[size], besteffort.HugePages[size] = HugePagesUnbounded, HugePagesUnbounded
		}
	}
	if s.CgroupV2 && !(s.MemoryQoS.Enabled && s.MemoryQoS.TieredReservation) {
		kubepods.Unified = map[string]string{criconfig.UnifiedMemoryMin: "0", criconfig.UnifiedMemoryLow: "0"}
		burstable.Unified = map[string]string{criconfig.UnifiedMemoryLow: "0"}
	}
	return kubepods, burstable, besteffort
}

// NodeConfig is what a cgroup bounded by resources is set to: the shares
// of its CPU, its memory, its pids ("pid") and its huge pages of each
// size as limits. kubepods gets the node's allocatable (capacity minus
// the reservations) this way, and each reserved cgroup its reservation. A
// resource not listed is left unbounded.
func NodeConfig(resources v1.ResourceList) Config {
	var c Config
	if q, ok := resources[v1.ResourceCPU]; ok {
		s := MilliCPUToShares(q.MilliValue())
		c.CPUShares = &s
	}
	if q, ok := resources[v1.ResourceMemory]; ok {
		m := q.Value()
		c.Memory = &m
	}
	if q, ok := resources["pid"]; ok {
		p := q.Value()
		c.PidsLimit = &p
	}
	if hp := criconfig.HugePageLimits(resources); len(hp) > 0 {
		c.HugePages = hp
	}
	return c
}

// Allocatable is capacity minus the reservations, for the resources
// capacity lists, never below zero: what kubepods is bounded by. Unlike the
// allocatable the node reports, the hard eviction thresholds are not
// taken off, as the kubelet does: eviction acts before the bound.
func Allocatable(capacity v1.ResourceList, reserved ...v1.ResourceList) v1.ResourceList {
	out := make(v1.ResourceList, len(capacity))
	for name, c := range capacity {
		v := c.DeepCopy()
		for _, r := range reserved {
			if q, ok := r[name]; ok {
				v.Sub(q)
			}
		}
		if v.Sign() < 0 {
			v.Set(0)
		}
		out[name] = v
	}
	return out
}

package criconfig

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/podspec"
)

// The cgroup v2 files of the memory settings the kubelet sets through
// LinuxContainerResources.Unified.
const (
	UnifiedMemoryHigh = "memory.high"
	UnifiedMemoryMin  = "memory.min"
	UnifiedMemoryLow  = "memory.low"
	UnifiedSwapMax    = "memory.swap.max"
)

// Swap behaviours, the kubelet's (memorySwap.swapBehavior).
const (
	NoSwap      = "NoSwap"
	LimitedSwap = "LimitedSwap"
)

// ResourceOptions are what a container's cgroup settings take from the
// node besides its pod: the host's cgroup version and what it supports,
// and the node's memory and swap settings. The zero value is a cgroup v1
// host without swap accounting or huge pages.
type ResourceOptions struct {
	// CgroupV2 says the host runs cgroup v2 (the unified hierarchy alone).
	CgroupV2 bool
	// OOMGroupKill sets memory.oom.group (see OOMGroupKill); cgroup v2 only.
	OOMGroupKill bool
	// CPUQuota makes CPU limits a CFS quota.
	CPUQuota CPUQuota
	// Swap is what containers get of the node's swap.
	Swap Swap
	// MemoryQoS is the MemoryQoS feature gate and its settings.
	MemoryQoS MemoryQoS
	// HugePageSizes are the huge page sizes of the host, as cgroups name
	// them ("2MB", "1GB"): every container gets a limit for each, its own
	// limit of that size or 0.
	HugePageSizes []string
}

// Swap is the node's swap setting and what the host has of it.
type Swap struct {
	// Behavior is memorySwap.swapBehavior: NoSwap or LimitedSwap.
	Behavior string
	// Controller says whether the memory controller accounts swap
	// (memory.memsw.limit_in_bytes on cgroup v1, memory.swap.max on v2):
	// without it, containers get no swap setting at all, as the kubelet.
	Controller bool
	// MemoryCapacity and SwapCapacity are the node's memory and swap
	// (MemTotal and SwapTotal of /proc/meminfo), in bytes.
	MemoryCapacity int64
	SwapCapacity   int64
}

// MemoryQoS is the MemoryQoS feature gate and its settings.
type MemoryQoS struct {
	// Enabled is the gate; it acts on cgroup v2 hosts only.
	Enabled bool
	// ThrottlingFactor is memoryThrottlingFactor; nil sets no memory.high.
	ThrottlingFactor *float64
	// TieredReservation is memoryReservationPolicy TieredReservation:
	// memory requests protected with memory.min (Guaranteed) and
	// memory.low (Burstable).
	TieredReservation bool
	// PageSize rounds memory.high down; 0 is 4096.
	PageSize int64
}

func (q MemoryQoS) pageSize() int64 {
	if q.PageSize > 0 {
		return q.PageSize
	}
	return 4096
}

// setUnified sets a cgroup v2 file in r's Unified settings.
func setUnified(r *runtimeapi.LinuxContainerResources, key, value string) {
	if r.Unified == nil {
		r.Unified = map[string]string{}
	}
	r.Unified[key] = value
}

// ContainerSwapBehavior is the swap a container of the pod gets, the
// kubelet's way: LimitedSwap only on cgroup v2 with swap accounting, for a
// container of a Burstable pod that is not critical and asks for memory
// with a request other than its limit; NoSwap for every other.
func ContainerSwapBehavior(pod *v1.Pod, c *v1.Container, o ResourceOptions) string {
	if o.Swap.Behavior != LimitedSwap || !o.Swap.Controller || !o.CgroupV2 || admission.CriticalPod(pod) || podspec.PodQOS(pod) != v1.PodQOSBurstable {
		return NoSwap
	}
	req, lim := c.Resources.Requests.Memory(), c.Resources.Limits.Memory()
	if (req.IsZero() && lim.IsZero()) || req.Cmp(*lim) == 0 {
		return NoSwap
	}
	return LimitedSwap
}

// SwapLimit is the swap of a container under LimitedSwap: the node's swap
// in the proportion of the node's memory the container requests, in
// bytes. It fails when the node's memory is unknown or smaller than the
// request.
func SwapLimit(memoryRequest, memoryCapacity, swapCapacity int64) (int64, error) {
	if memoryCapacity <= 0 {
		return 0, fmt.Errorf("the node's memory capacity is %d", memoryCapacity)
	}
	if memoryRequest > memoryCapacity {
		return 0, fmt.Errorf("the memory request %d is larger than the node's memory %d", memoryRequest, memoryCapacity)
	}
	return int64(float64(memoryRequest) / float64(memoryCapacity) * float64(swapCapacity)), nil
}

// applySwap sets the container's swap, the kubelet's way: nothing without
// swap accounting; NoSwap on cgroup v1 bounds memory and swap together at
// the memory limit (memory.memsw.limit_in_bytes; no limit, no bound), on
// v2 sets memory.swap.max to 0; LimitedSwap sets memory.swap.max to the
// container's share of the swap (0 when it cannot be computed).
func applySwap(r *runtimeapi.LinuxContainerResources, pod *v1.Pod, c *v1.Container, o ResourceOptions) {
	if !o.Swap.Controller {
		return
	}
	if !o.CgroupV2 {
		r.MemorySwapLimitInBytes = r.MemoryLimitInBytes
		return
	}
	var swap int64
	if ContainerSwapBehavior(pod, c, o) == LimitedSwap {
		if n, err := SwapLimit(c.Resources.Requests.Memory().Value(), o.Swap.MemoryCapacity, o.Swap.SwapCapacity); err == nil {
			swap = n
		}
	}
	setUnified(r, UnifiedSwapMax, strconv.FormatInt(swap, 10))
}

// MemoryHigh is the memory.high between a memory request and a limit (the
// node's allocatable memory when the container has none):
// request + factor × (limit − request), rounded down to a page. ok is
// false when there is nothing to throttle: no limit, or a value not above
// the request.
func MemoryHigh(request, limit int64, factor float64, pageSize int64) (int64, bool) {
	if limit <= 0 {
		return 0, false
	}
	high := int64(math.Floor((float64(request)+(float64(limit)-float64(request))*factor)/float64(pageSize))) * pageSize
	return high, high > 0 && high > request
}

// applyMemoryQoS sets the container's MemoryQoS settings on cgroup v2, the
// kubelet's way. With the gate on: memory.min (Guaranteed) or memory.low
// (Burstable) at its memory request under TieredReservation, 0 otherwise;
// memory.high from the throttling factor for a container whose request
// differs from its limit (BestEffort ones included), unless the pod's own
// memory limit throttles it (pod-level resources). With the gate off,
// memory.high is "max", clearing what an earlier setting left.
func applyMemoryQoS(r *runtimeapi.LinuxContainerResources, pod *v1.Pod, c *v1.Container, nodeAllocatable v1.ResourceList, o ResourceOptions) {
	if !o.CgroupV2 {
		return
	}
	if !o.MemoryQoS.Enabled {
		setUnified(r, UnifiedMemoryHigh, "max")
		return
	}
	q := o.MemoryQoS
	request, limit := c.Resources.Requests.Memory().Value(), c.Resources.Limits.Memory().Value()
	if request != 0 && q.TieredReservation {
		if podspec.PodQOS(pod) == v1.PodQOSGuaranteed {
			setUnified(r, UnifiedMemoryMin, strconv.FormatInt(request, 10))
		} else {
			setUnified(r, UnifiedMemoryLow, strconv.FormatInt(request, 10))
		}
	} else {
		setUnified(r, UnifiedMemoryMin, "0")
		setUnified(r, UnifiedMemoryLow, "0")
	}
	podThrottles := limit == 0 && resourcehelper.IsPodLevelResourcesSet(pod) && !pod.Spec.Resources.Limits.Memory().IsZero()
	if q.ThrottlingFactor == nil || podThrottles || (request == limit && request != 0) {
		return
	}
	if limit == 0 {
		limit = nodeAllocatable.Memory().Value()
	}
	if high, ok := MemoryHigh(request, limit, *q.ThrottlingFactor, q.pageSize()); ok {
		setUnified(r, UnifiedMemoryHigh, strconv.FormatInt(high, 10))
	}
}

// HugePageSizeName is the cgroup name of a huge page size in bytes
// ("2MB" for 2Mi, "1GB" for 1Gi), as hugetlb's files and CRI
// HugepageLimit name it.
func HugePageSizeName(size int64) (string, error) {
	units := []string{"B", "KB", "MB", "GB", "TB", "PB"}
	if size <= 0 {
		return "", fmt.Errorf("huge page size %d is not positive", size)
	}
	i := 0
	for size%1024 == 0 && i < len(units)-1 {
		size /= 1024
		i++
	}
	if size > 1024 && i < len(units)-1 {
		return "", fmt.Errorf("huge page size %d%s is not a whole number of the largest unit", size, units[i])
	}
	return strconv.FormatInt(size, 10) + units[i], nil
}

// HugePageLimits are, by cgroup page size name, the huge pages a resource
// list holds (hugepages-2Mi: 4Mi is "2MB": 4194304); names that are not
// huge pages, or whose size cannot be read, are left out.
func HugePageLimits(rl v1.ResourceList) map[string]int64 {
	out := map[string]int64{}
	for name, q := range rl {
		size, ok := strings.CutPrefix(string(name), v1.ResourceHugePagesPrefix)
		if !ok {
			continue
		}
		sq, err := resource.ParseQuantity(size)
		if err != nil {
			continue
		}
		key, err := HugePageSizeName(sq.Value())
		if err != nil {
			continue
		}
		out[key] += q.Value()
	}
	return out
}

// ContainerHugepageLimits are the container's huge page limits, the
// kubelet's way: one for every size the host supports, the container's
// limit of that size, else the pod-level limit, else 0, so that a
// container that asks for none can map none.
func ContainerHugepageLimits(pod *v1.Pod, c *v1.Container, sizes []string) []*runtimeapi.HugepageLimit {
	if len(sizes) == 0 {
		return nil
	}
	want := map[string]int64{}
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		want = HugePageLimits(pod.Spec.Resources.Limits)
	}
	for size, v := range HugePageLimits(c.Resources.Limits) {
		want[size] = v
	}
	out := make([]*runtimeapi.HugepageLimit, 0, len(sizes))
	for _, size := range slices.Sorted(slices.Values(sizes)) {
		out = append(out, &runtimeapi.HugepageLimit{PageSize: size, Limit: uint64(max(want[size], 0))})
	}
	return out
}

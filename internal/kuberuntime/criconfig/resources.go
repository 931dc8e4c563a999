package criconfig

import (
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/podspec"
)

// CFS and OOM constants of the kubelet's cgroup management.
const (
	minCPUShares   = 2
	maxCPUShares   = 262144
	sharesPerCPU   = 1024
	milliPerCPU    = 1000
	cfsQuotaPeriod = 100000 // µs
	minCFSQuota    = 1000   // µs

	guaranteedOOMScoreAdj = -997
	bestEffortOOMScoreAdj = 1000
)

// CPUQuota is how CPU limits become a CFS quota: the kubelet's cpuCFSQuota
// and cpuCFSQuotaPeriod.
type CPUQuota struct {
	// Unenforced leaves CPU limits without a quota (cpuCFSQuota: false).
	Unenforced bool
	// Period is the CFS period in µs; 0 is the kubelet's default, 100 ms.
	Period int64
}

// PeriodOrDefault is the CFS period in µs.
func (q CPUQuota) PeriodOrDefault() int64 {
	if q.Period > 0 {
		return q.Period
	}
	return cfsQuotaPeriod
}

// Of is the CFS quota of a CPU limit of milli millicores over the period,
// at least 1 ms; 0 (no quota) without a limit or when limits are not
// enforced.
func (q CPUQuota) Of(milli int64) int64 {
	if milli == 0 || q.Unenforced {
		return 0
	}
	return max(milli*q.PeriodOrDefault()/milliPerCPU, minCFSQuota)
}

// ContainerResources converts a container's requests and limits into Linux
// cgroup settings, in the kubelet's order: CPU shares from the request
// (from the limit when only it is set; at least 2), a CFS quota from the
// limit over the CFS period (opts.CPUQuota), the memory limit, memory.oom.group
// (opts.OOMGroupKill), an OOM score adjustment from the pod's QoS class, a
// huge page limit for every size the host supports, the container's swap,
// and the MemoryQoS settings (see the functions of memory.go).
func ContainerResources(pod *v1.Pod, c *v1.Container, nodeAllocatable v1.ResourceList, opts ResourceOptions) *runtimeapi.LinuxContainerResources {
	r := linuxResources(c.Resources.Requests, c.Resources.Limits, opts.CPUQuota)
	if opts.OOMGroupKill {
		OOMGroupKill(r)
	}
	r.OomScoreAdj = oomScoreAdj(pod, c, nodeAllocatable.Memory().Value())
	r.HugepageLimits = ContainerHugepageLimits(pod, c, opts.HugePageSizes)
	applySwap(r, pod, c, opts)
	applyMemoryQoS(r, pod, c, nodeAllocatable, opts)
	return r
}

// OOMGroupKill has an OOM kill in the container end every process in it
// (cgroup v2's memory.oom.group), not only the one the kernel picks, as
// the kubelet asks on cgroup v2 unless singleProcessOOMKill is set: a
// container whose PID 1 survives the kill of a child would go on running
// without the memory it was killed for, and never be reported OOMKilled.
// r is returned.
func OOMGroupKill(r *runtimeapi.LinuxContainerResources) *runtimeapi.LinuxContainerResources {
	if r.Unified == nil {
		r.Unified = map[string]string{}
	}
	r.Unified["memory.oom.group"] = "1"
	return r
}

// linuxResources are CPU shares from the CPU request (the limit when only
// that is set), a CFS quota from the CPU limit as q makes it, and the
// memory limit. With quotas unenforced neither period nor quota is set, as
// the kubelet leaves them.
func linuxResources(requests, limits v1.ResourceList, q CPUQuota) *runtimeapi.LinuxContainerResources {
	cpuLimit := limits.Cpu().MilliValue()
	cpuRequest, hasRequest := requests[v1.ResourceCPU]
	sharesFrom := cpuRequest.MilliValue()
	if !hasRequest && cpuLimit > 0 {
		sharesFrom = cpuLimit
	}
	r := &runtimeapi.LinuxContainerResources{
		CpuShares:          milliCPUToShares(sharesFrom),
		MemoryLimitInBytes: limits.Memory().Value(),
	}
	if !q.Unenforced {
		r.CpuPeriod, r.CpuQuota = q.PeriodOrDefault(), q.Of(cpuLimit)
	}
	return r
}

func milliCPUToShares(milli int64) int64 {
	shares := milli * sharesPerCPU / milliPerCPU
	return min(max(shares, minCPUShares), maxCPUShares)
}

// oomScoreAdj ranks containers for the OOM killer the kubelet's way:
// guaranteed pods last, best-effort first, burstable ones by the share of the
// node's memory they request.
func oomScoreAdj(pod *v1.Pod, c *v1.Container, nodeMemory int64) int64 {
	switch podspec.PodQOS(pod) {
	case v1.PodQOSGuaranteed:
		return guaranteedOOMScoreAdj
	case v1.PodQOSBestEffort:
		return bestEffortOOMScoreAdj
	}
	if nodeMemory <= 0 {
		return bestEffortOOMScoreAdj - 1
	}
	adj := 1000 - 1000*c.Resources.Requests.Memory().Value()/nodeMemory
	switch {
	case adj < 1000+guaranteedOOMScoreAdj:
		return 1000 + guaranteedOOMScoreAdj
	case adj >= bestEffortOOMScoreAdj:
		return bestEffortOOMScoreAdj - 1
	}
	return adj
}

// SandboxResources are the pod's resources as the sandbox carries them for
// the runtime (LinuxPodSandboxConfig.Resources), the kubelet's way: CPU
// shares from the pod's CPU request (its limit when only that is set), a
// CFS quota from its CPU limit and its memory limit, the pod's overhead
// left out.
func SandboxResources(pod *v1.Pod, q CPUQuota) *runtimeapi.LinuxContainerResources {
	opts := resourcehelper.PodResourcesOptions{ExcludeOverhead: true}
	return linuxResources(resourcehelper.PodRequests(pod, opts), resourcehelper.PodLimits(pod, opts), q)
}

// SandboxOverhead is the pod's overhead (spec.overhead, which the API
// server sets from the pod's RuntimeClass) as the sandbox carries it for the
// runtime (LinuxPodSandboxConfig.Overhead): requests equal to limits, as the
// kubelet treats it. A pod without overhead gets empty resources.
func SandboxOverhead(pod *v1.Pod, q CPUQuota) *runtimeapi.LinuxContainerResources {
	if pod.Spec.Overhead == nil {
		return &runtimeapi.LinuxContainerResources{}
	}
	return linuxResources(pod.Spec.Overhead, pod.Spec.Overhead, q)
}

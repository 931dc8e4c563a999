package cgroups

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
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

// Config is what a cgroup is set to. A nil field leaves the cgroup's value
// as it is; Unlimited lifts a limit.
type Config struct {
	CPUShares *uint64
	CPUQuota  *int64
	CPUPeriod *uint64
	Memory    *int64
	PidsLimit *int64
}

// Equal reports whether c and o set the same values.
func (c Config) Equal(o Config) bool {
	return eqPtr(c.CPUShares, o.CPUShares) && eqPtr(c.CPUQuota, o.CPUQuota) &&
		eqPtr(c.CPUPeriod, o.CPUPeriod) && eqPtr(c.Memory, o.Memory) && eqPtr(c.PidsLimit, o.PidsLimit)
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
	}
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

// MilliCPUToQuota is the CFS quota of a CPU limit over period (µs), at
// least MinQuotaPeriod; 0 for no limit.
func MilliCPUToQuota(milli int64, period int64) int64 {
	if milli == 0 {
		return 0
	}
	return max(milli*period/MilliCPUToCPU, MinQuotaPeriod)
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
	return QoSParent(kubepods, criconfig.PodQOS(pod)).Child(PodPrefix + string(pod.UID))
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

// PodConfig is what a pod's cgroup is set to, the kubelet's way: CPU
// shares from the pod's CPU requests; a CFS quota from its CPU limits when
// every container has one, and a memory limit when every container has
// one (pod-level resources, when they set the limit, decide instead; the
// overhead is added); BestEffort pods get the least shares and no limits.
// pidsLimit (podPidsLimit) bounds the pod's processes when positive.
func PodConfig(pod *v1.Pod, pidsLimit int64) Config {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	cpuLimited, memLimited := limitsDeclared(pod)

	period := uint64(QuotaPeriod)
	shares := MilliCPUToShares(reqs.Cpu().MilliValue())
	quota, mem := Unlimited, Unlimited
	switch criconfig.PodQOS(pod) {
	case v1.PodQOSGuaranteed:
		quota = MilliCPUToQuota(limits.Cpu().MilliValue(), QuotaPeriod)
		mem = limits.Memory().Value()
	case v1.PodQOSBurstable:
		if cpuLimited {
			quota = MilliCPUToQuota(limits.Cpu().MilliValue(), QuotaPeriod)
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
	return Config{CPUShares: &shares, CPUQuota: &quota, CPUPeriod: &period, Memory: &mem, PidsLimit: &pids}
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
}

// QoSPodOf summarizes pod for QoSConfigs.
func QoSPodOf(pod *v1.Pod) QoSPod {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return QoSPod{Class: criconfig.PodQOS(pod), CPURequest: reqs.Cpu().MilliValue()}
}

// QoSConfigs are the settings of the burstable and besteffort cgroups, the
// kubelet's way: burstable gets the shares of its pods' CPU requests
// together, besteffort the least shares.
func QoSConfigs(pods []QoSPod) (burstable, besteffort Config) {
	var milli int64
	for _, p := range pods {
		if p.Class == v1.PodQOSBurstable {
			milli += p.CPURequest
		}
	}
	b, be := MilliCPUToShares(milli), uint64(MinShares)
	return Config{CPUShares: &b}, Config{CPUShares: &be}
}

// NodeConfig is what a cgroup bounded by resources is set to: the shares
// of its CPU, its memory and its pids ("pid") as limits. kubepods gets the
// node's allocatable (capacity minus the reservations) this way, and each
// reserved cgroup its reservation. A resource not listed is left unbounded.
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

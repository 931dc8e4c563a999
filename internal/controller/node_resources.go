package controller

import (
	"fmt"
	"os"

	ocgroups "github.com/opencontainers/cgroups"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/cgroups"
	"github.com/nodelet/nodelet/internal/features"
	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
	"github.com/nodelet/nodelet/internal/nodeinfo"
)

// resourceOptions reads what the containers' and pods' cgroup settings
// take from the configuration and the host: the cgroup version, swap
// accounting and the node's memory and swap (/proc/meminfo), the huge page
// sizes the hugetlb controller bounds, and the MemoryQoS gate and fields.
func resourceOptions(cfg *v1alpha1.NodeletConfiguration) (criconfig.ResourceOptions, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return criconfig.ResourceOptions{}, fmt.Errorf("reading the node's memory: %w", err)
	}
	mem, err := nodeinfo.ParseMeminfo(data)
	if err != nil {
		return criconfig.ResourceOptions{}, fmt.Errorf("reading the node's memory: %w", err)
	}
	v2 := ocgroups.IsCgroup2UnifiedMode()
	return criconfig.ResourceOptions{
		CgroupV2: v2,
		CPUQuota: cpuQuota(cfg),
		// The kubelet's default on cgroup v2 (singleProcessOOMKill unset,
		// which nodelet's configuration refuses to change).
		OOMGroupKill: v2,
		Swap: criconfig.Swap{
			Behavior:       cfg.MemorySwap.SwapBehavior,
			Controller:     cgroups.SwapAccounting(),
			MemoryCapacity: mem.TotalBytes,
			SwapCapacity:   mem.SwapTotalBytes,
		},
		MemoryQoS: criconfig.MemoryQoS{
			Enabled:           features.Enabled(features.MemoryQoS),
			ThrottlingFactor:  cfg.MemoryThrottlingFactor,
			TieredReservation: cfg.MemoryReservationPolicy == v1alpha1.MemoryReservationTiered,
			PageSize:          int64(os.Getpagesize()),
		},
		HugePageSizes: cgroups.HugetlbSizes(),
	}, nil
}

// cpuQuota is how CPU limits become CFS quotas: cpuCFSQuota and
// cpuCFSQuotaPeriod.
func cpuQuota(cfg *v1alpha1.NodeletConfiguration) criconfig.CPUQuota {
	q := criconfig.CPUQuota{Unenforced: cfg.CPUCFSQuota != nil && !*cfg.CPUCFSQuota}
	if p := cfg.CPUCFSQuotaPeriod; p != nil {
		q.Period = p.Microseconds()
	}
	return q
}

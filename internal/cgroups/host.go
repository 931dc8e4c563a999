package cgroups

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"

	ocgroups "github.com/opencontainers/cgroups"
)

// HugetlbSizes are the huge page sizes of the host ("2MB", "1GB", from
// /sys/kernel/mm/hugepages) when the hugetlb controller can bound them:
// enabled in the cgroup v2 root, or mounted as a cgroup v1 hierarchy. None
// without the controller (a v1 host that leaves hugetlb to its v2
// hierarchy, as some hybrid hosts do), where pods' huge pages cannot be
// bounded, as the kubelet finds.
func HugetlbSizes() []string {
	if !hugetlbController() {
		return nil
	}
	return slices.Clone(ocgroups.HugePageSizes())
}

func hugetlbController() bool {
	if ocgroups.IsCgroup2UnifiedMode() {
		data, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
		return err == nil && slices.Contains(strings.Fields(string(data)), "hugetlb")
	}
	_, err := ocgroups.FindCgroupMountpoint("", "hugetlb")
	return err == nil
}

// SwapAccounting reports whether the memory controller accounts swap, as
// the kubelet checks it: memory.memsw.limit_in_bytes in the v1 memory
// hierarchy's root, memory.swap.max in nodelet's own cgroup on v2 (the v2
// root has none). Without it containers get no swap setting.
func SwapAccounting() bool {
	var p string
	if ocgroups.IsCgroup2UnifiedMode() {
		own, err := ocgroups.ParseCgroupFile("/proc/self/cgroup")
		if err != nil {
			return false
		}
		p = filepath.Join("/sys/fs/cgroup", own[""], "memory.swap.max")
	} else {
		mnt, err := ocgroups.FindCgroupMountpoint("", "memory")
		if err != nil {
			return false
		}
		p = filepath.Join(mnt, "memory.memsw.limit_in_bytes")
	}
	_, err := os.Stat(p)
	return err == nil
}

// HostSwapOn reports whether the host has swap on (/proc/swaps lists a
// swap area); a missing /proc/swaps is no swap, as the kubelet reads it.
func HostSwapOn() (bool, error) {
	data, err := os.ReadFile("/proc/swaps")
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return SwapOn(data), nil
}

package eviction

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/internal/nodeinfo"
)

// Files of the root memory cgroup memory.available is read from: cgroup
// v1's usage and stat, or cgroup v2's stat (the v2 root has no
// memory.current).
const (
	MemoryCgroupUsagePath = "/sys/fs/cgroup/memory/memory.usage_in_bytes"
	MemoryCgroupStatPath  = "/sys/fs/cgroup/memory/memory.stat"
	UnifiedMemoryStatPath = "/sys/fs/cgroup/memory.stat"
)

// ImageFs says where the runtime keeps its images.
type ImageFs interface {
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
}

// StatsSource gives the pods' usage as the node's stats summary reports it
// (the node API's /stats/summary).
type StatsSource interface {
	Summary(ctx context.Context, onlyCPUAndMemory bool) (*statsapi.Summary, error)
}

// ParseWorkingSet returns the working set of a cgroup v1 memory cgroup,
// the kubelet's measure: its usage (memory.usage_in_bytes) minus its
// inactive file pages (total_inactive_file of memory.stat), never below
// zero.
func ParseWorkingSet(usage, stat []byte) (int64, error) {
	u, err := strconv.ParseInt(strings.TrimSpace(string(usage)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parsing memory usage: %w", err)
	}
	inactive := int64(-1)
	sc := bufio.NewScanner(bytes.NewReader(stat))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == "total_inactive_file" {
			if inactive, err = strconv.ParseInt(strings.TrimSpace(v), 10, 64); err != nil {
				return 0, fmt.Errorf("parsing total_inactive_file: %w", err)
			}
		}
	}
	if inactive < 0 {
		return 0, errors.New("memory.stat has no total_inactive_file")
	}
	return max(u-inactive, 0), nil
}

// ParseUnifiedWorkingSet returns the working set of the root of a cgroup
// v2 hierarchy from its memory.stat, as the kubelet measures it there
// (cAdvisor over runc's cgroup library, which emulates the usage the root
// lacks): its anonymous and file pages (anon + file, what v1's usage
// counts) minus its inactive file pages, never below zero. Kernel memory
// (slab, page tables, stacks) is not in it, as it is not in the kubelet's.
func ParseUnifiedWorkingSet(stat []byte) (int64, error) {
	fields := map[string]int64{"anon": -1, "file": -1, "inactive_file": -1}
	sc := bufio.NewScanner(bytes.NewReader(stat))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if _, want := fields[k]; !ok || !want {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parsing %s of memory.stat: %w", k, err)
		}
		fields[k] = n
	}
	for _, k := range []string{"anon", "file", "inactive_file"} {
		if fields[k] < 0 {
			return 0, fmt.Errorf("memory.stat has no %s", k)
		}
	}
	return max(fields["anon"]+fields["file"]-fields["inactive_file"], 0), nil
}

// observeMemory measures memory.available: the machine's memory minus the
// root memory cgroup's working set, as the kubelet does (cgroup v1's
// usage minus inactive file pages, or the same from cgroup v2's root
// memory.stat); where neither can be read, MemAvailable.
func observeMemory(host nodeinfo.Host) (Observation, error) {
	data, err := host.ReadFile(nodeinfo.MeminfoPath)
	if err != nil {
		return Observation{}, err
	}
	mem, err := nodeinfo.ParseMeminfo(data)
	if err != nil {
		return Observation{}, err
	}
	var ws int64
	usage, uerr := host.ReadFile(MemoryCgroupUsagePath)
	stat, serr := host.ReadFile(MemoryCgroupStatPath)
	switch {
	case uerr == nil && serr == nil:
		if ws, err = ParseWorkingSet(usage, stat); err != nil {
			return Observation{}, err
		}
	default:
		unified, err := host.ReadFile(UnifiedMemoryStatPath)
		if err != nil {
			return Observation{Available: mem.AvailableBytes, Capacity: mem.TotalBytes}, nil
		}
		if ws, err = ParseUnifiedWorkingSet(unified); err != nil {
			return Observation{}, err
		}
	}
	return Observation{Available: max(mem.TotalBytes-ws, 0), Capacity: mem.TotalBytes}, nil
}

// observePIDs measures pid.available: kernel.pid_max minus the tasks that
// run.
func observePIDs(host nodeinfo.Host) (Observation, error) {
	data, err := host.ReadFile(nodeinfo.PIDMaxPath)
	if err != nil {
		return Observation{}, err
	}
	pidMax, err := nodeinfo.ParseInt(data)
	if err != nil {
		return Observation{}, fmt.Errorf("parsing %s: %w", nodeinfo.PIDMaxPath, err)
	}
	if data, err = host.ReadFile(nodeinfo.LoadavgPath); err != nil {
		return Observation{}, err
	}
	tasks, err := nodeinfo.ParseTaskCount(data)
	if err != nil {
		return Observation{}, err
	}
	return Observation{Available: pidMax - tasks, Capacity: pidMax}, nil
}

// fsObservations are a filesystem's space and inodes signals.
func fsObservations(f nodeinfo.Filesystem, space, inodes Signal, obs Observations) {
	obs[space] = Observation{Available: f.AvailableBytes, Capacity: f.CapacityBytes}
	obs[inodes] = Observation{Available: f.InodesFree, Capacity: f.Inodes}
}

// imageFsMountpoint is where the runtime's images live, "" when it does not
// say.
func imageFsMountpoint(info *runtimeapi.ImageFsInfoResponse) string {
	for _, fs := range info.GetImageFilesystems() {
		if mp := fs.GetFsId().GetMountpoint(); mp != "" {
			return mp
		}
	}
	return ""
}

// usageFromStats turns a pod's summary stats into its usage; volumes (the
// disk-backed emptyDir volumes' usage, measured now) are added to its local
// storage, bytes and inodes, in place of what the summary counted for them.
func usageFromStats(pod *v1.Pod, ps *statsapi.PodStats, volumes map[string]VolumeUsage) PodUsage {
	pu := PodUsage{Pod: pod, Volumes: volumes}
	if ps == nil {
		return pu
	}
	if m := ps.Memory; m != nil && m.WorkingSetBytes != nil {
		pu.Memory = ptrInt(int64(*m.WorkingSetBytes))
	}
	if p := ps.ProcessStats; p != nil && p.ProcessCount != nil {
		pu.Processes = ptrInt(int64(*p.ProcessCount))
	}
	for _, c := range ps.Containers {
		cu := ContainerUsage{Name: c.Name}
		if c.Memory != nil && c.Memory.WorkingSetBytes != nil {
			cu.Memory = ptrInt(int64(*c.Memory.WorkingSetBytes))
		}
		if c.Rootfs != nil {
			var logBytes, logInodes *uint64
			if c.Logs != nil {
				logBytes, logInodes = c.Logs.UsedBytes, c.Logs.InodesUsed
			}
			cu.Ephemeral = sumKnown(c.Rootfs.UsedBytes, logBytes)
			cu.Inodes = sumKnown(c.Rootfs.InodesUsed, logInodes)
		}
		pu.Containers = append(pu.Containers, cu)
	}
	var summaryBytes, summaryInodes *uint64
	if e := ps.EphemeralStorage; e != nil {
		summaryBytes, summaryInodes = e.UsedBytes, e.InodesUsed
	}
	pu.Ephemeral = freshTotal(summaryBytes, ps.VolumeStats, volumes,
		func(f statsapi.FsStats) *uint64 { return f.UsedBytes }, func(v VolumeUsage) int64 { return v.Bytes })
	pu.Inodes = freshTotal(summaryInodes, ps.VolumeStats, volumes,
		func(f statsapi.FsStats) *uint64 { return f.InodesUsed }, func(v VolumeUsage) int64 { return v.Inodes })
	return pu
}

// sumKnown is the writable layer's number plus the logs' (when known); nil
// when the writable layer's is not known.
func sumKnown(layer, logs *uint64) *int64 {
	if layer == nil {
		return nil
	}
	n := int64(*layer)
	if logs != nil {
		n += int64(*logs)
	}
	return &n
}

// freshTotal is the pod's summary total (bytes or inodes) with the fresh
// measures of volumes in place of the summary's numbers for them, which
// it counted as last measured in the background; nil when neither is
// known.
func freshTotal(summary *uint64, summaryVolumes []statsapi.VolumeStats, volumes map[string]VolumeUsage,
	field func(statsapi.FsStats) *uint64, fresh func(VolumeUsage) int64) *int64 {
	var total int64
	known := summary != nil
	if known {
		total = int64(*summary)
		for _, v := range summaryVolumes {
			if _, ok := volumes[v.Name]; ok && field(v.FsStats) != nil {
				total = max(total-int64(*field(v.FsStats)), 0)
			}
		}
	}
	for _, v := range volumes {
		total += fresh(v)
		known = true
	}
	if !known {
		return nil
	}
	return &total
}

func ptrInt(v int64) *int64 { return &v }

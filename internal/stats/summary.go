package stats

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	kubetypes "k8s.io/kubelet/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
	"github.com/nodelet/nodelet/internal/nodeinfo"
)

// unifiedCgroupRoot is where the root of a cgroup v2 hierarchy is mounted
// on a host that boots cgroup v2 alone: the node's pressure files
// (cpu.pressure, memory.pressure, io.pressure) are read there.
const unifiedCgroupRoot = "/sys/fs/cgroup"

// Provider computes the node's resource usage summary from the CRI
// stats calls and the host.
type Provider struct {
	NodeName   string
	Pods       client.Reader
	Runtime    cri.Runtime
	Host       nodeinfo.Host
	RootDir    string
	PodLogsDir string
	Clock      clock.PassiveClock
	// Volumes holds the latest measure of the pods' volumes; nil leaves
	// the volume list out.
	Volumes VolumeStatsCache

	mu sync.Mutex
	// cpu holds the previous CPU sample by container ID ("" for the node),
	// to derive usageNanoCores when the runtime leaves it out.
	cpu map[string]cpuSample
	// noSandboxStats is set once the runtime said it has no
	// ListPodSandboxStats.
	noSandboxStats bool
}

type cpuSample struct {
	at    time.Time
	total uint64
}

// nanoCores returns the CPU rate since the previous sample of key and
// records this one; nil for the first sample.
func (p *Provider) nanoCores(key string, at time.Time, total uint64) *uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cpu == nil {
		p.cpu = map[string]cpuSample{}
	}
	prev, ok := p.cpu[key]
	p.cpu[key] = cpuSample{at: at, total: total}
	if !ok || !at.After(prev.at) || total < prev.total {
		return nil
	}
	rate := float64(total-prev.total) / at.Sub(prev.at).Seconds()
	return ptr.To(uint64(rate))
}

// forget drops the CPU samples of containers not in keep.
func (p *Provider) forget(keep map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.cpu {
		if k != "" && !keep[k] {
			delete(p.cpu, k)
		}
	}
}

func (p *Provider) now() time.Time {
	if p.Clock == nil {
		return time.Now()
	}
	return p.Clock.Now()
}

// Summary returns the node's summary; onlyCPUAndMemory leaves out
// filesystems and networks, as metrics-server asks.
func (p *Provider) Summary(ctx context.Context, onlyCPUAndMemory bool) (*statsapi.Summary, error) {
	node, err := p.nodeStats(ctx, onlyCPUAndMemory)
	if err != nil {
		return nil, err
	}
	pods, err := p.podStats(ctx, onlyCPUAndMemory)
	if err != nil {
		return nil, err
	}
	return &statsapi.Summary{Node: *node, Pods: pods}, nil
}

func (p *Provider) nodeStats(ctx context.Context, onlyCPUAndMemory bool) (*statsapi.NodeStats, error) {
	now := p.now()
	ts := metav1.NewTime(now)
	n := &statsapi.NodeStats{NodeName: p.NodeName}
	stat, err := p.Host.ReadFile("/proc/stat")
	if err != nil {
		return nil, fmt.Errorf("reading node CPU usage: %w", err)
	}
	if boot, err := parseBootTime(stat); err == nil {
		n.StartTime = metav1.NewTime(time.Unix(boot, 0))
	}
	busy, err := parseProcStatCPU(stat)
	if err != nil {
		return nil, err
	}
	n.CPU = &statsapi.CPUStats{Time: ts, UsageCoreNanoSeconds: ptr.To(busy), UsageNanoCores: p.nanoCores("", now, busy)}
	meminfo, err := p.Host.ReadFile("/proc/meminfo")
	if err != nil {
		return nil, fmt.Errorf("reading node memory usage: %w", err)
	}
	mem, err := parseHostMemory(meminfo)
	if err != nil {
		return nil, err
	}
	n.Memory = &statsapi.MemoryStats{
		Time: ts, AvailableBytes: ptr.To(mem.Available), UsageBytes: ptr.To(mem.Usage),
		WorkingSetBytes: ptr.To(mem.WorkingSet), RSSBytes: ptr.To(mem.RSS),
	}
	n.CPU.PSI = p.rootPressure("cpu")
	n.Memory.PSI = p.rootPressure("memory")
	if onlyCPUAndMemory {
		return n, nil
	}
	if psi := p.rootPressure("io"); psi != nil {
		n.IO = &statsapi.IOStats{Time: ts, PSI: psi}
	}
	if dev, err := p.Host.ReadFile("/proc/net/dev"); err == nil {
		route, _ := p.Host.ReadFile("/proc/net/route")
		n.Network = networkStats(ts, dev, nodeinfo.DefaultRouteInterface(route))
	}
	if fsStats, err := p.fsStats(ts, p.RootDir); err == nil {
		n.Fs = fsStats
	}
	if info, err := p.Runtime.ImageFsInfo(ctx); err == nil && len(info.GetImageFilesystems()) > 0 {
		u := info.GetImageFilesystems()[0]
		imageFs, err := p.fsStats(ts, u.GetFsId().GetMountpoint())
		if err != nil {
			imageFs = &statsapi.FsStats{Time: ts}
		}
		imageFs.UsedBytes = ptr.To(u.GetUsedBytes().GetValue())
		imageFs.InodesUsed = ptr.To(u.GetInodesUsed().GetValue())
		n.Runtime = &statsapi.RuntimeStats{ImageFs: imageFs}
	}
	rl := &statsapi.RlimitStats{Time: ts}
	if b, err := p.Host.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		if v, err := nodeinfo.ParseInt(b); err == nil {
			rl.MaxPID = ptr.To(v)
		}
	}
	if b, err := p.Host.ReadFile("/proc/loadavg"); err == nil {
		if v, err := nodeinfo.ParseTaskCount(b); err == nil {
			rl.NumOfRunningProcesses = ptr.To(v)
		}
	}
	n.Rlimit = rl
	return n, nil
}

// rootPressure is the pressure stall information of the root cgroup for
// resource ("cpu", "memory", "io"), as the kubelet reports the node's:
// nil where the root cgroup has none (cgroup v1, a kernel without PSI).
func (p *Provider) rootPressure(resource string) *statsapi.PSIStats {
	data, err := p.Host.ReadFile(filepath.Join(unifiedCgroupRoot, resource+".pressure"))
	if err != nil {
		return nil
	}
	psi, err := parsePressure(data)
	if err != nil {
		return nil
	}
	return psi
}

func networkStats(ts metav1.Time, dev []byte, defaultIface string) *statsapi.NetworkStats {
	ifaces, err := parseNetDev(dev)
	if err != nil || len(ifaces) == 0 {
		return nil
	}
	ns := &statsapi.NetworkStats{Time: ts}
	for _, d := range ifaces {
		is := statsapi.InterfaceStats{
			Name: d.Name, RxBytes: ptr.To(d.RxBytes), RxErrors: ptr.To(d.RxErrors),
			TxBytes: ptr.To(d.TxBytes), TxErrors: ptr.To(d.TxErrs),
		}
		ns.Interfaces = append(ns.Interfaces, is)
		if d.Name == defaultIface {
			ns.InterfaceStats = is
		}
	}
	if ns.Name == "" {
		ns.InterfaceStats = ns.Interfaces[0]
	}
	return ns
}

func (p *Provider) fsStats(ts metav1.Time, path string) (*statsapi.FsStats, error) {
	f, err := p.Host.Statfs(path)
	if err != nil {
		return nil, err
	}
	return &statsapi.FsStats{
		Time:           ts,
		CapacityBytes:  ptr.To(uint64(f.CapacityBytes)),
		AvailableBytes: ptr.To(uint64(f.AvailableBytes)),
		UsedBytes:      ptr.To(uint64(max(f.CapacityBytes-f.AvailableBytes, 0))),
		Inodes:         ptr.To(uint64(f.Inodes)),
		InodesFree:     ptr.To(uint64(f.InodesFree)),
		InodesUsed:     ptr.To(uint64(max(f.Inodes-f.InodesFree, 0))),
	}, nil
}

func (p *Provider) podStats(ctx context.Context, onlyCPUAndMemory bool) ([]statsapi.PodStats, error) {
	list := &corev1.PodList{}
	if err := p.Pods.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing pods for stats: %w", err)
	}
	containers, err := p.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	if err != nil {
		return nil, fmt.Errorf("listing containers for stats: %w", err)
	}
	cstats, err := p.Runtime.ListContainerStats(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("listing container stats: %w", err)
	}
	byID := map[string]*runtimeapi.ContainerStats{}
	for _, s := range cstats {
		byID[s.GetAttributes().GetId()] = s
	}
	sandboxes := p.sandboxStats(ctx)
	var readySandboxes map[string]string
	if sandboxes == nil && !onlyCPUAndMemory {
		readySandboxes = p.readySandboxes(ctx)
	}
	ts := metav1.NewTime(p.now())
	var rootfsCap *statsapi.FsStats
	var logsCap *statsapi.FsStats
	if !onlyCPUAndMemory {
		if info, err := p.Runtime.ImageFsInfo(ctx); err == nil && len(info.GetContainerFilesystems()) > 0 {
			rootfsCap, _ = p.fsStats(ts, info.GetContainerFilesystems()[0].GetFsId().GetMountpoint())
		} else if err == nil && len(info.GetImageFilesystems()) > 0 {
			rootfsCap, _ = p.fsStats(ts, info.GetImageFilesystems()[0].GetFsId().GetMountpoint())
		}
		logsCap, _ = p.fsStats(ts, p.PodLogsDir)
	}

	byPod := map[string][]*runtimeapi.Container{}
	seen := map[string]bool{}
	for _, c := range containers {
		uid := c.GetLabels()[kubetypes.KubernetesPodUIDLabel]
		byPod[uid] = append(byPod[uid], c)
		seen[c.GetId()] = true
	}
	p.forget(seen)

	out := []statsapi.PodStats{}
	for i := range list.Items {
		pod := &list.Items[i]
		if pod.Spec.NodeName != p.NodeName {
			continue
		}
		ps := statsapi.PodStats{
			PodRef:     statsapi.PodReference{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)},
			Containers: []statsapi.ContainerStats{},
		}
		if pod.Status.StartTime != nil {
			ps.StartTime = *pod.Status.StartTime
		} else {
			ps.StartTime = pod.CreationTimestamp
		}
		var cpuTotal, memWS, memUsage, memRSS uint64
		var cpuRate *uint64
		var haveCPU, haveMem bool
		// ephemeral is the pod's local ephemeral storage: writable layers,
		// logs, local volumes and /etc/hosts, bytes and inodes.
		var ephemeral fsUsage
		for _, c := range byPod[string(pod.UID)] {
			s := byID[c.GetId()]
			cs := statsapi.ContainerStats{
				Name:      c.GetMetadata().GetName(),
				StartTime: metav1.NewTime(time.Unix(0, c.GetCreatedAt())),
			}
			if cpu := s.GetCpu(); cpu != nil && cpu.GetUsageCoreNanoSeconds() != nil {
				at := time.Unix(0, cpu.GetTimestamp())
				total := cpu.GetUsageCoreNanoSeconds().GetValue()
				rate := p.nanoCores(c.GetId(), at, total)
				if cpu.GetUsageNanoCores() != nil {
					rate = ptr.To(cpu.GetUsageNanoCores().GetValue())
				}
				cs.CPU = &statsapi.CPUStats{Time: metav1.NewTime(at), UsageCoreNanoSeconds: ptr.To(total), UsageNanoCores: rate, PSI: criPSI(cpu.GetPsi())}
				cpuTotal += total
				haveCPU = true
				if rate != nil {
					cpuRate = ptr.To(ptr.Deref(cpuRate, 0) + *rate)
				}
			}
			if mem := s.GetMemory(); mem != nil && mem.GetWorkingSetBytes() != nil {
				cs.Memory = memoryStats(mem)
				cs.Memory.AvailableBytes = optNonZero(mem.GetAvailableBytes())
				memWS += mem.GetWorkingSetBytes().GetValue()
				memUsage += mem.GetUsageBytes().GetValue()
				memRSS += mem.GetRssBytes().GetValue()
				haveMem = true
			}
			if !onlyCPUAndMemory {
				cs.IO = ioStats(s.GetIo())
				if wl := s.GetWritableLayer(); wl != nil {
					rootfs := &statsapi.FsStats{Time: ts}
					if wl.GetTimestamp() > 0 {
						rootfs.Time = metav1.NewTime(time.Unix(0, wl.GetTimestamp()))
					}
					if rootfsCap != nil {
						rootfs.CapacityBytes, rootfs.AvailableBytes = rootfsCap.CapacityBytes, rootfsCap.AvailableBytes
						rootfs.Inodes, rootfs.InodesFree = rootfsCap.Inodes, rootfsCap.InodesFree
					}
					rootfs.UsedBytes = optUint(wl.GetUsedBytes())
					rootfs.InodesUsed = optUint(wl.GetInodesUsed())
					cs.Rootfs = rootfs
					ephemeral.add(rootfs.UsedBytes, rootfs.InodesUsed)
				}
				logDir := filepath.Join(criconfig.PodLogDirectory(p.PodLogsDir, pod), cs.Name)
				used, inodes := dirUsage(logDir)
				logs := &statsapi.FsStats{Time: ts, UsedBytes: ptr.To(used), InodesUsed: ptr.To(inodes)}
				if logsCap != nil {
					logs.CapacityBytes, logs.AvailableBytes = logsCap.CapacityBytes, logsCap.AvailableBytes
					logs.Inodes, logs.InodesFree = logsCap.Inodes, logsCap.InodesFree
				}
				cs.Logs = logs
				ephemeral.add(&used, &inodes)
			}
			ps.Containers = append(ps.Containers, cs)
		}
		if haveCPU {
			ps.CPU = &statsapi.CPUStats{Time: ts, UsageCoreNanoSeconds: ptr.To(cpuTotal), UsageNanoCores: cpuRate}
		}
		if haveMem {
			ps.Memory = &statsapi.MemoryStats{Time: ts, WorkingSetBytes: ptr.To(memWS), UsageBytes: ptr.To(memUsage), RSSBytes: ptr.To(memRSS)}
		}
		if sb := sandboxes[string(pod.UID)]; sb != nil {
			applySandboxStats(&ps, sb, onlyCPUAndMemory)
		} else if id := readySandboxes[string(pod.UID)]; id != "" {
			ps.Network = p.sandboxNetwork(ctx, ts, id)
		}
		if !onlyCPUAndMemory {
			var volumes fsUsage
			ps.VolumeStats, volumes = podVolumeStats(p.Volumes, pod.UID)
			hosts := p.etcHostsUsage(pod.UID)
			ephemeral.add(&volumes.bytes, &volumes.inodes)
			ephemeral.add(&hosts.bytes, &hosts.inodes)
			ps.EphemeralStorage = &statsapi.FsStats{Time: ts, UsedBytes: ptr.To(ephemeral.bytes), InodesUsed: ptr.To(ephemeral.inodes)}
			if logsCap != nil {
				ps.EphemeralStorage.CapacityBytes, ps.EphemeralStorage.AvailableBytes = logsCap.CapacityBytes, logsCap.AvailableBytes
			}
		}
		out = append(out, ps)
	}
	return out, nil
}

// sandboxStats returns the runtime's pod-level stats by pod UID, or nil
// when the runtime has no ListPodSandboxStats.
func (p *Provider) sandboxStats(ctx context.Context) map[string]*runtimeapi.PodSandboxStats {
	p.mu.Lock()
	skip := p.noSandboxStats
	p.mu.Unlock()
	if skip {
		return nil
	}
	all, err := p.Runtime.ListPodSandboxStats(ctx, nil)
	if err != nil {
		if cri.IsUnimplemented(err) {
			p.mu.Lock()
			p.noSandboxStats = true
			p.mu.Unlock()
		}
		return nil
	}
	out := map[string]*runtimeapi.PodSandboxStats{}
	for _, s := range all {
		out[s.GetAttributes().GetMetadata().GetUid()] = s
	}
	return out
}

// readySandboxes maps pod UIDs to their ready sandbox.
func (p *Provider) readySandboxes(ctx context.Context) map[string]string {
	found, err := p.Runtime.ListPodSandboxes(ctx, &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	})
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, sb := range found {
		out[sb.GetMetadata().GetUid()] = sb.GetId()
	}
	return out
}

// sandboxNetwork reads a pod's interface counters from its network
// namespace, through the sandbox's process, for runtimes without
// ListPodSandboxStats; nil when they cannot be read.
func (p *Provider) sandboxNetwork(ctx context.Context, ts metav1.Time, sandboxID string) *statsapi.NetworkStats {
	pid, err := p.Runtime.PodSandboxPid(ctx, sandboxID)
	if err != nil || pid <= 0 {
		return nil
	}
	dev, err := p.Host.ReadFile(fmt.Sprintf("/proc/%d/net/dev", pid))
	if err != nil {
		return nil
	}
	return networkStats(ts, dev, "eth0")
}

// applySandboxStats takes the pod's CPU, memory and network from the
// runtime's pod-level stats, which count the whole pod cgroup.
func applySandboxStats(ps *statsapi.PodStats, sb *runtimeapi.PodSandboxStats, onlyCPUAndMemory bool) {
	l := sb.GetLinux()
	if cpu := l.GetCpu(); cpu != nil && cpu.GetUsageCoreNanoSeconds() != nil {
		ps.CPU = &statsapi.CPUStats{
			Time:                 metav1.NewTime(time.Unix(0, cpu.GetTimestamp())),
			UsageCoreNanoSeconds: ptr.To(cpu.GetUsageCoreNanoSeconds().GetValue()),
			UsageNanoCores:       optUint(cpu.GetUsageNanoCores()),
			PSI:                  criPSI(cpu.GetPsi()),
		}
	}
	if mem := l.GetMemory(); mem != nil && mem.GetWorkingSetBytes() != nil {
		ps.Memory = memoryStats(mem)
		ps.Memory.AvailableBytes = optUint(mem.GetAvailableBytes())
	}
	if onlyCPUAndMemory {
		return
	}
	ps.IO = ioStats(l.GetIo())
	if net := l.GetNetwork(); net != nil {
		ns := &statsapi.NetworkStats{Time: metav1.NewTime(time.Unix(0, net.GetTimestamp()))}
		conv := func(i *runtimeapi.NetworkInterfaceUsage) statsapi.InterfaceStats {
			return statsapi.InterfaceStats{
				Name: i.GetName(), RxBytes: optUint(i.GetRxBytes()), RxErrors: optUint(i.GetRxErrors()),
				TxBytes: optUint(i.GetTxBytes()), TxErrors: optUint(i.GetTxErrors()),
			}
		}
		if net.GetDefaultInterface() != nil {
			ns.InterfaceStats = conv(net.GetDefaultInterface())
		}
		for _, i := range net.GetInterfaces() {
			ns.Interfaces = append(ns.Interfaces, conv(i))
		}
		ps.Network = ns
	}
}

// optNonZero is optUint for values where 0 means not known (available
// memory of a container without a limit).
func optNonZero(v *runtimeapi.UInt64Value) *uint64 {
	if v.GetValue() == 0 {
		return nil
	}
	return ptr.To(v.GetValue())
}

func optUint(v *runtimeapi.UInt64Value) *uint64 {
	if v == nil {
		return nil
	}
	return ptr.To(v.GetValue())
}

// dirUsage adds up the sizes and counts the files under dir.
func dirUsage(dir string) (bytes, inodes uint64) {
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		inodes++
		if info, err := d.Info(); err == nil && d.Type().IsRegular() {
			bytes += uint64(info.Size())
		}
		return nil
	})
	return bytes, inodes
}

// memoryStats converts the runtime's memory usage (with a working set) to
// the summary API's, without AvailableBytes, which callers fill their way.
func memoryStats(mem *runtimeapi.MemoryUsage) *statsapi.MemoryStats {
	return &statsapi.MemoryStats{
		Time:            metav1.NewTime(time.Unix(0, mem.GetTimestamp())),
		WorkingSetBytes: ptr.To(mem.GetWorkingSetBytes().GetValue()),
		UsageBytes:      optUint(mem.GetUsageBytes()),
		RSSBytes:        optUint(mem.GetRssBytes()),
		PageFaults:      optUint(mem.GetPageFaults()),
		MajorPageFaults: optUint(mem.GetMajorPageFaults()),
		PSI:             criPSI(mem.GetPsi()),
	}
}

// ioStats converts the runtime's I/O usage, of which the summary API has
// the pressure stall information alone: nil without it.
func ioStats(io *runtimeapi.IoUsage) *statsapi.IOStats {
	psi := criPSI(io.GetPsi())
	if psi == nil {
		return nil
	}
	return &statsapi.IOStats{Time: metav1.NewTime(time.Unix(0, io.GetTimestamp())), PSI: psi}
}

package stats

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	kubetypes "k8s.io/kubelet/pkg/types"

	"github.com/nodelet/nodelet/internal/cgroups"
	"github.com/nodelet/nodelet/internal/nodeinfo"
)

// The families of /metrics/cadvisor, with the names, types and labels of
// the kubelet's cAdvisor endpoint that dashboards, alerts and autoscalers
// read: container series carry container, image, name (the runtime's
// container ID), namespace and pod; a pod's own series (its cgroup as a
// whole, and its network) carry container="" and image="", as cAdvisor
// gives them for the pod's cgroup.
var (
	cadvisorContainerLabels = []string{"container", "image", "name", "namespace", "pod", "id"}
	cadvisorCPULabels       = []string{"container", "cpu", "image", "name", "namespace", "pod", "id"}
	cadvisorNetLabels       = []string{"container", "image", "interface", "name", "namespace", "pod", "id"}
	cadvisorFsLabels        = []string{"container", "device", "image", "name", "namespace", "pod", "id"}
	cadvisorMachineLabels   = []string{"boot_id", "machine_id", "system_uuid"}

	cadvisorCPUUsage = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"Cumulative cpu time consumed in seconds.", cadvisorCPULabels, nil)
	cadvisorWorkingSet = prometheus.NewDesc("container_memory_working_set_bytes",
		"Current working set in bytes.", cadvisorContainerLabels, nil)
	cadvisorMemoryUsage = prometheus.NewDesc("container_memory_usage_bytes",
		"Current memory usage in bytes, including all memory regardless of when it was accessed", cadvisorContainerLabels, nil)
	cadvisorRSS = prometheus.NewDesc("container_memory_rss",
		"Size of RSS in bytes.", cadvisorContainerLabels, nil)
	cadvisorMemoryLimit = prometheus.NewDesc("container_spec_memory_limit_bytes",
		"Memory limit for the container.", cadvisorContainerLabels, nil)
	cadvisorCPUShares = prometheus.NewDesc("container_spec_cpu_shares",
		"CPU share of the container.", cadvisorContainerLabels, nil)
	cadvisorCPUQuota = prometheus.NewDesc("container_spec_cpu_quota",
		"CPU quota of the container.", cadvisorContainerLabels, nil)
	cadvisorCPUPeriod = prometheus.NewDesc("container_spec_cpu_period",
		"CPU period of the container.", cadvisorContainerLabels, nil)
	cadvisorMemoryFailures = prometheus.NewDesc("container_memory_failures_total",
		"Cumulative count of memory allocation failures.",
		[]string{"container", "failure_type", "image", "name", "namespace", "pod", "scope", "id"}, nil)
	cadvisorCPUUser = prometheus.NewDesc("container_cpu_user_seconds_total",
		"Cumulative user cpu time consumed in seconds.", cadvisorContainerLabels, nil)
	cadvisorCPUSystem = prometheus.NewDesc("container_cpu_system_seconds_total",
		"Cumulative system cpu time consumed in seconds.", cadvisorContainerLabels, nil)
	cadvisorCFSPeriods = prometheus.NewDesc("container_cpu_cfs_periods_total",
		"Number of elapsed enforcement period intervals.", cadvisorContainerLabels, nil)
	cadvisorCFSThrottledPeriods = prometheus.NewDesc("container_cpu_cfs_throttled_periods_total",
		"Number of throttled period intervals.", cadvisorContainerLabels, nil)
	cadvisorCFSThrottledSeconds = prometheus.NewDesc("container_cpu_cfs_throttled_seconds_total",
		"Total time duration the container has been throttled.", cadvisorContainerLabels, nil)
	cadvisorCache = prometheus.NewDesc("container_memory_cache",
		"Number of bytes of page cache memory.", cadvisorContainerLabels, nil)
	cadvisorSwap = prometheus.NewDesc("container_memory_swap",
		"Container swap usage in bytes.", cadvisorContainerLabels, nil)
	cadvisorFailcnt = prometheus.NewDesc("container_memory_failcnt",
		"Number of memory usage hits limits", cadvisorContainerLabels, nil)
	cadvisorOOMEvents = prometheus.NewDesc("container_oom_events_total",
		"Count of out of memory events observed for the container", cadvisorContainerLabels, nil)
	cadvisorProcesses = prometheus.NewDesc("container_processes",
		"Number of processes running inside the container.", cadvisorContainerLabels, nil)
	cadvisorThreads = prometheus.NewDesc("container_threads",
		"Number of threads running inside the container", cadvisorContainerLabels, nil)
	cadvisorRxPackets = prometheus.NewDesc("container_network_receive_packets_total",
		"Cumulative count of packets received", cadvisorNetLabels, nil)
	cadvisorTxPackets = prometheus.NewDesc("container_network_transmit_packets_total",
		"Cumulative count of packets transmitted", cadvisorNetLabels, nil)
	cadvisorRxDropped = prometheus.NewDesc("container_network_receive_packets_dropped_total",
		"Cumulative count of packets dropped while receiving", cadvisorNetLabels, nil)
	cadvisorTxDropped = prometheus.NewDesc("container_network_transmit_packets_dropped_total",
		"Cumulative count of packets dropped while transmitting", cadvisorNetLabels, nil)
	cadvisorMachineCores = prometheus.NewDesc("machine_cpu_cores",
		"Number of logical CPU cores.", cadvisorMachineLabels, nil)
	cadvisorMachineMemory = prometheus.NewDesc("machine_memory_bytes",
		"Amount of memory installed on the machine.", cadvisorMachineLabels, nil)
	cadvisorStartTime = prometheus.NewDesc("container_start_time_seconds",
		"Start time of the container since unix epoch in seconds.", cadvisorContainerLabels, nil)
	cadvisorLastSeen = prometheus.NewDesc("container_last_seen",
		"Last time a container was seen by the exporter", cadvisorContainerLabels, nil)
	cadvisorFsUsage = prometheus.NewDesc("container_fs_usage_bytes",
		"Number of bytes that are consumed by the container on this filesystem.", cadvisorFsLabels, nil)
	cadvisorFsLimit = prometheus.NewDesc("container_fs_limit_bytes",
		"Number of bytes that can be consumed by the container on this filesystem.", cadvisorFsLabels, nil)
	cadvisorRxBytes = prometheus.NewDesc("container_network_receive_bytes_total",
		"Cumulative count of bytes received", cadvisorNetLabels, nil)
	cadvisorTxBytes = prometheus.NewDesc("container_network_transmit_bytes_total",
		"Cumulative count of bytes transmitted", cadvisorNetLabels, nil)
	cadvisorRxErrors = prometheus.NewDesc("container_network_receive_errors_total",
		"Cumulative count of errors encountered while receiving", cadvisorNetLabels, nil)
	cadvisorTxErrors = prometheus.NewDesc("container_network_transmit_errors_total",
		"Cumulative count of errors encountered while transmitting", cadvisorNetLabels, nil)

	cadvisorDescs = []*prometheus.Desc{cadvisorCPUUsage, cadvisorWorkingSet, cadvisorMemoryUsage, cadvisorRSS,
		cadvisorMemoryLimit, cadvisorCPUShares, cadvisorCPUQuota, cadvisorCPUPeriod, cadvisorMemoryFailures,
		cadvisorMachineCores, cadvisorMachineMemory, cadvisorCPUUser, cadvisorCPUSystem, cadvisorCFSPeriods,
		cadvisorCFSThrottledPeriods, cadvisorCFSThrottledSeconds, cadvisorCache, cadvisorSwap, cadvisorFailcnt,
		cadvisorOOMEvents, cadvisorProcesses, cadvisorThreads, cadvisorRxPackets, cadvisorTxPackets,
		cadvisorRxDropped, cadvisorTxDropped, cadvisorStartTime, cadvisorLastSeen, cadvisorFsUsage, cadvisorFsLimit,
		cadvisorRxBytes, cadvisorTxBytes, cadvisorRxErrors, cadvisorTxErrors}
)

// cadvisorCollector turns a fresh summary, the pods' specs and the
// runtime's container IDs into the /metrics/cadvisor families at every
// scrape.
type cadvisorCollector struct{ p *Provider }

// CadvisorRegistry returns a registry that serves /metrics/cadvisor. A
// scrape that cannot read the stats fails (the handler answers 500).
func (p *Provider) CadvisorRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(cadvisorCollector{p})
	return r
}

func (c cadvisorCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range cadvisorDescs {
		ch <- d
	}
}

func (c cadvisorCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, err := c.p.cadvisorInput(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(cadvisorCPUUsage, err)
		return
	}
	for _, m := range cadvisorMetrics(in) {
		ch <- m
	}
}

// cadvisorInput is what one scrape reads: the summary, this node's pods by
// UID, the running containers' IDs by pod UID and container name, and the
// machine.
type cadvisorInput struct {
	summary *statsapi.Summary
	pods    map[string]*corev1.Pod
	ids     map[string]string
	machine cadvisorMachine
	// cgroups holds what was read from the pods' and containers' cgroups,
	// by containerKey (the pod's own under its UID and "").
	cgroups map[string]cgroupStats
	// cgroupPaths holds the cgroup paths found, keyed as cgroups is: the
	// id label.
	cgroupPaths map[string]string
	// netdev holds the pods' interface counters by UID.
	netdev map[string][]netDev
	now    time.Time
}

// cadvisorMachine is the machine as cAdvisor labels and sizes it. Zero
// sizes are not served.
type cadvisorMachine struct {
	bootID, machineID, systemUUID string
	cores                         int
	memoryBytes                   uint64
}

// readMachine reads the machine's identity and size; a file it cannot read
// leaves its field empty.
func (p *Provider) readMachine() cadvisorMachine {
	read := func(name string) string {
		b, err := p.Host.ReadFile(name)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	m := cadvisorMachine{
		bootID: read(nodeinfo.BootIDPath), machineID: read(nodeinfo.MachineIDPath),
		systemUUID: read(nodeinfo.ProductUUIDPath), cores: p.Host.NumCPU(),
	}
	if b, err := p.Host.ReadFile(nodeinfo.MeminfoPath); err == nil {
		if mem, err := parseHostMemory(b); err == nil {
			m.memoryBytes = mem.Capacity
		}
	}
	return m
}

// containerKey keys a container by its pod's UID and its name.
func containerKey(podUID, name string) string { return podUID + "/" + name }

func (p *Provider) cadvisorInput(ctx context.Context) (cadvisorInput, error) {
	sum, err := p.Summary(ctx, false)
	if err != nil {
		return cadvisorInput{}, err
	}
	list := &corev1.PodList{}
	if err := p.Pods.List(ctx, list); err != nil {
		return cadvisorInput{}, fmt.Errorf("listing pods for cadvisor metrics: %w", err)
	}
	containers, err := p.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	if err != nil {
		return cadvisorInput{}, fmt.Errorf("listing containers for cadvisor metrics: %w", err)
	}
	in := cadvisorInput{summary: sum, pods: map[string]*corev1.Pod{}, ids: map[string]string{}, machine: p.readMachine(), now: p.now()}
	in.cgroups, in.cgroupPaths, in.netdev = p.readPodCgroups(ctx, containers)
	for i := range list.Items {
		in.pods[string(list.Items[i].UID)] = &list.Items[i]
	}
	for _, c := range containers {
		in.ids[containerKey(c.GetLabels()[kubetypes.KubernetesPodUIDLabel], c.GetMetadata().GetName())] = c.GetId()
	}
	return in, nil
}

// cadvisorMetrics builds the series of one scrape. A pod or container
// without a measure has no series of it; a container the runtime no longer
// lists, none at all.
func cadvisorMetrics(in cadvisorInput) []prometheus.Metric {
	var out []prometheus.Metric
	emit := func(d *prometheus.Desc, t prometheus.ValueType, at time.Time, v float64, labels ...string) {
		m := prometheus.MustNewConstMetric(d, t, v, labels...)
		if !at.IsZero() {
			m = prometheus.NewMetricWithTimestamp(at, m)
		}
		out = append(out, m)
	}
	cpu := func(s *statsapi.CPUStats, container, image, name, ns, pod, cgroupID string) {
		if s != nil && s.UsageCoreNanoSeconds != nil {
			emit(cadvisorCPUUsage, prometheus.CounterValue, s.Time.Time, float64(*s.UsageCoreNanoSeconds)/1e9, container, "total", image, name, ns, pod, cgroupID)
		}
	}
	memory := func(s *statsapi.MemoryStats, labels ...string) {
		if s == nil {
			return
		}
		for _, v := range []struct {
			d *prometheus.Desc
			b *uint64
		}{{cadvisorWorkingSet, s.WorkingSetBytes}, {cadvisorMemoryUsage, s.UsageBytes}, {cadvisorRSS, s.RSSBytes}} {
			if v.b != nil {
				emit(v.d, prometheus.GaugeValue, s.Time.Time, float64(*v.b), labels...)
			}
		}
	}
	mc := in.machine
	if mc.cores > 0 {
		emit(cadvisorMachineCores, prometheus.GaugeValue, time.Time{}, float64(mc.cores), mc.bootID, mc.machineID, mc.systemUUID)
	}
	if mc.memoryBytes > 0 {
		emit(cadvisorMachineMemory, prometheus.GaugeValue, time.Time{}, float64(mc.memoryBytes), mc.bootID, mc.machineID, mc.systemUUID)
	}
	fromCgroup := func(s cgroupStats, labels ...string) {
		for _, v := range []struct {
			d *prometheus.Desc
			t prometheus.ValueType
			f *float64
			n *uint64
		}{
			{d: cadvisorCPUUser, t: prometheus.CounterValue, f: s.cpuUserSeconds},
			{d: cadvisorCPUSystem, t: prometheus.CounterValue, f: s.cpuSystemSeconds},
			{d: cadvisorCFSPeriods, t: prometheus.CounterValue, n: s.cfsPeriods},
			{d: cadvisorCFSThrottledPeriods, t: prometheus.CounterValue, n: s.cfsThrottledPeriods},
			{d: cadvisorCFSThrottledSeconds, t: prometheus.CounterValue, f: s.cfsThrottledSeconds},
			{d: cadvisorCache, t: prometheus.GaugeValue, n: s.cache},
			{d: cadvisorSwap, t: prometheus.GaugeValue, n: s.swap},
			{d: cadvisorFailcnt, t: prometheus.CounterValue, n: s.failcnt},
			{d: cadvisorOOMEvents, t: prometheus.CounterValue, n: s.oomKills},
			{d: cadvisorProcesses, t: prometheus.GaugeValue, n: s.processes},
			{d: cadvisorThreads, t: prometheus.GaugeValue, n: s.threads},
		} {
			switch {
			case v.f != nil:
				emit(v.d, v.t, in.now, *v.f, labels...)
			case v.n != nil:
				emit(v.d, v.t, in.now, float64(*v.n), labels...)
			}
		}
	}
	if in.summary == nil {
		return out
	}
	for _, ps := range in.summary.Pods {
		ns, podName := ps.PodRef.Namespace, ps.PodRef.Name
		pod := in.pods[ps.PodRef.UID]
		podID := in.cgroupPaths[containerKey(ps.PodRef.UID, "")]
		cpu(ps.CPU, "", "", "", ns, podName, podID)
		memory(ps.Memory, "", "", "", ns, podName, podID)
		if cg, ok := in.cgroups[containerKey(ps.PodRef.UID, "")]; ok {
			fromCgroup(cg, "", "", "", ns, podName, podID)
		}
		for _, d := range in.netdev[ps.PodRef.UID] {
			for _, v := range []struct {
				d *prometheus.Desc
				n uint64
			}{{cadvisorRxPackets, d.RxPackets}, {cadvisorTxPackets, d.TxPackets}, {cadvisorRxDropped, d.RxDropped}, {cadvisorTxDropped, d.TxDropped}} {
				emit(v.d, prometheus.CounterValue, in.now, float64(v.n), "", "", d.Name, "", ns, podName, podID)
			}
		}
		if net := ps.Network; net != nil {
			for _, iface := range net.Interfaces {
				for _, v := range []struct {
					d *prometheus.Desc
					n *uint64
				}{{cadvisorRxBytes, iface.RxBytes}, {cadvisorTxBytes, iface.TxBytes}, {cadvisorRxErrors, iface.RxErrors}, {cadvisorTxErrors, iface.TxErrors}} {
					if v.n != nil {
						emit(v.d, prometheus.CounterValue, net.Time.Time, float64(*v.n), "", "", iface.Name, "", ns, podName, podID)
					}
				}
			}
		}
		for _, cs := range ps.Containers {
			id, ok := in.ids[containerKey(ps.PodRef.UID, cs.Name)]
			if !ok {
				continue
			}
			spec := containerSpec(pod, cs.Name)
			image := ""
			if spec != nil {
				image = spec.Image
			}
			cgroupID := in.cgroupPaths[containerKey(ps.PodRef.UID, cs.Name)]
			labels := []string{cs.Name, image, id, ns, podName, cgroupID}
			cpu(cs.CPU, cs.Name, image, id, ns, podName, cgroupID)
			memory(cs.Memory, labels...)
			if cg, ok := in.cgroups[containerKey(ps.PodRef.UID, cs.Name)]; ok {
				fromCgroup(cg, labels...)
			}
			if m := cs.Memory; m != nil {
				for _, f := range []struct {
					kind string
					n    *uint64
				}{{"pgfault", m.PageFaults}, {"pgmajfault", m.MajorPageFaults}} {
					if f.n != nil {
						emit(cadvisorMemoryFailures, prometheus.CounterValue, m.Time.Time, float64(*f.n), cs.Name, f.kind, image, id, ns, podName, "container", cgroupID)
					}
				}
			}
			if cs.Rootfs != nil && cs.Rootfs.UsedBytes != nil {
				emit(cadvisorFsUsage, prometheus.GaugeValue, cs.Rootfs.Time.Time, float64(*cs.Rootfs.UsedBytes), cs.Name, "", image, id, ns, podName, cgroupID)
			}
			if cs.Rootfs != nil && cs.Rootfs.CapacityBytes != nil {
				emit(cadvisorFsLimit, prometheus.GaugeValue, cs.Rootfs.Time.Time, float64(*cs.Rootfs.CapacityBytes), cs.Name, "", image, id, ns, podName, cgroupID)
			}
			if spec != nil {
				v := specValues(spec)
				emit(cadvisorMemoryLimit, prometheus.GaugeValue, time.Time{}, float64(v.memoryLimit), labels...)
				emit(cadvisorCPUShares, prometheus.GaugeValue, time.Time{}, float64(v.shares), labels...)
				emit(cadvisorCPUPeriod, prometheus.GaugeValue, time.Time{}, float64(v.period), labels...)
				if v.quota > 0 {
					emit(cadvisorCPUQuota, prometheus.GaugeValue, time.Time{}, float64(v.quota), labels...)
				}
			}
			emit(cadvisorStartTime, prometheus.GaugeValue, time.Time{}, float64(cs.StartTime.UnixNano())/1e9, labels...)
			emit(cadvisorLastSeen, prometheus.GaugeValue, time.Time{}, float64(in.now.Unix()), labels...)
		}
	}
	return out
}

// containerSpec returns the container (regular, init or ephemeral) of pod
// named name, or nil.
func containerSpec(pod *corev1.Pod, name string) *corev1.Container {
	if pod == nil {
		return nil
	}
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if c := &pod.Spec.EphemeralContainers[i]; c.Name == name {
			return (*corev1.Container)(&c.EphemeralContainerCommon)
		}
	}
	return nil
}

// cfsPeriod is the CFS period, in microseconds, the kubelet gives every
// container.
const cfsPeriod = 100000

// containerSpecValues are a container's cgroup settings as cAdvisor reports
// them from its spec.
type containerSpecValues struct {
	// memoryLimit is in bytes, 0 without a limit (cAdvisor reports an
	// unlimited container so).
	memoryLimit int64
	// shares follow the CPU request, as the kubelet sets them.
	shares uint64
	// quota is the CFS quota in microseconds per period, 0 without a CPU
	// limit (cAdvisor then serves no quota).
	quota int64
	// period is the CFS period in microseconds.
	period int64
}

// specValues returns the cgroup settings the kubelet derives from the
// container's resources.
func specValues(c *corev1.Container) containerSpecValues {
	v := containerSpecValues{period: cfsPeriod}
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		v.memoryLimit = q.Value()
	}
	req := c.Resources.Requests[corev1.ResourceCPU]
	v.shares = cgroups.MilliCPUToShares(req.MilliValue())
	if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok && !q.IsZero() {
		// The kubelet's minimum quota is 1ms.
		v.quota = max(q.MilliValue()*cfsPeriod/1000, 1000)
	}
	return v
}

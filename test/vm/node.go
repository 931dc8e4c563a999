package vm

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// NodeConfig is what differs between runs in the guest node's
// /var/lib/kubelet/config.yaml.
type NodeConfig struct {
	// Port is the node API's port (the Node's daemonEndpoints port).
	Port int
	// PodPidsLimit bounds each pod's pids.max.
	PodPidsLimit int
	// EvictionMemoryAvailable is the hard eviction threshold on
	// memory.available ("400Mi").
	EvictionMemoryAvailable string
}

// KubeletConfig is the guest's /var/lib/kubelet/config.yaml: a
// KubeletConfiguration as kubeadm writes it for a systemd host
// (cgroupDriver: systemd, certificate rotation, the client CA in
// /etc/kubernetes/pki), with c's values and a short pressure transition
// period so that the eviction spec does not wait five minutes.
func KubeletConfig(c NodeConfig) ([]byte, error) {
	cfg := map[string]any{
		"apiVersion":               "kubelet.config.k8s.io/v1beta1",
		"kind":                     "KubeletConfiguration",
		"cgroupDriver":             "systemd",
		"containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
		"rotateCertificates":       true,
		"port":                     c.Port,
		"authentication": map[string]any{
			"x509":      map[string]any{"clientCAFile": "/etc/kubernetes/pki/ca.crt"},
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": false},
		},
		"authorization":                    map[string]any{"mode": "AlwaysAllow"},
		"podPidsLimit":                     c.PodPidsLimit,
		"evictionHard":                     map[string]string{"memory.available": c.EvictionMemoryAvailable},
		"evictionPressureTransitionPeriod": "30s",
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding the node's configuration: %w", err)
	}
	return out, nil
}

// CgroupRoot is where the guest mounts the cgroup v2 hierarchy.
const CgroupRoot = "/sys/fs/cgroup"

// PodSlice is the directory of a pod's cgroup under the systemd driver,
// as the kubelet names it: kubepods.slice, then the QoS class's slice for
// Burstable and BestEffort pods, then kubepods[-<qos>]-pod<uid>.slice with
// the UID's dashes as underscores (systemd reads "-" as a parent).
func PodSlice(qos corev1.PodQOSClass, uid types.UID) string {
	escaped := strings.ReplaceAll(string(uid), "-", "_")
	switch qos {
	case corev1.PodQOSBurstable:
		return path.Join(CgroupRoot, "kubepods.slice", "kubepods-burstable.slice", "kubepods-burstable-pod"+escaped+".slice")
	case corev1.PodQOSBestEffort:
		return path.Join(CgroupRoot, "kubepods.slice", "kubepods-besteffort.slice", "kubepods-besteffort-pod"+escaped+".slice")
	default:
		return path.Join(CgroupRoot, "kubepods.slice", "kubepods-pod"+escaped+".slice")
	}
}

// ContainerScope is the scope runc's systemd driver puts a container of
// containerd's CRI in, inside its pod's slice: cri-containerd-<id>.scope.
func ContainerScope(podSlice, containerID string) string {
	return path.Join(podSlice, "cri-containerd-"+strings.TrimPrefix(containerID, "containerd://")+".scope")
}

// CPUMax is cpu.max: the quota in a period, Quota < 0 for "max".
type CPUMax struct {
	Quota, Period int64
}

// ParseCPUMax reads cpu.max ("max 100000", "20000 100000").
func ParseCPUMax(s string) (CPUMax, error) {
	fields := strings.Fields(s)
	if len(fields) != 2 {
		return CPUMax{}, fmt.Errorf("cpu.max %q: want two fields", s)
	}
	period, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		return CPUMax{}, fmt.Errorf("cpu.max %q: period: %w", s, err)
	}
	if fields[0] == "max" {
		return CPUMax{Quota: -1, Period: period}, nil
	}
	quota, err := strconv.ParseInt(fields[0], 10, 64)
	if err != nil {
		return CPUMax{}, fmt.Errorf("cpu.max %q: quota: %w", s, err)
	}
	return CPUMax{Quota: quota, Period: period}, nil
}

// MilliCPUToShares is the kubelet's mapping of a CPU request to cgroup v1
// shares (1024 per CPU, at least 2), which runc maps on to cpu.weight.
func MilliCPUToShares(milli int64) uint64 {
	shares := milli * 1024 / 1000
	if shares < 2 {
		return 2
	}
	return uint64(shares)
}

// ParseKeyValues reads lines of key=value (systemctl show) or "key value"
// (memory.events, memory.stat) into a map; other lines are skipped.
func ParseKeyValues(s string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, "="); ok {
			out[k] = v
			continue
		}
		if k, v, ok := strings.Cut(line, " "); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// MemoryAvailable is memory.available as the kubelet measures it on a
// cgroup v2 host, from /proc/meminfo and the root's memory.stat: MemTotal
// minus the root's working set (anon + file - inactive_file).
func MemoryAvailable(meminfo, memoryStat string) (int64, error) {
	total := int64(-1)
	for _, line := range strings.Split(meminfo, "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("MemTotal %q: %w", v, err)
			}
			total = kb << 10
		}
	}
	if total < 0 {
		return 0, fmt.Errorf("no MemTotal in /proc/meminfo")
	}
	stat := ParseKeyValues(memoryStat)
	var ws int64
	for key, sign := range map[string]int64{"anon": 1, "file": 1, "inactive_file": -1} {
		n, err := strconv.ParseInt(stat[key], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s of memory.stat: %w", key, err)
		}
		ws += sign * n
	}
	return total - max(ws, 0), nil
}

package stats

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
)

// cgroupRoot is where the cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupStats are the measures of one cgroup that the summary API has no
// field for. A nil field was not readable and is not served.
type cgroupStats struct {
	cpuUserSeconds, cpuSystemSeconds *float64
	cfsPeriods, cfsThrottledPeriods  *uint64
	cfsThrottledSeconds              *float64
	cache, swap, failcnt, oomKills   *uint64
	processes, threads               *uint64
}

// cgroupLocation is where a process's cgroup is: its path inside the
// hierarchy, and whether the hierarchy is cgroup v2.
type cgroupLocation struct {
	path string
	v2   bool
}

// parseProcCgroup reads /proc/<pid>/cgroup: the memory controller's path on
// cgroup v1, the unified path on a host that runs cgroup v2 alone.
func parseProcCgroup(data []byte) (cgroupLocation, error) {
	var unified string
	haveUnified := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[1] == "" && f[0] == "0" {
			unified, haveUnified = f[2], true
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			if c == "memory" {
				return cgroupLocation{path: f[2]}, nil
			}
		}
	}
	if haveUnified {
		return cgroupLocation{path: unified, v2: true}, nil
	}
	return cgroupLocation{}, fmt.Errorf("parsing /proc/pid/cgroup: no memory or unified hierarchy")
}

// parseFlatKeyed reads a "key value" file (cpu.stat, memory.stat,
// memory.events, cpuacct.stat); lines that are not a key and a number are
// skipped.
func parseFlatKeyed(data []byte) map[string]uint64 {
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
			out[f[0]] = v
		}
	}
	return out
}

// countLines counts the non-empty lines of a file such as cgroup.procs.
func countLines(data []byte) uint64 {
	var n uint64
	for _, l := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			n++
		}
	}
	return n
}

// cgroupStatsFrom computes a cgroup's measures from its files, by name
// ("cpu.stat", "cpuacct.stat", "memory.stat", ...), as cAdvisor does for
// each version: v1's cpuacct.stat in USER_HZ and throttled_time in
// nanoseconds, v2's cpu.stat in microseconds. A file not in files leaves
// its measures out.
func cgroupStatsFrom(v2 bool, files map[string][]byte) cgroupStats {
	var s cgroupStats
	u := func(v uint64) *uint64 { return &v }
	f := func(v float64) *float64 { return &v }
	if b, ok := files["cpu.stat"]; ok {
		m := parseFlatKeyed(b)
		if v, ok := m["nr_periods"]; ok {
			s.cfsPeriods = u(v)
		}
		if v, ok := m["nr_throttled"]; ok {
			s.cfsThrottledPeriods = u(v)
		}
		if v2 {
			if v, ok := m["throttled_usec"]; ok {
				s.cfsThrottledSeconds = f(float64(v) / 1e6)
			}
			if v, ok := m["user_usec"]; ok {
				s.cpuUserSeconds = f(float64(v) / 1e6)
			}
			if v, ok := m["system_usec"]; ok {
				s.cpuSystemSeconds = f(float64(v) / 1e6)
			}
		} else if v, ok := m["throttled_time"]; ok {
			s.cfsThrottledSeconds = f(float64(v) / 1e9)
		}
	}
	if b, ok := files["cpuacct.stat"]; ok && !v2 {
		m := parseFlatKeyed(b)
		if v, ok := m["user"]; ok {
			s.cpuUserSeconds = f(float64(v) / userHZ)
		}
		if v, ok := m["system"]; ok {
			s.cpuSystemSeconds = f(float64(v) / userHZ)
		}
	}
	if b, ok := files["memory.stat"]; ok {
		m := parseFlatKeyed(b)
		cache, swap := "total_cache", "total_swap"
		if v2 {
			cache, swap = "file", ""
		}
		if v, ok := m[cache]; ok {
			s.cache = u(v)
		}
		if v, ok := m[swap]; ok && swap != "" {
			s.swap = u(v)
		}
	}
	if b, ok := files["memory.swap.current"]; ok && v2 {
		if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			s.swap = u(v)
		}
	}
	if b, ok := files["memory.failcnt"]; ok && !v2 {
		if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			s.failcnt = u(v)
		}
	}
	for _, name := range []string{"memory.events", "memory.oom_control"} {
		if b, ok := files[name]; ok {
			if v, ok := parseFlatKeyed(b)["oom_kill"]; ok {
				s.oomKills = u(v)
			}
		}
	}
	if b, ok := files["cgroup.procs"]; ok {
		s.processes = u(countLines(b))
	}
	for _, name := range []string{"tasks", "cgroup.threads"} {
		if b, ok := files[name]; ok {
			s.threads = u(countLines(b))
		}
	}
	return s
}

// cgroupFiles names, for each version, the files cgroupStatsFrom reads and
// the v1 controller each lives under.
var cgroupFiles = map[bool][][2]string{
	false: {{"cpu", "cpu.stat"}, {"cpuacct", "cpuacct.stat"}, {"memory", "memory.stat"}, {"memory", "memory.failcnt"},
		{"memory", "memory.oom_control"}, {"pids", "cgroup.procs"}, {"pids", "tasks"}},
	true: {{"", "cpu.stat"}, {"", "memory.stat"}, {"", "memory.swap.current"}, {"", "memory.events"},
		{"", "cgroup.procs"}, {"", "cgroup.threads"}},
}

// readCgroup reads the files of the cgroup at dir (a path inside the
// hierarchy); a file that cannot be read (gone, or a controller the host
// lacks) is left out.
func (p *Provider) readCgroup(v2 bool, dir string) cgroupStats {
	files := map[string][]byte{}
	for _, cf := range cgroupFiles[v2] {
		if b, err := p.Host.ReadFile(path.Join(cgroupRoot, cf[0], dir, cf[1])); err == nil {
			files[cf[1]] = b
		}
	}
	return cgroupStatsFrom(v2, files)
}

// readPodCgroups reads the cgroups of every ready sandbox's pod and of its
// running containers, keyed as the summary's containers are (containerKey;
// the pod's own under its UID and ""). The pod's cgroup is the parent of
// its sandbox's; a container's is the child named by its ID (cgroupfs) or
// its containerd scope (systemd). What cannot be found is left out.
//
// It also returns the cgroup paths it found, keyed the same, and each
// pod's interface counters, by UID, read from its sandbox's network
// namespace.
func (p *Provider) readPodCgroups(ctx context.Context, containers []*runtimeapi.Container) (map[string]cgroupStats, map[string]string, map[string][]netDev) {
	out := map[string]cgroupStats{}
	paths := map[string]string{}
	nets := map[string][]netDev{}
	byPod := map[string][]*runtimeapi.Container{}
	for _, c := range containers {
		uid := c.GetLabels()[kubetypes.KubernetesPodUIDLabel]
		byPod[uid] = append(byPod[uid], c)
	}
	for uid, sandboxID := range p.readySandboxes(ctx) {
		pid, err := p.Runtime.PodSandboxPid(ctx, sandboxID)
		if err != nil || pid <= 0 {
			continue
		}
		if dev, err := p.Host.ReadFile(fmt.Sprintf("/proc/%d/net/dev", pid)); err == nil {
			if ifaces, err := parseNetDev(dev); err == nil {
				nets[uid] = ifaces
			}
		}
		b, err := p.Host.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil {
			continue
		}
		loc, err := parseProcCgroup(b)
		if err != nil {
			continue
		}
		podDir := path.Dir(loc.path)
		out[containerKey(uid, "")] = p.readCgroup(loc.v2, podDir)
		paths[containerKey(uid, "")] = podDir
		for _, c := range byPod[uid] {
			for _, base := range []string{c.GetId(), "cri-containerd-" + c.GetId() + ".scope"} {
				s := p.readCgroup(loc.v2, path.Join(podDir, base))
				if s != (cgroupStats{}) {
					out[containerKey(uid, c.GetMetadata().GetName())] = s
					paths[containerKey(uid, c.GetMetadata().GetName())] = path.Join(podDir, base)
					break
				}
			}
		}
	}
	return out, paths, nets
}

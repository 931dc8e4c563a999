package stats

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// userHZ is the unit of /proc/stat's CPU times (USER_HZ, 100 on Linux).
const userHZ = 100

// parseProcStatCPU returns the busy CPU time of the machine in nanoseconds
// from /proc/stat's "cpu" line: every state but idle and iowait (guest time
// is already counted in user and nice).
func parseProcStatCPU(data []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || f[0] != "cpu" {
			continue
		}
		var busy uint64
		// user nice system idle iowait irq softirq steal guest guest_nice
		for i, v := range f[1:] {
			if i == 3 || i == 4 || i >= 8 {
				continue
			}
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing /proc/stat cpu field %d: %w", i+1, err)
			}
			busy += n
		}
		return busy * (1e9 / userHZ), nil
	}
	return 0, fmt.Errorf("parsing /proc/stat: no cpu line")
}

// hostMemory is the memory use of the machine, in bytes, in the kubelet's
// terms: the working set is what is in use less the inactive file cache,
// which the kernel can take back without pressure.
type hostMemory struct {
	Capacity, Usage, WorkingSet, Available, RSS uint64
}

// parseHostMemory reads /proc/meminfo.
func parseHostMemory(data []byte) (hostMemory, error) {
	v := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		f := strings.Fields(rest)
		if !ok || len(f) == 0 {
			continue
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 1 && f[1] == "kB" {
			n *= 1024
		}
		v[key] = n
	}
	total, ok := v["MemTotal"]
	if !ok {
		return hostMemory{}, fmt.Errorf("parsing /proc/meminfo: no MemTotal")
	}
	m := hostMemory{Capacity: total, Usage: total - min(v["MemFree"], total)}
	m.WorkingSet = m.Usage - min(v["Inactive(file)"], m.Usage)
	m.Available = total - m.WorkingSet
	m.RSS = v["AnonPages"]
	return m, nil
}

// netDev is one interface's counters from /proc/net/dev.
type netDev struct {
	Name                               string
	RxBytes, RxErrors, TxBytes, TxErrs uint64
	RxPackets, RxDropped               uint64
	TxPackets, TxDropped               uint64
}

// parseNetDev reads /proc/<pid>/net/dev, loopback left out.
func parseNetDev(data []byte) ([]netDev, error) {
	var out []netDev
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		name = strings.TrimSpace(name)
		f := strings.Fields(rest)
		if name == "lo" || len(f) < 16 {
			continue
		}
		var n [16]uint64
		for i := range n {
			x, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("parsing /proc/net/dev line of %s: %w", name, err)
			}
			n[i] = x
		}
		// Receive: bytes packets errs drop fifo frame compressed multicast;
		// transmit: bytes packets errs ...
		out = append(out, netDev{
			Name: name, RxBytes: n[0], RxErrors: n[2], TxBytes: n[8], TxErrs: n[10],
			RxPackets: n[1], RxDropped: n[3], TxPackets: n[9], TxDropped: n[11],
		})
	}
	return out, nil
}

// parseBootTime returns btime (seconds since the epoch) from /proc/stat.
func parseBootTime(data []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "btime "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing /proc/stat btime: %w", err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("parsing /proc/stat: no btime line")
}

// parsePressure reads a pressure stall information file (a cgroup v2
// cgroup's cpu.pressure, memory.pressure or io.pressure, or
// /proc/pressure/*): a "some" and an optional "full" line of avg10, avg60,
// avg300 (percent) and total (microseconds, converted to the summary API's
// nanoseconds). A missing "full" line (cpu.pressure before Linux 5.13)
// reads as zeros.
func parsePressure(data []byte) (*statsapi.PSIStats, error) {
	var psi statsapi.PSIStats
	var some bool
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		var d *statsapi.PSIData
		switch f[0] {
		case "some":
			d, some = &psi.Some, true
		case "full":
			d = &psi.Full
		default:
			return nil, fmt.Errorf("parsing pressure: unknown line %q", f[0])
		}
		seen := 0
		for _, kv := range f[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("parsing pressure %s: field %q", f[0], kv)
			}
			var err error
			switch k {
			case "avg10":
				d.Avg10, err = strconv.ParseFloat(v, 64)
			case "avg60":
				d.Avg60, err = strconv.ParseFloat(v, 64)
			case "avg300":
				d.Avg300, err = strconv.ParseFloat(v, 64)
			case "total":
				var us uint64
				us, err = strconv.ParseUint(v, 10, 64)
				d.Total = us * 1000
			default:
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("parsing pressure %s %s: %w", f[0], k, err)
			}
			seen++
		}
		if seen != 4 {
			return nil, fmt.Errorf("parsing pressure %s: want avg10, avg60, avg300 and total", f[0])
		}
	}
	if !some {
		return nil, fmt.Errorf("parsing pressure: no some line")
	}
	return &psi, nil
}

// criPSI converts the runtime's pressure stall information (nanoseconds
// already) to the summary API's; nil when the runtime reported none
// (cgroup v1, or a runtime that does not read it).
func criPSI(p *runtimeapi.PsiStats) *statsapi.PSIStats {
	if p == nil || (p.GetSome() == nil && p.GetFull() == nil) {
		return nil
	}
	conv := func(d *runtimeapi.PsiData) statsapi.PSIData {
		return statsapi.PSIData{Total: d.GetTotal(), Avg10: d.GetAvg10(), Avg60: d.GetAvg60(), Avg300: d.GetAvg300()}
	}
	return &statsapi.PSIStats{Some: conv(p.GetSome()), Full: conv(p.GetFull())}
}

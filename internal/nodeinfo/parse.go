package nodeinfo

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Memory is what /proc/meminfo says about memory, in bytes.
type Memory struct {
	TotalBytes     int64
	AvailableBytes int64
	// HugePageSizeBytes is the default huge page size; zero when the kernel
	// has no huge page support.
	HugePageSizeBytes int64
	// HugePagesTotal is the number of huge pages of the default size.
	HugePagesTotal int64
	// SwapTotalBytes is the swap of the node's swap areas.
	SwapTotalBytes int64
}

// ParseMeminfo reads the fields of /proc/meminfo that node status needs.
// MemTotal is required; the others are zero when absent.
func ParseMeminfo(data []byte) (Memory, error) {
	var m Memory
	var haveTotal bool
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("parsing meminfo field %s: %w", key, err)
		}
		if len(fields) > 1 && fields[1] == "kB" {
			n *= 1024
		}
		switch key {
		case "MemTotal":
			m.TotalBytes, haveTotal = n, true
		case "MemAvailable":
			m.AvailableBytes = n
		case "Hugepagesize":
			m.HugePageSizeBytes = n
		case "HugePages_Total":
			m.HugePagesTotal = n
		case "SwapTotal":
			m.SwapTotalBytes = n
		}
	}
	if !haveTotal {
		return Memory{}, fmt.Errorf("meminfo has no MemTotal")
	}
	return m, nil
}

// ParseOSRelease returns PRETTY_NAME from an os-release file, unquoted, or
// "Linux" when it has none, as the kubelet reports.
func ParseOSRelease(data []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "PRETTY_NAME=")
		if !ok {
			continue
		}
		if u, err := strconv.Unquote(v); err == nil {
			return u
		}
		return strings.Trim(v, `'"`)
	}
	return "Linux"
}

// ParseTaskCount returns the number of scheduling entities (processes and
// threads) that exist, the denominator of the fourth field of /proc/loadavg.
func ParseTaskCount(loadavg []byte) (int64, error) {
	fields := strings.Fields(string(loadavg))
	if len(fields) < 4 {
		return 0, fmt.Errorf("loadavg has %d fields, want at least 4", len(fields))
	}
	_, total, ok := strings.Cut(fields[3], "/")
	if !ok {
		return 0, fmt.Errorf("loadavg field %q is not running/total", fields[3])
	}
	n, err := strconv.ParseInt(total, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parsing loadavg task count: %w", err)
	}
	return n, nil
}

// ParseInt parses a file holding one decimal integer, such as pid_max.
func ParseInt(data []byte) (int64, error) {
	return strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
}

// DefaultRouteInterface returns the interface of the IPv4 default route in
// /proc/net/route (the one with the lowest metric), or "" when there is none.
func DefaultRouteInterface(route []byte) string {
	best, bestMetric := "", int64(-1)
	sc := bufio.NewScanner(bytes.NewReader(route))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// Iface Destination Gateway Flags RefCnt Use Metric Mask ...
		if len(f) < 8 || f[1] != "00000000" || f[7] != "00000000" {
			continue
		}
		metric, err := strconv.ParseInt(f[6], 10, 64)
		if err != nil {
			continue
		}
		if bestMetric < 0 || metric < bestMetric {
			best, bestMetric = f[0], metric
		}
	}
	return best
}

// ChooseNodeIP picks the address a node reports as its InternalIP: the first
// global unicast IPv4 address of the default-route interface, else the first
// global unicast address (IPv4 preferred) of any up, non-loopback interface.
// It returns nil when there is none.
func ChooseNodeIP(defaultIface string, ifaces []Interface) net.IP {
	for _, ifc := range ifaces {
		if ifc.Name != defaultIface || defaultIface == "" {
			continue
		}
		if ip := defaultInterfaceIP(ifc); ip != nil {
			return ip
		}
	}
	var v6 net.IP
	for _, ifc := range ifaces {
		if !ifc.Up || ifc.Loopback {
			continue
		}
		for _, ip := range ifc.Addrs {
			if !usableNodeIP(ip) {
				continue
			}
			if ip.To4() != nil {
				return ip
			}
			if v6 == nil {
				v6 = ip
			}
		}
	}
	return v6
}

// defaultInterfaceIP is ChooseNodeIP's first choice on the default-route
// interface ifc: its first global unicast IPv4 address while it is up, or
// nil.
func defaultInterfaceIP(ifc Interface) net.IP {
	if !ifc.Up {
		return nil
	}
	for _, ip := range ifc.Addrs {
		if ip.To4() != nil && usableNodeIP(ip) {
			return ip
		}
	}
	return nil
}

func usableNodeIP(ip net.IP) bool { return ip.IsGlobalUnicast() && !ip.IsLoopback() }

package approver

import (
	"fmt"
	"net/netip"
	"strings"
)

// apiServerServiceName is the DNS name of the API server's Service in
// the cluster, with its shorter forms before it.
var apiServerServiceNames = []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc"}

// isClusterDNSLabel reports whether l is a label that cluster DNS puts in
// the names of Services (<service>.<namespace>.svc.<domain>) and pods
// (<ip>.<namespace>.pod.<domain>).
func isClusterDNSLabel(l string) bool { return l == "svc" || l == "pod" }

// forbiddenDNSName returns why name may never be in a node's serving
// certificate, whatever the configuration, or "": a wildcard, the API
// server's Service names, and the names cluster DNS gives Services and
// pods. name is compared as written: callers refuse names that are not
// lower-case DNS names.
func forbiddenDNSName(name string) string {
	if strings.Contains(name, "*") {
		return "a wildcard"
	}
	for _, n := range apiServerServiceNames {
		if name == n || n == "kubernetes.default.svc" && strings.HasPrefix(name, n+".") {
			return "a DNS name of the API server's Service"
		}
	}
	labels := strings.Split(name, ".")
	for i := 2; i < len(labels); i++ {
		if isClusterDNSLabel(labels[i]) {
			return "a cluster DNS name of a Service or pod"
		}
	}
	return ""
}

// forbiddenIP returns why ip may never be in a node's serving
// certificate, or "": an address no node serves on for others (loopback,
// unspecified, multicast, link-local, which holds cloud metadata
// services), a Service IP (in serviceCIDRs, or one of serviceIPs, the
// API server's Service's ClusterIPs).
func forbiddenIP(ip netip.Addr, serviceCIDRs []netip.Prefix, serviceIPs []netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case !ip.IsValid():
		return "not an IP"
	case ip.IsUnspecified(), ip.IsLoopback(), ip.IsMulticast(), ip.IsLinkLocalUnicast(), ip.IsInterfaceLocalMulticast():
		return "a loopback, unspecified, multicast or link-local address"
	}
	for _, s := range serviceIPs {
		if s.Unmap() == ip {
			return "the ClusterIP of the API server's Service"
		}
	}
	for _, p := range serviceCIDRs {
		if p.Contains(ip) {
			return fmt.Sprintf("in the service CIDR %s", p)
		}
	}
	return ""
}

// matchesDNSNamePattern reports whether name matches pattern: an exact
// name, or "*." and a domain, where "*" is exactly one label.
func matchesDNSNamePattern(pattern, name string) bool {
	domain, wildcard := strings.CutPrefix(pattern, "*.")
	if !wildcard {
		return name == pattern
	}
	first, rest, ok := strings.Cut(name, ".")
	return ok && first != "" && rest == domain
}

// addressKey is the form in which node addresses and certificate names
// are compared: an IP in its canonical form (IPv4-mapped IPv6 as IPv4),
// anything else in lower case without a trailing dot.
func addressKey(address string) string {
	if ip, err := netip.ParseAddr(address); err == nil {
		return ip.Unmap().WithZone("").String()
	}
	return strings.TrimSuffix(strings.ToLower(address), ".")
}

package criconfig

import (
	"bufio"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Limits on a pod's resolver configuration (those of the API validation and
// of common resolvers).
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
	maxDNSSearchLength    = 253
)

// ResolvConf is the resolver configuration of a resolv.conf file.
type ResolvConf struct {
	Servers  []string
	Searches []string
	Options  []string
}

// ParseResolvConf parses the contents of a resolv.conf file the way the
// kubelet reads the node's: nameservers accumulate, the last search line
// wins (trailing dots trimmed, "." dropped), options accumulate with later
// ones replacing earlier ones of the same name.
func ParseResolvConf(contents string) (ResolvConf, error) {
	conf := ResolvConf{}
	sc := bufio.NewScanner(strings.NewReader(contents))
	for line := 1; sc.Scan(); line++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") || strings.HasPrefix(fields[0], ";") {
			continue
		}
		switch fields[0] {
		case "nameserver":
			if len(fields) < 2 {
				return ResolvConf{}, fmt.Errorf("parsing resolv.conf line %d: nameserver without an address", line)
			}
			conf.Servers = append(conf.Servers, fields[1])
		case "search":
			conf.Searches = nil
			for _, s := range fields[1:] {
				if s != "." {
					conf.Searches = append(conf.Searches, strings.TrimSuffix(s, "."))
				}
			}
		case "options":
			conf.Options = mergeOptions(conf.Options, fields[1:])
		}
	}
	if err := sc.Err(); err != nil {
		return ResolvConf{}, fmt.Errorf("reading resolv.conf: %w", err)
	}
	return conf, nil
}

// optionName is the part of a resolver option before its value.
func optionName(opt string) string {
	name, _, _ := strings.Cut(opt, ":")
	return name
}

// mergeOptions adds options to a list, an option replacing an earlier one
// of the same name in place.
func mergeOptions(options, more []string) []string {
	out := slices.Clone(options)
	for _, opt := range more {
		i := slices.IndexFunc(out, func(o string) bool { return optionName(o) == optionName(opt) })
		if i >= 0 {
			out[i] = opt
		} else {
			out = append(out, opt)
		}
	}
	return out
}

// PodDNSConfig returns the resolver configuration of a pod's sandbox from
// its dnsPolicy and dnsConfig, the cluster DNS servers and domain, and the
// node's resolver configuration (nil: the node has none, so use a local
// resolver). A ClusterFirst pod on a node without cluster DNS falls back to
// Default, like the kubelet.
func PodDNSConfig(pod *v1.Pod, opts SandboxOptions) *runtimeapi.DNSConfig {
	cfg := &runtimeapi.DNSConfig{}
	switch dnsPolicy(pod) {
	case v1.DNSNone:
	case v1.DNSClusterFirst:
		if len(opts.ClusterDNS) > 0 {
			cfg.Servers = slices.Clone(opts.ClusterDNS)
			cfg.Searches = clusterSearches(pod, opts)
			cfg.Options = []string{"ndots:5"}
			break
		}
		cfg = hostDNSConfig(opts.HostDNS)
	default:
		cfg = hostDNSConfig(opts.HostDNS)
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		cfg.Servers = uniq(append(cfg.Servers, dc.Nameservers...))
		cfg.Searches = uniq(append(cfg.Searches, dc.Searches...))
		cfg.Options = mergeOptions(cfg.Options, podDNSOptions(dc.Options))
	}
	cfg.Servers = cfg.Servers[:min(len(cfg.Servers), maxDNSNameservers)]
	cfg.Searches = fitSearches(cfg.Searches)
	return cfg
}

// dnsPolicy returns the effective policy: ClusterFirst (also for
// ClusterFirstWithHostNet and unknown values), Default (also for
// ClusterFirst on the host network) or None.
func dnsPolicy(pod *v1.Pod) v1.DNSPolicy {
	switch pod.Spec.DNSPolicy {
	case v1.DNSNone:
		return v1.DNSNone
	case v1.DNSDefault:
		return v1.DNSDefault
	case v1.DNSClusterFirstWithHostNet:
		return v1.DNSClusterFirst
	default:
		if pod.Spec.HostNetwork {
			return v1.DNSDefault
		}
		return v1.DNSClusterFirst
	}
}

func clusterSearches(pod *v1.Pod, opts SandboxOptions) []string {
	var host []string
	if opts.HostDNS != nil {
		host = opts.HostDNS.Searches
	}
	if opts.ClusterDomain == "" {
		return slices.Clone(host)
	}
	d := opts.ClusterDomain
	return uniq(append([]string{pod.Namespace + ".svc." + d, "svc." + d, d}, host...))
}

func hostDNSConfig(host *ResolvConf) *runtimeapi.DNSConfig {
	if host == nil {
		return &runtimeapi.DNSConfig{Servers: []string{"127.0.0.1"}, Searches: []string{"."}}
	}
	return &runtimeapi.DNSConfig{
		Servers:  slices.Clone(host.Servers),
		Searches: slices.Clone(host.Searches),
		Options:  slices.Clone(host.Options),
	}
}

func podDNSOptions(opts []v1.PodDNSConfigOption) []string {
	out := make([]string, 0, len(opts))
	for _, o := range opts {
		if o.Value != nil && *o.Value != "" {
			out = append(out, o.Name+":"+*o.Value)
		} else {
			out = append(out, o.Name)
		}
	}
	return out
}

// fitSearches drops search domains beyond the resolver's limits: too many,
// too long, or a search line too long (dropping from the end).
func fitSearches(searches []string) []string {
	searches = searches[:min(len(searches), maxDNSSearchPaths)]
	out := make([]string, 0, len(searches))
	for _, s := range searches {
		if len(s) <= maxDNSSearchLength {
			out = append(out, s)
		}
	}
	for len(out) > 0 && len(strings.Join(out, " ")) > maxDNSSearchListChars {
		out = out[:len(out)-1]
	}
	return out
}

func uniq(in []string) []string {
	seen := map[string]bool{}
	out := in[:0:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

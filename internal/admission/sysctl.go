package admission

import (
	"fmt"
	"regexp"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
)

// ReasonSysctlForbidden is the reason of a pod rejected for a sysctl that is
// neither safe nor allowed by the node's configuration.
const ReasonSysctlForbidden = "SysctlForbidden"

// safeSysctl is a sysctl that is namespaced and isolated: setting it in one
// pod has no effect on any other pod of the node. minKernel is the first
// kernel release that namespaces it; empty means every supported kernel.
type safeSysctl struct {
	name      string
	minKernel string
}

// safeSysctls is the kubelet's safe set.
var safeSysctls = []safeSysctl{
	{name: "kernel.shm_rmid_forced"},
	{name: "net.ipv4.ip_local_port_range"},
	{name: "net.ipv4.tcp_syncookies"},
	{name: "net.ipv4.ping_group_range"},
	{name: "net.ipv4.ip_unprivileged_port_start"},
	{name: "net.ipv4.ip_local_reserved_ports", minKernel: "3.16"},
	{name: "net.ipv4.tcp_keepalive_time", minKernel: "4.5"},
	{name: "net.ipv4.tcp_fin_timeout", minKernel: "4.6"},
	{name: "net.ipv4.tcp_keepalive_intvl", minKernel: "4.5"},
	{name: "net.ipv4.tcp_keepalive_probes", minKernel: "4.5"},
	{name: "net.ipv4.tcp_rmem"},
	{name: "net.ipv4.tcp_wmem"},
}

// SafeSysctls returns the safe sysctls for a kernel; a nil kernel (unknown
// release) gets only those that need no particular release.
func SafeSysctls(kernel *version.Version) []string {
	var out []string
	for _, s := range safeSysctls {
		if s.minKernel == "" || (kernel != nil && kernel.AtLeast(version.MustParseGeneric(s.minKernel))) {
			out = append(out, s.name)
		}
	}
	return out
}

// sysctlPattern is the API's syntax for a sysctl name, optionally ending in
// "*", with "." or "/" separators.
var sysctlPattern = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*(\*|[a-z0-9]([-_a-z0-9]*[a-z0-9])?\*?)$`)

// sysctlMaxLength is the longest sysctl name the API accepts.
const sysctlMaxLength = 253

// ValidateSysctlPattern checks a pattern of allowedUnsafeSysctls: a sysctl
// name, or a prefix ending in "*", of a sysctl the kernel namespaces (so a
// pod's setting stays in the pod).
func ValidateSysctlPattern(p string) error {
	if len(p) > sysctlMaxLength || !sysctlPattern.MatchString(p) {
		return fmt.Errorf("sysctl %q must have at most %d characters and match regex %s", p, sysctlMaxLength, sysctlPattern)
	}
	if ns, _, _ := utilsysctl.GetNamespace(p); ns == utilsysctl.UnknownNamespace {
		return fmt.Errorf("the sysctl %q is not known to be namespaced", p)
	}
	return nil
}

// SysctlAllowlist holds the sysctls pods may set on this node: the safe set
// for the running kernel plus the configured unsafe ones.
type SysctlAllowlist struct {
	names    map[string]utilsysctl.Namespace
	prefixes map[string]utilsysctl.Namespace
}

// NewSysctlAllowlist returns the allowlist of the safe sysctls for kernel
// and the allowedUnsafeSysctls patterns.
func NewSysctlAllowlist(kernel *version.Version, allowedUnsafe []string) (*SysctlAllowlist, error) {
	w := &SysctlAllowlist{names: map[string]utilsysctl.Namespace{}, prefixes: map[string]utilsysctl.Namespace{}}
	for _, p := range append(SafeSysctls(kernel), allowedUnsafe...) {
		if err := ValidateSysctlPattern(p); err != nil {
			return nil, err
		}
		ns, name, prefixed := utilsysctl.GetNamespace(p)
		if prefixed && strings.HasSuffix(p, "*") {
			w.prefixes[name] = ns
		} else {
			w.names[name] = ns
		}
	}
	return w, nil
}

// check returns why sysctl may not be set by a pod with the given host
// namespaces, or nil.
func (w *SysctlAllowlist) check(sysctl string, hostNet, hostIPC bool) error {
	name := utilsysctl.NormalizeName(sysctl)
	ns, found := w.names[name]
	if !found {
		for p, pns := range w.prefixes {
			if strings.HasPrefix(name, p) {
				ns, found = pns, true
				break
			}
		}
	}
	if !found {
		return fmt.Errorf("%q not allowlisted", name)
	}
	if (ns == utilsysctl.IPCNamespace && hostIPC) || (ns == utilsysctl.NetNamespace && hostNet) {
		return fmt.Errorf("%q not allowed with host %s enabled", name, strings.ToLower(string(ns)))
	}
	return nil
}

// admitSysctls rejects a pod that sets a sysctl outside the allowlist, or a
// namespaced one while sharing that namespace with the host.
func (w *SysctlAllowlist) admit(pod *v1.Pod) Result {
	if pod.Spec.SecurityContext == nil {
		return Result{Admit: true}
	}
	for _, s := range pod.Spec.SecurityContext.Sysctls {
		if err := w.check(s.Name, pod.Spec.HostNetwork, pod.Spec.HostIPC); err != nil {
			return reject(ReasonSysctlForbidden, "forbidden sysctl: %v", err)
		}
	}
	return Result{Admit: true}
}

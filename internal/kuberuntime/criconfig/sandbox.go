package criconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"

	"github.com/nodelet/nodelet/internal/podspec"
)

// SandboxOptions is what SandboxConfig needs besides the pod.
type SandboxOptions struct {
	// Attempt of the sandbox (plan.PodActions.Attempt).
	Attempt uint32
	// PodLogsDir is the root of the pods' log directories (/var/log/pods).
	PodLogsDir string
	// ClusterDNS are the cluster DNS server IPs; ClusterDomain the cluster's
	// DNS domain (cluster.local).
	ClusterDNS    []string
	ClusterDomain string
	// HostDNS is the node's resolver configuration (ParseResolvConf of the
	// node's resolv.conf); nil when the node has none.
	HostDNS *ResolvConf
	// CgroupParent of the pod's cgroup.
	CgroupParent string
	// ExtraLabels are added to the sandbox's labels (the ownership label).
	ExtraLabels map[string]string
	// SeccompProfileRoot is the directory Localhost seccomp profiles of
	// the node's containers are resolved under (<rootDir>/seccomp).
	SeccompProfileRoot string
	// SeccompDefault gives containers without a seccomp profile the
	// runtime's default one instead of none (the kubelet's seccompDefault).
	SeccompDefault bool
	// UserNamespace of the pod (UserNamespaceOptions), set per call; nil
	// sends none.
	UserNamespace *runtimeapi.UserNamespace
	// CPUQuota makes the pod's CPU limits a CFS quota.
	CPUQuota CPUQuota
}

// maxLogDirNameLen is the longest file name Linux file systems take
// (NAME_MAX).
const maxLogDirNameLen = 255

// logDirNameHashLen is how many hex digits of the name's hash a shortened
// log directory name carries.
const logDirNameHashLen = 10

// PodLogDirectory returns the log directory of a pod under the pods' log
// root: <root>/<namespace>_<name>_<uid>, the kubelet's layout.
//
// A pod name may be 253 characters long, which makes that directory name
// longer than the 255 bytes a file name may have. Such a name is shortened,
// which the kubelet does not do (its sandbox then fails for ever with "file
// name too long"): the namespace and the UID are kept whole, and the pod name
// is cut to what fits and followed by "-" and the first ten hex digits of
// the SHA-256 of the whole name, so that the result is exactly 255 bytes,
// the same for the same pod every time, and still unique. Names that fit are
// never changed, so existing directories keep their place.
func PodLogDirectory(root string, pod *v1.Pod) string {
	return filepath.Join(root, podLogDirName(pod.Namespace, pod.Name, string(pod.UID)))
}

func podLogDirName(namespace, name, uid string) string {
	dir := namespace + "_" + name + "_" + uid
	if len(dir) <= maxLogDirNameLen {
		return dir
	}
	sum := sha256.Sum256([]byte(name))
	suffix := "-" + hex.EncodeToString(sum[:])[:logDirNameHashLen]
	keep := maxLogDirNameLen - len(namespace) - len(uid) - 2 - len(suffix)
	// Namespaces (63) and UIDs (36) are short enough that part of the name
	// always stays; guard anyway against values the API would not accept.
	keep = max(keep, 0)
	return namespace + "_" + name[:min(keep, len(name))] + suffix + "_" + uid
}

// ContainerLogPath returns a container's log file relative to its pod's log
// directory: <container>/<restartCount>.log.
func ContainerLogPath(container string, restartCount uint32) string {
	return filepath.Join(container, fmt.Sprintf("%d.log", restartCount))
}

// SandboxConfig builds the CRI configuration of a pod's sandbox.
func SandboxConfig(pod *v1.Pod, opts SandboxOptions) (*runtimeapi.PodSandboxConfig, error) {
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name:      pod.Name,
			Namespace: pod.Namespace,
			Uid:       string(pod.UID),
			Attempt:   opts.Attempt,
		},
		LogDirectory: PodLogDirectory(opts.PodLogsDir, pod),
		DnsConfig:    PodDNSConfig(pod, opts),
		PortMappings: podPortMappings(pod),
		Labels:       sandboxLabels(pod, opts.ExtraLabels),
		Annotations:  maps.Clone(pod.Annotations),
	}
	if !pod.Spec.HostNetwork {
		hostname, err := podspec.PodHostname(pod, opts.ClusterDomain)
		if err != nil {
			return nil, fmt.Errorf("building sandbox config of pod %s: %w", podspec.PodDesc(pod), err)
		}
		cfg.Hostname = hostname
	}
	linux, err := sandboxLinuxConfig(pod, opts.CgroupParent, opts.UserNamespace, opts.CPUQuota)
	if err != nil {
		return nil, fmt.Errorf("building sandbox config of pod %s: %w", podspec.PodDesc(pod), err)
	}
	cfg.Linux = linux
	return cfg, nil
}

func sandboxLabels(pod *v1.Pod, extra map[string]string) map[string]string {
	labels := maps.Clone(pod.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[kubetypes.KubernetesPodNameLabel] = pod.Name
	labels[kubetypes.KubernetesPodNamespaceLabel] = pod.Namespace
	labels[kubetypes.KubernetesPodUIDLabel] = string(pod.UID)
	maps.Copy(labels, extra)
	return labels
}

// podPortMappings lists the ports of the pod's regular containers; the
// runtime maps those with a host port.
func podPortMappings(pod *v1.Pod) []*runtimeapi.PortMapping {
	var out []*runtimeapi.PortMapping
	for i := range pod.Spec.Containers {
		out = append(out, portMappings(&pod.Spec.Containers[i])...)
	}
	return out
}

func portMappings(c *v1.Container) []*runtimeapi.PortMapping {
	var out []*runtimeapi.PortMapping
	for _, p := range c.Ports {
		out = append(out, &runtimeapi.PortMapping{
			Protocol:      runtimeProtocol(p.Protocol),
			ContainerPort: p.ContainerPort,
			HostPort:      p.HostPort,
			HostIp:        p.HostIP,
		})
	}
	return out
}

func runtimeProtocol(p v1.Protocol) runtimeapi.Protocol {
	switch p {
	case v1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case v1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	default:
		return runtimeapi.Protocol_TCP
	}
}

func sandboxLinuxConfig(pod *v1.Pod, cgroupParent string, userns *runtimeapi.UserNamespace, q CPUQuota) (*runtimeapi.LinuxPodSandboxConfig, error) {
	sc := &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: namespaceOptions(pod, userns),
		Privileged:       hasPrivilegedContainer(pod),
		Seccomp:          &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
	}
	lc := &runtimeapi.LinuxPodSandboxConfig{
		CgroupParent:    cgroupParent,
		SecurityContext: sc,
		Overhead:        SandboxOverhead(pod, q),
		Resources:       SandboxResources(pod, q),
	}
	psc := pod.Spec.SecurityContext
	if psc == nil {
		return lc, nil
	}
	if psc.RunAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
	}
	if psc.RunAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
	}
	sc.SupplementalGroups = supplementalGroups(psc)
	policy, err := supplementalGroupsPolicy(psc)
	if err != nil {
		return nil, err
	}
	sc.SupplementalGroupsPolicy = policy
	sc.SelinuxOptions = seLinuxOptions(psc.SELinuxOptions)
	if len(psc.Sysctls) > 0 {
		lc.Sysctls = map[string]string{}
		for _, s := range psc.Sysctls {
			lc.Sysctls[s.Name] = s.Value
		}
	}
	return lc, nil
}

// namespaceOptions returns the namespaces of the pod's sandbox and
// containers; userns is the pod's user namespace (UserNamespaceOptions).
func namespaceOptions(pod *v1.Pod, userns *runtimeapi.UserNamespace) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{
		Network:       runtimeapi.NamespaceMode_POD,
		Pid:           runtimeapi.NamespaceMode_CONTAINER,
		Ipc:           runtimeapi.NamespaceMode_POD,
		UsernsOptions: userns,
	}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		ns.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	return ns
}

func hasPrivilegedContainer(pod *v1.Pod) bool {
	privileged := func(sc *v1.SecurityContext) bool {
		return sc != nil && sc.Privileged != nil && *sc.Privileged
	}
	for _, c := range pod.Spec.InitContainers {
		if privileged(c.SecurityContext) {
			return true
		}
	}
	for _, c := range pod.Spec.Containers {
		if privileged(c.SecurityContext) {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if privileged(c.SecurityContext) {
			return true
		}
	}
	return false
}

// supplementalGroups lists fsGroup, then the supplemental groups.
func supplementalGroups(psc *v1.PodSecurityContext) []int64 {
	var groups []int64
	if psc.FSGroup != nil {
		groups = append(groups, *psc.FSGroup)
	}
	return append(groups, psc.SupplementalGroups...)
}

func supplementalGroupsPolicy(psc *v1.PodSecurityContext) (runtimeapi.SupplementalGroupsPolicy, error) {
	if psc.SupplementalGroupsPolicy == nil {
		return runtimeapi.SupplementalGroupsPolicy_Merge, nil
	}
	v, ok := runtimeapi.SupplementalGroupsPolicy_value[string(*psc.SupplementalGroupsPolicy)]
	if !ok {
		return 0, fmt.Errorf("unsupported supplementalGroupsPolicy %q", *psc.SupplementalGroupsPolicy)
	}
	return runtimeapi.SupplementalGroupsPolicy(v), nil
}

func seLinuxOptions(o *v1.SELinuxOptions) *runtimeapi.SELinuxOption {
	if o == nil {
		return nil
	}
	return &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
}

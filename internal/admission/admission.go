package admission

import (
	"fmt"
	"runtime"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// Reasons a pod is rejected with, as the kubelet reports them.
const (
	ReasonOutOfPods             = "OutOfpods"
	ReasonOutOfCPU              = "OutOfcpu"
	ReasonOutOfMemory           = "OutOfmemory"
	ReasonOutOfEphemeralStorage = "OutOfephemeral-storage"
	ReasonNodeAffinity          = "NodeAffinity"
	ReasonTaintToleration       = "TaintToleration"
	ReasonNodePorts             = "NodePorts"
	ReasonPodOSNotSupported     = "PodOSNotSupported"
	ReasonOSSelectorMismatch    = "PodOSSelectorNodeLabelDoesNotMatch"
	ReasonInitContainerPolicy   = "InitContainerRestartPolicyForbidden"
)

// goos is the node's operating system.
const goos = runtime.GOOS

// Result is the admission decision for one pod.
type Result struct {
	Admit   bool
	Reason  string
	Message string
}

func reject(reason, format string, args ...any) Result {
	return Result{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Policy is what the node allows pods beyond fitting on it.
type Policy struct {
	// Sysctls are the sysctls pods may set; nil allows only the safe ones
	// every kernel namespaces.
	Sysctls *SysctlAllowlist
	// AppArmor is the node's AppArmor: whether it is enabled, read when
	// the policy is built, and the loaded profiles, set by the caller for
	// a decision that needs them (NeedsLoadedProfiles). The zero value is
	// a node with AppArmor and no profile loaded.
	AppArmor AppArmor
	// Runtime is what the container runtime reports it supports, set by
	// the caller for each decision; the zero value supports nothing.
	Runtime RuntimeFeatures
	// Requests is what the admitted pods request, kept by the caller as
	// it admits and forgets them; nil sums each pod's containers at every
	// decision.
	Requests *Requests
}

// Requests remembers what admitted pods request (PodRequests), by UID, so
// that a decision does not sum every admitted pod's containers again: in a
// burst that was a cost growing with the square of the pods. Not safe for
// concurrent use; the zero value is ready.
type Requests struct {
	byUID map[types.UID]v1.ResourceList
}

// Set remembers what pod requests. The pod must not change afterwards:
// set a changed pod again.
func (r *Requests) Set(pod *v1.Pod) {
	if r.byUID == nil {
		r.byUID = map[types.UID]v1.ResourceList{}
	}
	r.byUID[pod.UID] = PodRequests(pod)
}

// Forget forgets the pod with uid.
func (r *Requests) Forget(uid types.UID) { delete(r.byUID, uid) }

// of returns what pod requests, as remembered when r has it.
func (r *Requests) of(pod *v1.Pod) v1.ResourceList {
	if r != nil {
		if l, ok := r.byUID[pod.UID]; ok {
			return l
		}
	}
	return PodRequests(pod)
}

// Admit decides whether pod may run on node next to the pods already
// admitted there, in the kubelet's order: the pod's sysctls, its OS,
// whether the runtime supports its supplementalGroupsPolicy, whether it
// fits (see Fits), then whether the node can enforce its AppArmor profiles.
// Only the first failure is reported.
func (p Policy) Admit(pod *v1.Pod, node *v1.Node, admitted []*v1.Pod) Result {
	sysctls := p.Sysctls
	if sysctls == nil {
		sysctls, _ = NewSysctlAllowlist(nil, nil)
	}
	if r := sysctls.admit(pod); !r.Admit {
		return r
	}
	if r := admitOS(pod); !r.Admit {
		return r
	}
	if r := admitSupplementalGroupsPolicy(p.Runtime, pod); !r.Admit {
		return r
	}
	if r := fits(pod, node, admitted, p.Requests); !r.Admit {
		return r
	}
	return admitAppArmor(p.AppArmor, pod)
}

// Fits decides whether pod may run on node next to the pods already
// admitted there (terminal pods among them are ignored): OS, init container
// policy, resources, node affinity, taints and host ports. Only the first
// failure is reported, as the kubelet does.
func Fits(pod *v1.Pod, node *v1.Node, admitted []*v1.Pod) Result {
	return fits(pod, node, admitted, nil)
}

// fits is Fits with the admitted pods' requests as known remembers them.
func fits(pod *v1.Pod, node *v1.Node, admitted []*v1.Pod, known *Requests) Result {
	if r := admitOS(pod); !r.Admit {
		return r
	}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
			return reject(ReasonInitContainerPolicy, "Init container %q may not have a non-default restartPolicy", c.Name)
		}
	}
	running := active(admitted, pod)
	if r := fitsResources(pod, node, running, known); !r.Admit {
		return r
	}
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !ok {
		return reject(ReasonNodeAffinity, "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector")
	}
	if taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations,
		enforcedTaint, false); untolerated {
		return reject(ReasonTaintToleration, "Predicate TaintToleration failed: node(s) had untolerated taint {%s: %s}", taint.Key, taint.Value)
	}
	if port, conflict := hostPortConflict(pod, running); conflict {
		return reject(ReasonNodePorts, "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports (%s)", port)
	}
	return Result{Admit: true}
}

// UninitializedTaintKey is the key of the NoSchedule taint a node registers
// with under --cloud-provider=external, lifted by the cloud controller
// manager once it has initialised the Node.
const UninitializedTaintKey = "node.cloudprovider.kubernetes.io/uninitialized"

// enforcedTaint selects the taints a bound pod must tolerate: every
// NoExecute taint, and NoSchedule taints but those the control plane puts on
// nodes from their conditions (node.kubernetes.io/not-ready and friends, added
// to every new Node by the API server and lifted by the node lifecycle
// controller) and the cloud provider's uninitialized taint (lifted by the
// cloud controller manager), which only steer the scheduler: the kubelet
// admits a pod bound to its node before those are lifted.
func enforcedTaint(t *v1.Taint) bool {
	switch t.Effect {
	case v1.TaintEffectNoExecute:
		return true
	case v1.TaintEffectNoSchedule:
		return !strings.HasPrefix(t.Key, "node.kubernetes.io/") && t.Key != UninitializedTaintKey
	}
	return false
}

// active returns the admitted pods that still hold resources: not terminal
// and not pod itself.
func active(pods []*v1.Pod, self *v1.Pod) []*v1.Pod {
	out := make([]*v1.Pod, 0, len(pods))
	for _, p := range pods {
		if p.UID == self.UID || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		out = append(out, p)
	}
	return out
}

func fitsResources(pod *v1.Pod, node *v1.Node, running []*v1.Pod, known *Requests) Result {
	alloc := node.Status.Allocatable
	if podCap, ok := alloc[v1.ResourcePods]; ok && int64(len(running)) >= podCap.Value() {
		return reject(ReasonOutOfPods, "Node didn't have enough resource: pods, requested: 1, used: %d, capacity: %d",
			len(running), podCap.Value())
	}
	return fitsRequests(pod, node, running, known)
}

// fitsRequests decides whether the pod's requests (cpu, memory,
// ephemeral-storage, then huge pages and extended resources) fit in what the
// running pods leave of the node's allocatable.
func fitsRequests(pod *v1.Pod, node *v1.Node, running []*v1.Pod, known *Requests) Result {
	if s := shortage(pod, node, running, known); s != nil {
		return reject(s.reason, "Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
			s.name, s.requested, s.used, s.capacity)
	}
	return Result{Admit: true}
}

// insufficient is a resource the node does not have enough of, in
// milli-CPU or bytes.
type insufficient struct {
	name                      v1.ResourceName
	reason                    string
	requested, used, capacity int64
}

// PodRequests is what pod asks of the node, as admission counts it and as
// the kubelet and the scheduler do: the larger of its init containers' and
// its containers' requests (restartable init containers count with the
// containers), plus the pod's overhead.
func PodRequests(pod *v1.Pod) v1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

// shortage returns the first of cpu, memory, ephemeral-storage and the
// scalar resources (scalarRequests, by name) whose request by the pod does
// not fit in what the running pods leave of the
// node's allocatable, or nil. What the running pods request is known's
// when it has it; the pod's own is read from its spec.
func shortage(pod *v1.Pod, node *v1.Node, running []*v1.Pod, known *Requests) *insufficient {
	alloc := node.Status.Allocatable
	want := PodRequests(pod)
	var used v1.ResourceList // what the running pods request, summed once needed
	for _, check := range []struct {
		name   v1.ResourceName
		reason string
		milli  bool
	}{
		{v1.ResourceCPU, ReasonOutOfCPU, true},
		{v1.ResourceMemory, ReasonOutOfMemory, false},
		{v1.ResourceEphemeralStorage, ReasonOutOfEphemeralStorage, false},
	} {
		req, ok := want[check.name]
		capQ, hasCap := alloc[check.name]
		if !ok || req.IsZero() || !hasCap {
			continue
		}
		if used == nil {
			used = requestsOf(running, known)
		}
		u := used[check.name]
		value := func(q *resource.Quantity) int64 {
			if check.milli {
				return q.MilliValue()
			}
			return q.Value()
		}
		if value(&req) > value(&capQ)-value(&u) {
			return &insufficient{name: check.name, reason: check.reason, requested: value(&req), used: value(&u), capacity: value(&capQ)}
		}
	}
	for _, name := range scalarRequests(pod, want, alloc) {
		if used == nil {
			used = requestsOf(running, known)
		}
		req, capQ, u := want[name], alloc[name], used[name]
		if req.Value() > capQ.Value()-u.Value() {
			return &insufficient{name: name, reason: ReasonOutOfPrefix + string(name),
				requested: req.Value(), used: u.Value(), capacity: capQ.Value()}
		}
	}
	return nil
}

// ReasonOutOfPrefix prefixes the resource's name in the reason of a pod
// that asks for more of a resource than the node has left, as the
// kubelet's OutOfnvidia.com/gpu or OutOfhugepages-2Mi.
const ReasonOutOfPrefix = "OutOf"

// scalarRequests returns, sorted, the resources beyond cpu, memory and
// ephemeral-storage that the pod requests (want) and admission must fit in
// the node's allocatable (alloc), as the kubelet fits them: huge pages and
// other scalar resources whether the node has them or not (an absent one
// has nothing to give), extended resources only when the node advertises
// them (one it does not is taken for a cluster-level resource the node
// does not count), and never a resource the pod gets from a DRA claim
// (status.extendedResourceClaimStatus): an extended resource, or a
// device class's implicit deviceclass.resource.kubernetes.io/<class>, which
// no node advertises.
func scalarRequests(pod *v1.Pod, want, alloc v1.ResourceList) []v1.ResourceName {
	var out []v1.ResourceName
	for name, q := range want {
		if q.IsZero() || !isScalarResource(name) {
			continue
		}
		if (isExtendedResource(name) || strings.HasPrefix(string(name), resourceapi.ResourceDeviceClassPrefix)) && claimBacked(pod, name) {
			continue
		}
		if isExtendedResource(name) {
			if _, advertised := alloc[name]; !advertised {
				continue
			}
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// isScalarResource says whether name is counted as a plain quantity by
// admission beyond cpu, memory, ephemeral-storage and pods: extended
// resources, huge pages, the kubernetes.io/-prefixed native ones and the
// legacy attachable-volumes-* counts.
func isScalarResource(name v1.ResourceName) bool {
	s := string(name)
	return isExtendedResource(name) || strings.HasPrefix(s, v1.ResourceHugePagesPrefix) ||
		strings.Contains(s, "kubernetes.io/") || strings.HasPrefix(s, attachableVolumesPrefix)
}

// attachableVolumesPrefix prefixes the legacy per-driver attach limits.
const attachableVolumesPrefix = "attachable-volumes-"

// isExtendedResource says whether name is an extended resource (a device
// plugin's nvidia.com/gpu, an operator's example.com/dongle): a qualified
// name outside the kubernetes.io domains, and not a quota's requests.*
// name.
func isExtendedResource(name v1.ResourceName) bool {
	s := string(name)
	if !strings.Contains(s, "/") || strings.Contains(s, "kubernetes.io/") || strings.HasPrefix(s, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+s)) == 0
}

// claimBacked says whether the pod gets the extended resource name from a
// DRA claim the scheduler made for it, which the node's own count of name
// does not cover.
func claimBacked(pod *v1.Pod, name v1.ResourceName) bool {
	st := pod.Status.ExtendedResourceClaimStatus
	if st == nil {
		return false
	}
	for _, m := range st.RequestMappings {
		if v1.ResourceName(m.ResourceName) == name {
			return true
		}
	}
	return false
}

// requestsOf sums what pods request. shortage sums them only for a pod
// that requests something the node bounds: a burst of pods without
// requests is admitted without summing all the others' for each.
func requestsOf(pods []*v1.Pod, known *Requests) v1.ResourceList {
	used := v1.ResourceList{}
	for _, p := range pods {
		for name, q := range known.of(p) {
			sum := used[name]
			sum.Add(q)
			used[name] = sum
		}
	}
	return used
}

// wildcardHostIP is the host IP of a port bound on every address; an empty
// hostIP means it.
const wildcardHostIP = "0.0.0.0"

// hostPort is one host port a pod binds.
type boundPort struct {
	protocol v1.Protocol
	ip       string
	port     int32
}

func (h boundPort) String() string { return fmt.Sprintf("%s/%s:%d", h.protocol, h.ip, h.port) }

// conflicts reports whether two host ports cannot both be bound: same
// protocol and port, and the same address or either on every address.
func (h boundPort) conflicts(o boundPort) bool {
	return h.protocol == o.protocol && h.port == o.port &&
		(h.ip == o.ip || h.ip == wildcardHostIP || o.ip == wildcardHostIP)
}

// hostPortConflict returns the first host port of pod that one of the
// running pods binds already.
func hostPortConflict(pod *v1.Pod, running []*v1.Pod) (string, bool) {
	wants := hostPorts(pod)
	if len(wants) == 0 {
		return "", false
	}
	var inUse []boundPort
	for _, p := range running {
		inUse = append(inUse, hostPorts(p)...)
	}
	for _, want := range wants {
		for _, used := range inUse {
			if want.conflicts(used) {
				return want.String(), true
			}
		}
	}
	return "", false
}

func hostPorts(pod *v1.Pod) []boundPort {
	var out []boundPort
	visit := func(cs []v1.Container) {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.HostPort <= 0 {
					continue
				}
				h := boundPort{protocol: p.Protocol, ip: p.HostIP, port: p.HostPort}
				if h.protocol == "" {
					h.protocol = v1.ProtocolTCP
				}
				if h.ip == "" {
					h.ip = wildcardHostIP
				}
				out = append(out, h)
			}
		}
	}
	visit(pod.Spec.InitContainers)
	visit(pod.Spec.Containers)
	return out
}

package nodeinfo

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition reasons and messages, the kubelet's where one exists.
const (
	ReasonReady                = "KubeletReady"
	ReasonNotReady             = "KubeletNotReady"
	ReasonSufficientMemory     = "KubeletHasSufficientMemory"
	ReasonInsufficientMemory   = "KubeletHasInsufficientMemory"
	ReasonNoDiskPressure       = "KubeletHasNoDiskPressure"
	ReasonDiskPressure         = "KubeletHasDiskPressure"
	ReasonSufficientPID        = "KubeletHasSufficientPID"
	ReasonInsufficientPID      = "KubeletHasInsufficientPID"
	MessageReady               = "nodelet is posting ready status"
	messageSufficientMemory    = "nodelet has sufficient memory available"
	messageInsufficientMemory  = "nodelet has insufficient memory available"
	messageNoDiskPressure      = "nodelet has no disk pressure"
	messageDiskPressure        = "nodelet has disk pressure"
	messageSufficientPID       = "nodelet has sufficient PID available"
	messageInsufficientPID     = "nodelet has insufficient PID available"
	messageRuntimeStatusUnseen = "container runtime status has not been checked yet"
)

// Observation is one look at the node: everything ComputeStatus writes.
type Observation struct {
	// Capacity and Allocatable hold the resources nodelet measures; other
	// entries already in the status (extended resources) are kept.
	Capacity    corev1.ResourceList
	Allocatable corev1.ResourceList
	// RemovedResources leave the status's capacity and allocatable (a
	// device plugin's resource whose plugin stayed away).
	RemovedResources []corev1.ResourceName
	// Addresses are nodelet's addresses: they replace the status's
	// addresses of the same types; addresses of other types (an
	// ExternalIP a cloud controller added) are kept. None keeps all.
	Addresses []corev1.NodeAddress
	// NodeInfo replaces the status's nodeInfo, except that an empty
	// ContainerRuntimeVersion (runtime unreachable) keeps the old one.
	NodeInfo        corev1.NodeSystemInfo
	DaemonEndpoints corev1.NodeDaemonEndpoints
	// Images replace the status's images when ImagesKnown.
	Images      []corev1.ContainerImage
	ImagesKnown bool
	// Features and RuntimeHandlers replace the status's features and
	// runtime handlers when FeaturesKnown (NodeFeatures,
	// NodeRuntimeHandlers).
	Features        *corev1.NodeFeatures
	RuntimeHandlers []corev1.NodeRuntimeHandler
	FeaturesKnown   bool
	// DeclaredFeatures replace the status's declaredFeatures.
	DeclaredFeatures []string
	// RuntimeProblems make the node NotReady; none means Ready.
	RuntimeProblems []string
	// Pressure sets the pressure conditions. The node reconciler replaces
	// the Observer's instant evaluation (EvaluatePressure) with the
	// eviction manager's conditions, which hold for
	// evictionPressureTransitionPeriod, once that manager has looked.
	Pressure Pressure
	// VolumesInUse replace the status's volumesInUse when
	// VolumesInUseKnown: the volumes that need attaching and that the node
	// uses or has yet to tear down, sorted.
	VolumesInUse      []corev1.UniqueVolumeName
	VolumesInUseKnown bool
}

// ComputeStatus returns old updated with observed at time now, and whether
// anything but heartbeat times differs from old. Every condition nodelet
// owns gets lastHeartbeatTime now; lastTransitionTime moves to now only when
// the condition's status flips (or it is new). Conditions, capacity entries
// and fields nodelet does not own are kept as they are.
func ComputeStatus(old corev1.NodeStatus, observed Observation, now time.Time) (corev1.NodeStatus, bool) {
	s := *old.DeepCopy()
	ts := metav1.NewTime(now).Rfc3339Copy()

	if s.Capacity == nil {
		s.Capacity = corev1.ResourceList{}
	}
	for name, q := range observed.Capacity {
		s.Capacity[name] = q.DeepCopy()
	}
	for _, name := range observed.RemovedResources {
		delete(s.Capacity, name)
	}
	s.Allocatable = corev1.ResourceList{}
	for name, q := range s.Capacity {
		if a, ok := observed.Allocatable[name]; ok {
			q = a
		} else if a, ok := old.Allocatable[name]; ok {
			// Not measured now (someone else's resource): keep it.
			q = a
		}
		s.Allocatable[name] = q.DeepCopy()
	}
	if len(observed.Addresses) > 0 {
		s.Addresses = mergeAddresses(old.Addresses, observed.Addresses)
	}
	ni := observed.NodeInfo
	if ni.ContainerRuntimeVersion == "" {
		ni.ContainerRuntimeVersion = old.NodeInfo.ContainerRuntimeVersion
	}
	s.NodeInfo = ni
	s.DaemonEndpoints = observed.DaemonEndpoints
	if observed.ImagesKnown {
		s.Images = observed.Images
	}
	if observed.FeaturesKnown {
		s.Features, s.RuntimeHandlers = observed.Features, observed.RuntimeHandlers
	}
	s.DeclaredFeatures = observed.DeclaredFeatures
	if observed.VolumesInUseKnown {
		s.VolumesInUse = observed.VolumesInUse
		if len(s.VolumesInUse) == 0 {
			s.VolumesInUse = nil
		}
	}
	for _, c := range desiredConditions(observed) {
		setCondition(&s.Conditions, c, ts)
	}
	return s, !equalIgnoringHeartbeats(old, s)
}

// mergeAddresses returns own followed by the addresses of old whose type
// is none of own's types, in their order.
func mergeAddresses(old, own []corev1.NodeAddress) []corev1.NodeAddress {
	owned := map[corev1.NodeAddressType]bool{}
	for _, a := range own {
		owned[a.Type] = true
	}
	out := append([]corev1.NodeAddress(nil), own...)
	for _, a := range old {
		if !owned[a.Type] {
			out = append(out, a)
		}
	}
	return out
}

// desiredConditions are the conditions nodelet owns, in the kubelet's order.
func desiredConditions(o Observation) []corev1.NodeCondition {
	pressure := func(t corev1.NodeConditionType, on bool, yesReason, yesMsg, noReason, noMsg string) corev1.NodeCondition {
		if on {
			return corev1.NodeCondition{Type: t, Status: corev1.ConditionTrue, Reason: yesReason, Message: yesMsg}
		}
		return corev1.NodeCondition{Type: t, Status: corev1.ConditionFalse, Reason: noReason, Message: noMsg}
	}
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: ReasonReady, Message: MessageReady}
	if len(o.RuntimeProblems) > 0 {
		ready = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: ReasonNotReady,
			Message: strings.Join(o.RuntimeProblems, ", ")}
	}
	return []corev1.NodeCondition{
		pressure(corev1.NodeMemoryPressure, o.Pressure.Memory, ReasonInsufficientMemory, messageInsufficientMemory, ReasonSufficientMemory, messageSufficientMemory),
		pressure(corev1.NodeDiskPressure, o.Pressure.Disk, ReasonDiskPressure, messageDiskPressure, ReasonNoDiskPressure, messageNoDiskPressure),
		pressure(corev1.NodePIDPressure, o.Pressure.PID, ReasonInsufficientPID, messageInsufficientPID, ReasonSufficientPID, messageSufficientPID),
		ready,
	}
}

// setCondition puts want into conds with heartbeat now, keeping the old
// transition time unless the status changed.
func setCondition(conds *[]corev1.NodeCondition, want corev1.NodeCondition, now metav1.Time) {
	want.LastHeartbeatTime = now
	want.LastTransitionTime = now
	for i := range *conds {
		c := &(*conds)[i]
		if c.Type != want.Type {
			continue
		}
		if c.Status == want.Status {
			want.LastTransitionTime = c.LastTransitionTime
		}
		*c = want
		return
	}
	*conds = append(*conds, want)
}

func equalIgnoringHeartbeats(a, b corev1.NodeStatus) bool {
	strip := func(s corev1.NodeStatus) corev1.NodeStatus {
		s = *s.DeepCopy()
		for i := range s.Conditions {
			s.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		return s
	}
	return equality.Semantic.DeepEqual(strip(a), strip(b))
}

// LastHeartbeat is the Ready condition's lastHeartbeatTime: when nodelet
// last wrote the status. It is zero when there is none.
func LastHeartbeat(s corev1.NodeStatus) time.Time {
	for _, c := range s.Conditions {
		if c.Type == corev1.NodeReady {
			return c.LastHeartbeatTime.Time
		}
	}
	return time.Time{}
}

// ReportDue says whether an unchanged status written last at
// LastHeartbeat(s) must be written again at now, and how long until it
// must be otherwise.
func ReportDue(s corev1.NodeStatus, reportFrequency time.Duration, now time.Time) (due bool, wait time.Duration) {
	last := LastHeartbeat(s)
	if last.IsZero() {
		return true, 0
	}
	wait = last.Add(reportFrequency).Sub(now)
	return wait <= 0, max(wait, 0)
}

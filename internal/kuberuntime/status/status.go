package status

import (
	"bytes"
	"net"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"

	"github.com/nodelet/nodelet/internal/kuberuntime/planner"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/podspec"
)

// Container state reasons the kubelet reports besides the waiting ones.
const (
	ReasonCompleted              = "Completed"
	ReasonError                  = "Error"
	ReasonContainerStatusUnknown = "ContainerStatusUnknown"
)

// Inputs is what ComputePodStatus needs besides the pod, the runtime
// and the state.
type Inputs struct {
	// Now is the time of this status computation.
	Now time.Time
	// HostIPs are the node's IPs, primary first.
	HostIPs []string
	// Probes are the prober's results; a container with a readiness
	// (startup) probe but no result is not ready (not started).
	Probes state.ProbeResults
	// RuntimeName prefixes container IDs (<name>://<id>); "containerd" if empty.
	RuntimeName string
	// MaxCrashLoopBackOff caps the crash-loop back-off a waiting container
	// shows (the planner's Inputs.MaxCrashLoopBackOff); zero is the kubelet's
	// state.MaxCrashLoopBackOff.
	MaxCrashLoopBackOff time.Duration
	// Eviction is set once the eviction manager evicted the pod, or the
	// node shutdown manager stopped it (the planner's Inputs.Eviction).
	Eviction *planner.Eviction
	// RecursiveReadOnly is whether the pod's runtime handler makes
	// recursive read-only mounts: the volume mounts' status says which
	// are.
	RecursiveReadOnly bool
	// AllocatedResourcesStatus are, by container name, the health of the
	// devices each regular container holds (its allocatedResourcesStatus,
	// sorted by the caller); nil with the ResourceHealthStatus gate off.
	AllocatedResourcesStatus map[string][]v1.ResourceStatus
}

// statusBuilder holds what one status computation reads.
type statusBuilder struct {
	pod *v1.Pod
	rt  state.PodRuntime
	st  state.PodState
	in  Inputs
	old v1.PodStatus
	// deadline: the pod ran past its active deadline and is being stopped
	// for good.
	deadline bool
	// evicted: the eviction manager evicted the pod and it is being
	// stopped for good.
	evicted bool
}

// ComputePodStatus derives the API status of a pod as the kubelet would
// report it: container and init container statuses in spec order (waiting
// reasons included) and ephemeral container statuses by name, the phase
// (which, like the conditions, ephemeral containers do not affect), the
// kubelet's conditions (keeping the others, such as readiness gates, and
// carrying transition times over when a condition did not change), pod and
// host IPs, start time and QoS class.
// The base is the status last written (state.PodState.LastStatus), else the
// pod's.
// Container messages are the termination messages: the caller fills
// state.Container.Message from the termination message file before
// calling.
func ComputePodStatus(pod *v1.Pod, rt state.PodRuntime, st state.PodState, in Inputs) v1.PodStatus {
	b := statusBuilder{pod: pod, rt: rt, st: st, in: in, old: pod.Status}
	if st.LastStatus != nil {
		b.old = *st.LastStatus
	}
	b.deadline = planner.PastActiveDeadline(pod, st, in.Now)
	b.evicted = planner.Evicted(pod, in.Eviction)
	if b.in.RuntimeName == "" {
		b.in.RuntimeName = "containerd"
	}
	s := v1.PodStatus{
		ObservedGeneration: pod.Generation,
		QOSClass:           podspec.PodQOS(pod),
		StartTime:          b.startTime(),
	}
	b.setIPs(&s)
	hasInit := len(pod.Spec.InitContainers) > 0
	for i := range pod.Spec.InitContainers {
		s.InitContainerStatuses = append(s.InitContainerStatuses, b.containerStatus(&pod.Spec.InitContainers[i], true, hasInit))
	}
	for i := range pod.Spec.Containers {
		cs := b.containerStatus(&pod.Spec.Containers[i], false, hasInit)
		cs.AllocatedResourcesStatus = in.AllocatedResourcesStatus[cs.Name]
		s.ContainerStatuses = append(s.ContainerStatuses, cs)
	}
	s.EphemeralContainerStatuses = b.ephemeralContainerStatuses(hasInit)
	s.Phase = b.phase(s)
	if b.terminal() {
		b.markStopped(&s)
	}
	if s.Phase == b.old.Phase {
		s.Reason, s.Message = b.old.Reason, b.old.Message
	}
	switch {
	case b.evicted && s.Phase == v1.PodFailed:
		s.Reason, s.Message = in.Eviction.ReasonOrEvicted(), in.Eviction.Message
	case b.deadline && s.Phase == v1.PodFailed:
		s.Reason, s.Message = planner.ReasonDeadlineExceeded, planner.MessageDeadlineExceeded
	}
	s.Conditions = b.conditions(s)
	return s
}

// Equal reports whether two statuses would show the same, comparing
// times at the second precision the API keeps and conditions without
// their probe times.
//
// Most comparisons are of a status with the one it was computed from last
// time, and are equal: two statuses whose protobuf encodings are the same
// bytes are equal without the reflective walk, which costs several times
// the two encodings. Equal encodings imply equal statuses: every field of
// a status is encoded, times in whole seconds, quantities in their
// strings, and nil and empty lists alike, as the walk compares them. The
// converse does not hold (1 and 1000m, a probe time): different encodings
// are compared by the walk.
func Equal(a, b v1.PodStatus) bool {
	if sameEncoding(&a, &b) {
		return true
	}
	return statusEquality.DeepEqual(a, b)
}

// encodings holds the buffers sameEncoding encodes into.
var encodings = sync.Pool{New: func() any { return new([]byte) }}

// sameEncoding reports whether a and b have the same protobuf encoding.
func sameEncoding(a, b *v1.PodStatus) bool {
	na, nb := a.Size(), b.Size()
	if na != nb {
		return false
	}
	buf := encodings.Get().(*[]byte)
	defer encodings.Put(buf)
	if cap(*buf) < 2*na {
		*buf = make([]byte, 2*na)
	}
	ea, eb := (*buf)[:na], (*buf)[na:2*na]
	if _, err := a.MarshalToSizedBuffer(ea); err != nil {
		return false
	}
	if _, err := b.MarshalToSizedBuffer(eb); err != nil {
		return false
	}
	return bytes.Equal(ea, eb)
}

// statusEquality compares as equality.Semantic does, but metav1.Time at
// second precision and conditions without LastProbeTime: in place, where
// normalizing two copies first made every comparison copy both statuses.
var statusEquality = newStatusEquality()

func newStatusEquality() conversion.Equalities {
	e := conversion.EqualitiesOrDie(
		func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 },
		func(a, b metav1.Time) bool {
			return a.Truncate(time.Second).Equal(b.Truncate(time.Second))
		},
	)
	// Compared field by field through another type, so that this
	// function is not called again for the same pair.
	if err := e.AddFunc(func(a, b v1.PodCondition) bool {
		a.LastProbeTime, b.LastProbeTime = metav1.Time{}, metav1.Time{}
		return e.DeepEqual(conditionFields(a), conditionFields(b))
	}); err != nil {
		panic(err)
	}
	return e
}

// conditionFields is a PodCondition compared field by field.
type conditionFields v1.PodCondition

// apiTime converts a time to the API's second precision.
func apiTime(t time.Time) metav1.Time {
	if t.IsZero() {
		return metav1.Time{}
	}
	return metav1.NewTime(t).Rfc3339Copy()
}

func (b *statusBuilder) startTime() *metav1.Time {
	switch {
	case b.old.StartTime != nil:
		return b.old.StartTime.DeepCopy()
	case b.pod.Status.StartTime != nil:
		return b.pod.Status.StartTime.DeepCopy()
	}
	t := apiTime(b.in.Now)
	return &t
}

// setIPs reports the ready sandbox's IPs (one per family, the node's family
// first), the host's for a host-network pod, and keeps the old ones when
// the sandbox has none.
func (b *statusBuilder) setIPs(s *v1.PodStatus) {
	for _, ip := range b.in.HostIPs {
		s.HostIPs = append(s.HostIPs, v1.HostIP{IP: ip})
	}
	if len(s.HostIPs) > 0 {
		s.HostIP = s.HostIPs[0].IP
	}
	var ips []string
	if sb := b.rt.NewestSandbox(); sb != nil && sb.Ready {
		ips = pickPodIPs(sb.IPs, b.in.HostIPs)
	}
	if len(ips) == 0 && b.pod.Spec.HostNetwork {
		ips = pickPodIPs(b.in.HostIPs, b.in.HostIPs)
	}
	if len(ips) == 0 {
		s.PodIP, s.PodIPs = b.old.PodIP, append([]v1.PodIP(nil), b.old.PodIPs...)
		return
	}
	for _, ip := range ips {
		s.PodIPs = append(s.PodIPs, v1.PodIP{IP: ip})
	}
	s.PodIP = ips[0]
}

// pickPodIPs keeps the first IP of the node's family and then the first of
// the other family.
func pickPodIPs(ips, hostIPs []string) []string {
	isV4 := func(s string) bool {
		ip := net.ParseIP(s)
		return ip != nil && ip.To4() != nil
	}
	primaryV4 := len(hostIPs) == 0 || isV4(hostIPs[0])
	var primary, secondary string
	for _, ip := range ips {
		if net.ParseIP(ip) == nil {
			continue
		}
		if isV4(ip) == primaryV4 {
			if primary == "" {
				primary = ip
			}
		} else if secondary == "" {
			secondary = ip
		}
	}
	var out []string
	for _, ip := range []string{primary, secondary} {
		if ip != "" {
			out = append(out, ip)
		}
	}
	return out
}

func (b *statusBuilder) oldContainerStatus(name string, init bool) *v1.ContainerStatus {
	list := b.old.ContainerStatuses
	if init {
		list = b.old.InitContainerStatuses
	}
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

// containerStatus builds the status of one container from its two newest
// instances, the old status and the recorded start failures.
func (b *statusBuilder) containerStatus(c *v1.Container, init, hasInit bool) v1.ContainerStatus {
	defaultWaiting := state.ReasonContainerCreating
	if hasInit {
		defaultWaiting = state.ReasonPodInitializing
	}
	old := b.oldContainerStatus(c.Name, init)
	insts := b.rt.Instances(c.Name, "")
	var cs v1.ContainerStatus
	if len(insts) == 0 {
		cs = b.missingContainerStatus(c, init, old, defaultWaiting)
	} else {
		cs = b.observedContainerStatus(c, insts, old, defaultWaiting)
		b.setResources(c, &cs, insts)
	}
	if !(init && len(insts) > 0 && planner.Succeeded(&insts[0])) {
		b.applyWaiting(c, &cs, insts)
	}
	b.setStartedReady(c, init, &cs, insts)
	b.setVolumeMounts(c, &cs)
	return cs
}

// setVolumeMounts reports the container's volume mounts as the kubelet
// does: each with its name, path and read-only flag and, for a read-only
// one, whether it is read-only recursively (Enabled) or not (Disabled). A
// status kept from a terminated container keeps what it said.
func (b *statusBuilder) setVolumeMounts(c *v1.Container, cs *v1.ContainerStatus) {
	if cs.VolumeMounts != nil || len(c.VolumeMounts) == 0 {
		return
	}
	cs.VolumeMounts = make([]v1.VolumeMountStatus, 0, len(c.VolumeMounts))
	for i := range c.VolumeMounts {
		vm := &c.VolumeMounts[i]
		vs := v1.VolumeMountStatus{Name: vm.Name, MountPath: vm.MountPath, ReadOnly: vm.ReadOnly}
		if vm.ReadOnly {
			mode := v1.RecursiveReadOnlyDisabled
			if rro, err := podspec.RecursiveReadOnly(vm, b.in.RecursiveReadOnly); err == nil && rro {
				mode = v1.RecursiveReadOnlyEnabled
			}
			vs.RecursiveReadOnly = &mode
		}
		cs.VolumeMounts = append(cs.VolumeMounts, vs)
	}
}

// missingContainerStatus is the status of a container the runtime does not
// have (any more).
func (b *statusBuilder) missingContainerStatus(c *v1.Container, init bool, old *v1.ContainerStatus, defaultWaiting string) v1.ContainerStatus {
	if old != nil && old.State.Terminated != nil {
		return *old.DeepCopy()
	}
	cs := v1.ContainerStatus{
		Name:  c.Name,
		Image: c.Image,
		State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: defaultWaiting}},
	}
	if old != nil {
		cs.RestartCount = old.RestartCount
		cs.LastTerminationState = *old.LastTerminationState.DeepCopy()
		if old.State.Running != nil && cs.LastTerminationState.Terminated == nil {
			// It ran and vanished: it terminated, we do not know how.
			cs.LastTerminationState.Terminated = &v1.ContainerStateTerminated{
				Reason:   ReasonContainerStatusUnknown,
				Message:  "The container could not be located when the pod was deleted.  The container used to be Running",
				ExitCode: 137,
			}
			if b.pod.DeletionTimestamp == nil {
				cs.RestartCount++
			}
		}
	}
	if init && !planner.IsSidecar(c) && planner.AnyRegularContainerCreated(b.pod, b.rt) {
		// Removed after the pod was initialized: it must have succeeded.
		cs.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			Reason:   ReasonCompleted,
			Message:  "Unable to get init container status from container runtime and pod has been initialized, treat it as exited normally",
			ExitCode: 0,
		}}
	}
	return cs
}

// observedContainerStatus is the status of a container from its newest
// instance, with the one before as last termination state.
func (b *statusBuilder) observedContainerStatus(c *v1.Container, insts []state.Container, old *v1.ContainerStatus, defaultWaiting string) v1.ContainerStatus {
	latest := insts[0]
	cs := v1.ContainerStatus{
		Name:         c.Name,
		Image:        c.Image,
		ImageID:      latest.ImageRef,
		ContainerID:  b.containerID(latest.ID),
		RestartCount: int32(latest.Attempt),
	}
	if u := latest.User; u != nil {
		// As the kubelet does (supplementalGroupsPolicy): who the
		// container's process runs as, from a runtime that says.
		cs.User = &v1.ContainerUser{Linux: &v1.LinuxContainerUser{UID: u.UID, GID: u.GID, SupplementalGroups: slices.Clone(u.SupplementalGroups)}}
	}
	switch latest.State {
	case state.ContainerRunning:
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: apiTime(latest.StartedAt)}
	case state.ContainerExited:
		cs.State.Terminated = b.terminated(latest)
	case state.ContainerUnknown:
		if old != nil && old.State.Running != nil {
			cs.State.Terminated = &v1.ContainerStateTerminated{
				Reason:   ReasonContainerStatusUnknown,
				Message:  "The container could not be located when the pod was terminated",
				ExitCode: 137,
			}
			cs.RestartCount = old.RestartCount + 1
		} else {
			cs.State.Waiting = &v1.ContainerStateWaiting{}
		}
	default:
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: defaultWaiting}
	}
	if len(insts) > 1 && insts[1].State == state.ContainerExited {
		cs.LastTerminationState.Terminated = b.terminated(insts[1])
	}
	return cs
}

// markStopped shows the containers of a pod that stopped for good, and was
// initialized, as terminated even when the runtime lost them.
func (b *statusBuilder) markStopped(s *v1.PodStatus) {
	if !b.initialized() {
		return
	}
	for i := range s.ContainerStatuses {
		if s.ContainerStatuses[i].State.Terminated == nil {
			s.ContainerStatuses[i].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
				Reason:   ReasonContainerStatusUnknown,
				Message:  "The container could not be located when the pod was terminated",
				ExitCode: 137,
			}}
		}
	}
}

func (b *statusBuilder) containerID(id string) string {
	return b.in.RuntimeName + "://" + id
}

func (b *statusBuilder) terminated(c state.Container) *v1.ContainerStateTerminated {
	reason := c.Reason
	if reason == "" {
		reason = ReasonError
		if c.ExitCode == 0 {
			reason = ReasonCompleted
		}
	}
	return &v1.ContainerStateTerminated{
		ExitCode:    c.ExitCode,
		Reason:      reason,
		Message:     c.Message,
		StartedAt:   apiTime(c.StartedAt),
		FinishedAt:  apiTime(c.FinishedAt),
		ContainerID: b.containerID(c.ID),
	}
}

// applyWaiting shows a container that will be started again as Waiting with
// the reason it is not running (see setWaiting).
func (b *statusBuilder) applyWaiting(c *v1.Container, cs *v1.ContainerStatus, insts []state.Container) {
	var latest *state.Container
	if len(insts) > 0 {
		latest = &insts[0]
	}
	if b.stopping() || !planner.ShouldRestart(b.pod, c, latest) {
		return
	}
	b.setWaiting(c, cs)
}

// setWaiting shows a container that is to be started as Waiting with the
// reason it is not running: a start failure recorded in this very
// reconcile, a back-off, or an older recorded failure. Without any, the
// status is left as it is.
func (b *statusBuilder) setWaiting(c *v1.Container, cs *v1.ContainerStatus) {
	rec := b.st.Containers[c.Name]
	var w *v1.ContainerStateWaiting
	if r := rec.Waiting; r != nil && !b.in.Now.After(r.At) {
		w = &v1.ContainerStateWaiting{Reason: r.Reason, Message: r.Message}
	} else if bo, ok := planner.ContainerBackOff(b.pod, c, b.rt, b.st, b.in.Now, b.in.MaxCrashLoopBackOff); ok {
		w = &v1.ContainerStateWaiting{Reason: bo.Reason, Message: bo.Message}
	} else if r != nil {
		w = &v1.ContainerStateWaiting{Reason: r.Reason, Message: r.Message}
	}
	if w == nil {
		return
	}
	if cs.State.Terminated != nil {
		cs.LastTerminationState = cs.State
	}
	cs.State = v1.ContainerState{Waiting: w}
}

// setStartedReady sets started (running and past its startup probe) and
// ready (started and past its readiness probe; for a plain init container,
// completed successfully).
func (b *statusBuilder) setStartedReady(c *v1.Container, init bool, cs *v1.ContainerStatus, insts []state.Container) {
	running := cs.State.Running != nil && len(insts) > 0
	started := running && probeOK(c.StartupProbe, b.in.Probes.Startup, insts)
	cs.Started = &started
	if init && !planner.IsSidecar(c) {
		cs.Ready = cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
		return
	}
	cs.Ready = started && probeOK(c.ReadinessProbe, b.in.Probes.Readiness, insts)
}

func probeOK(probe *v1.Probe, results map[string]bool, insts []state.Container) bool {
	if probe == nil {
		return true
	}
	return results[insts[0].ID]
}

package kuberuntime

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Ephemeral containers (pod.spec.ephemeralContainers, added through the
// pods/ephemeralcontainers subresource by `kubectl debug`) follow the
// kubelet's rules: each runs once, started in the pod's current sandbox
// whether or not the pod is initialized, and is never restarted, whatever
// the restart policy, however it ended; a pod being stopped or about to get
// a new sandbox starts none. They have no probes, ports, resources or
// lifecycle hooks (the API refuses them), are stopped with the pod, and do
// not count for its phase or readiness. One that names a
// targetContainerName shares that container's process namespace.

// ephemeralSpec returns an ephemeral container as the container spec it
// shares all its fields with.
func ephemeralSpec(ec *v1.EphemeralContainer) *v1.Container {
	return (*v1.Container)(&ec.EphemeralContainerCommon)
}

// ephemeralRan reports whether an ephemeral container was ever created: the
// runtime holds an instance of it, or the state records a creation (its
// instance may have been lost since). Such a container is never started
// again.
func ephemeralRan(rt PodRuntime, st PodState, name string) bool {
	return rt.latest(name) != nil || st.record(name).Created
}

// planEphemeralContainers plans the start of every ephemeral container that
// never ran, in the current sandbox.
func (p *planner) planEphemeralContainers() {
	for i := range p.pod.Spec.EphemeralContainers {
		ec := &p.pod.Spec.EphemeralContainers[i]
		if ephemeralRan(p.rt, p.st, ec.Name) {
			continue
		}
		s := ContainerStart{Name: ec.Name, Index: i, Ephemeral: true}
		if ec.TargetContainerName != "" {
			if target := p.rt.latest(ec.TargetContainerName); target != nil {
				s.TargetID = target.ID
			}
		}
		p.a.EphemeralContainersToStart = append(p.a.EphemeralContainersToStart, s)
	}
}

// Target returns the ID of the container whose process namespace the
// ephemeral container to start shares: "" when it names no
// targetContainerName, a *ConfigError when the named container has no
// instance (the kubelet's "unable to find target container").
func (c ContainerStart) Target(pod *v1.Pod) (string, error) {
	if !c.Ephemeral {
		return "", nil
	}
	name := pod.Spec.EphemeralContainers[c.Index].TargetContainerName
	if name != "" && c.TargetID == "" {
		return "", &ConfigError{Err: fmt.Errorf("unable to find target container %s", name)}
	}
	return c.TargetID, nil
}

// shareTargetPID has a container join the process namespace of the
// container targetID, when it would otherwise get one of its own (the pod
// neither shares one among its containers nor uses the host's).
func shareTargetPID(ns *runtimeapi.NamespaceOption, targetID string) {
	if targetID == "" || ns == nil || ns.Pid != runtimeapi.NamespaceMode_CONTAINER {
		return
	}
	ns.Pid = runtimeapi.NamespaceMode_TARGET
	ns.TargetId = targetID
}

// msgEphemeralLost is the message of an ephemeral container the runtime
// lost after it ran.
const msgEphemeralLost = "The container could not be located when the pod was terminated"

// ephemeralContainerStatuses builds the statuses of the pod's ephemeral
// containers, sorted by name as the kubelet sorts them.
func (b *statusBuilder) ephemeralContainerStatuses(hasInit bool) []v1.ContainerStatus {
	var out []v1.ContainerStatus
	for i := range b.pod.Spec.EphemeralContainers {
		out = append(out, b.ephemeralStatus(ephemeralSpec(&b.pod.Spec.EphemeralContainers[i]), hasInit))
	}
	slices.SortFunc(out, func(a, b v1.ContainerStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ephemeralStatus is the status of one ephemeral container: its instance's
// state; Waiting with the reason of a failed start (ErrImagePull,
// ImagePullBackOff, CreateContainerConfigError, ...) while it is to be
// started; once it ran and the runtime lost it, terminated with an unknown
// status. Its restart count is always 0; it is never ready, and the
// kubelet reports no started flag for it.
func (b *statusBuilder) ephemeralStatus(c *v1.Container, hasInit bool) v1.ContainerStatus {
	defaultWaiting := ReasonContainerCreating
	if hasInit {
		defaultWaiting = ReasonPodInitializing
	}
	var old *v1.ContainerStatus
	if i := slices.IndexFunc(b.old.EphemeralContainerStatuses, func(s v1.ContainerStatus) bool { return s.Name == c.Name }); i >= 0 {
		old = &b.old.EphemeralContainerStatuses[i]
	}
	insts := b.rt.instances(c.Name, "")
	var cs v1.ContainerStatus
	switch {
	case len(insts) > 0:
		cs = b.observedContainerStatus(c, insts, old, defaultWaiting)
	case old != nil && old.State.Terminated != nil:
		cs = *old.DeepCopy()
	case (old != nil && old.State.Running != nil) || b.st.record(c.Name).Created:
		cs = v1.ContainerStatus{Name: c.Name, Image: c.Image, State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			Reason:   ReasonContainerStatusUnknown,
			Message:  msgEphemeralLost,
			ExitCode: 137,
		}}}
		if old != nil {
			cs.ImageID, cs.ContainerID = old.ImageID, old.ContainerID
		}
	default:
		cs = v1.ContainerStatus{Name: c.Name, Image: c.Image, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: defaultWaiting}}}
	}
	notStarted := cs.State.Waiting != nil && (len(insts) == 0 || insts[0].State == ContainerCreated)
	if notStarted && !b.stopping() {
		b.setWaiting(c, &cs)
	}
	cs.RestartCount = 0
	cs.Ready, cs.Started = false, nil
	return cs
}

package status

import (
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

// msgEphemeralLost is the message of an ephemeral container the runtime
// lost after it ran.
const msgEphemeralLost = "The container could not be located when the pod was terminated"

// ephemeralContainerStatuses builds the statuses of the pod's ephemeral
// containers, sorted by name as the kubelet sorts them. Ephemeral
// containers do not count for the pod's phase or readiness.
func (b *statusBuilder) ephemeralContainerStatuses(hasInit bool) []v1.ContainerStatus {
	var out []v1.ContainerStatus
	for i := range b.pod.Spec.EphemeralContainers {
		c := (*v1.Container)(&b.pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		out = append(out, b.ephemeralStatus(c, hasInit))
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
	defaultWaiting := state.ReasonContainerCreating
	if hasInit {
		defaultWaiting = state.ReasonPodInitializing
	}
	var old *v1.ContainerStatus
	if i := slices.IndexFunc(b.old.EphemeralContainerStatuses, func(s v1.ContainerStatus) bool { return s.Name == c.Name }); i >= 0 {
		old = &b.old.EphemeralContainerStatuses[i]
	}
	insts := b.rt.Instances(c.Name, "")
	var cs v1.ContainerStatus
	switch {
	case len(insts) > 0:
		cs = b.observedContainerStatus(c, insts, old, defaultWaiting)
	case old != nil && old.State.Terminated != nil:
		cs = *old.DeepCopy()
	case (old != nil && old.State.Running != nil) || b.st.Containers[c.Name].Created:
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
	notStarted := cs.State.Waiting != nil && (len(insts) == 0 || insts[0].State == state.ContainerCreated)
	if notStarted && !b.stopping() {
		b.setWaiting(c, &cs)
	}
	cs.RestartCount = 0
	cs.Ready, cs.Started = false, nil
	b.setVolumeMounts(c, &cs)
	return cs
}

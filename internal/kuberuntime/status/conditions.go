package status

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/kuberuntime/planner"
)

// Condition reasons the kubelet reports.
const (
	ReasonPodSandboxNotReady       = "PodSandboxNotReady"
	ReasonPodCompleted             = "PodCompleted"
	ReasonPodFailed                = "PodFailed"
	ReasonContainersNotReady       = "ContainersNotReady"
	ReasonContainersNotInitialized = "ContainersNotInitialized"
	ReasonReadinessGatesNotReady   = "ReadinessGatesNotReady"
)

// kubeletConditions are the condition types the node agent owns; all
// others (readiness gates, DisruptionTarget...) are kept as they are.
var kubeletConditions = map[v1.PodConditionType]bool{
	v1.PodScheduled:              true,
	v1.PodReady:                  true,
	v1.PodInitialized:            true,
	v1.ContainersReady:           true,
	v1.PodReadyToStartContainers: true,
	v1.PodResizePending:          true,
	v1.PodResizeInProgress:       true,
}

// conditions keeps the conditions others own and generates the node's, in
// the kubelet's order, with transition times carried over.
func (b *statusBuilder) conditions(s v1.PodStatus) []v1.PodCondition {
	var out []v1.PodCondition
	for _, c := range b.pod.Status.Conditions {
		if !kubeletConditions[c.Type] {
			out = append(out, c)
		}
	}
	out = append(out, b.resizeConditions()...)
	out = b.disruptionTarget(out)
	all := append(append([]v1.ContainerStatus{}, s.InitContainerStatuses...), s.ContainerStatuses...)
	containersReady := b.containersReady(all, s.Phase)
	generated := []v1.PodCondition{
		b.readyToStartContainers(),
		b.initializedCondition(all, s.Phase),
		b.readyCondition(containersReady, out),
		containersReady,
		{Type: v1.PodScheduled, Status: v1.ConditionTrue},
	}
	for _, c := range generated {
		c.ObservedGeneration = b.pod.Generation
		c.LastTransitionTime = apiTime(b.in.Now)
		if prev := findCondition(b.old.Conditions, c.Type); prev != nil && prev.Status == c.Status {
			c.LastTransitionTime = prev.LastTransitionTime
		}
		out = append(out, c)
	}
	return out
}

func findCondition(list []v1.PodCondition, t v1.PodConditionType) *v1.PodCondition {
	for i := range list {
		if list[i].Type == t {
			return &list[i]
		}
	}
	return nil
}

func (b *statusBuilder) readyToStartContainers() v1.PodCondition {
	if msg := planner.NewSandboxReason(b.pod, b.rt, b.st); msg != "" {
		if f := b.st.SandboxFailure; f != nil {
			msg = f.Message
		}
		return v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionFalse, Reason: ReasonPodSandboxNotReady, Message: msg}
	}
	return v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue}
}

func (b *statusBuilder) initializedCondition(all []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	var unknown, incomplete []string
	for i := range b.pod.Spec.InitContainers {
		c := &b.pod.Spec.InitContainers[i]
		cs := findStatus(all, c.Name)
		switch {
		case cs == nil:
			unknown = append(unknown, c.Name)
		case planner.IsSidecar(c) && (cs.Started == nil || !*cs.Started), !planner.IsSidecar(c) && !cs.Ready:
			incomplete = append(incomplete, c.Name)
		}
	}
	cond := v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue}
	switch {
	case phase == v1.PodSucceeded && len(unknown) == 0:
		cond.Reason = ReasonPodCompleted
	case b.anyRegularContainerRan(all):
	default:
		if msg := listMessages("incomplete", unknown, incomplete); msg != "" {
			cond.Status, cond.Reason, cond.Message = v1.ConditionFalse, ReasonContainersNotInitialized, msg
		}
	}
	return cond
}

// anyRegularContainerRan reports whether a regular container is running or
// has terminated, which means the pod was initialized.
func (b *statusBuilder) anyRegularContainerRan(all []v1.ContainerStatus) bool {
	for _, c := range b.pod.Spec.Containers {
		if cs := findStatus(all, c.Name); cs != nil && (cs.State.Running != nil || cs.State.Terminated != nil) {
			return true
		}
	}
	return false
}

func (b *statusBuilder) containersReady(all []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	var unknown, unready []string
	check := func(name string) {
		switch cs := findStatus(all, name); {
		case cs == nil:
			unknown = append(unknown, name)
		case !cs.Ready:
			unready = append(unready, name)
		}
	}
	for i := range b.pod.Spec.InitContainers {
		if planner.IsSidecar(&b.pod.Spec.InitContainers[i]) {
			check(b.pod.Spec.InitContainers[i].Name)
		}
	}
	for _, c := range b.pod.Spec.Containers {
		check(c.Name)
	}
	cond := v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse}
	switch {
	case phase == v1.PodSucceeded && len(unknown) == 0:
		cond.Reason = ReasonPodCompleted
	case phase == v1.PodFailed:
		cond.Reason = ReasonPodFailed
	default:
		if msg := listMessages("unready", unknown, unready); msg != "" {
			cond.Reason, cond.Message = ReasonContainersNotReady, msg
		} else {
			cond.Status = v1.ConditionTrue
		}
	}
	return cond
}

// listMessages formats the kubelet's "containers with ... status: [a b]".
func listMessages(kind string, unknown, bad []string) string {
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %s", unknown))
	}
	if len(bad) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with %s status: %s", kind, bad))
	}
	return strings.Join(msgs, ", ")
}

// readyCondition is ContainersReady, further requiring every readiness gate
// condition to be True.
func (b *statusBuilder) readyCondition(containersReady v1.PodCondition, others []v1.PodCondition) v1.PodCondition {
	cond := v1.PodCondition{Type: v1.PodReady, Status: containersReady.Status, Reason: containersReady.Reason, Message: containersReady.Message}
	if cond.Status != v1.ConditionTrue {
		return cond
	}
	var msgs []string
	for _, gate := range b.pod.Spec.ReadinessGates {
		c := findCondition(others, gate.ConditionType)
		switch {
		case c == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", gate.ConditionType))
		case c.Status != v1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", gate.ConditionType, c.Status))
		}
	}
	if len(msgs) > 0 {
		cond.Status, cond.Reason, cond.Message = v1.ConditionFalse, ReasonReadinessGatesNotReady, strings.Join(msgs, ", ")
	}
	return cond
}

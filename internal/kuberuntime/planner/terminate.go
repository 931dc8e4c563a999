package planner

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/podspec"
)

// DefaultGracePeriodSeconds applies when neither the deletion nor the spec
// gives a grace period (the API server defaults the spec to it).
const DefaultGracePeriodSeconds = int64(v1.DefaultTerminationGracePeriodSeconds)

// GracePeriodSeconds returns the pod's grace period: the deletion's when it
// is being deleted, else spec.terminationGracePeriodSeconds, else the default.
func GracePeriodSeconds(pod *v1.Pod) int64 {
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		return *pod.DeletionGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return DefaultGracePeriodSeconds
}

// EffectiveGracePeriod returns the grace period to stop a whole pod with,
// by the kubelet's pod-worker rules: the deletion's grace period when the
// API server set one above zero; else (a pod not deleted, force-deleted
// with grace 0, or gone from the API) the spec's
// terminationGracePeriodSeconds, else the default; and never less than one
// second. A pod known only from the runtime has no spec: the caller passes
// the kubelet's one-second override for it instead.
func EffectiveGracePeriod(pod *v1.Pod) int64 {
	var grace int64
	if pod.DeletionGracePeriodSeconds != nil {
		grace = *pod.DeletionGracePeriodSeconds
	}
	if grace == 0 {
		grace = DefaultGracePeriodSeconds
		if pod.Spec.TerminationGracePeriodSeconds != nil {
			grace = *pod.Spec.TerminationGracePeriodSeconds
		}
	}
	return max(grace, 1)
}

// killGracePeriod returns the grace period for killing one container: a
// probe's own terminationGracePeriodSeconds wins when that probe failed.
func killGracePeriod(pod *v1.Pod, c *v1.Container, reason plan.KillReason) int64 {
	if pod.DeletionGracePeriodSeconds == nil {
		var probe *v1.Probe
		switch reason {
		case plan.KillLivenessProbe:
			probe = c.LivenessProbe
		case plan.KillStartupProbe:
			probe = c.StartupProbe
		}
		if probe != nil && probe.TerminationGracePeriodSeconds != nil {
			return *probe.TerminationGracePeriodSeconds
		}
	}
	return GracePeriodSeconds(pod)
}

// PlanTermination plans the next step of stopping all of a pod's containers
// and sandboxes at now, as the kubelet does when a pod is deleted or
// finished: preStop hooks run first, within the grace period; regular and
// non-restartable init containers are stopped at once; restartable init
// containers (sidecars) are stopped only after every regular container and
// every sidecar after them in the spec has stopped, or when the grace period
// is over. Call state.PodState.BeginTermination first so the grace period is
// counted from the first stop.
func PlanTermination(pod *v1.Pod, rt state.PodRuntime, st state.PodState, now time.Time) plan.TerminationPlan {
	term := st.Terminating
	if term == nil {
		grace := EffectiveGracePeriod(pod)
		term = &state.Termination{StartedAt: now, GracePeriodSeconds: grace, Deadline: now.Add(time.Duration(grace) * time.Second)}
	}
	live := rt.Live()
	var tp plan.TerminationPlan
	if len(live) == 0 {
		for _, s := range rt.Sandboxes {
			if s.Ready {
				tp.StopSandboxes = append(tp.StopSandboxes, s.ID)
			}
		}
		tp.Done = len(tp.StopSandboxes) == 0
		return tp
	}
	timeout := term.StopTimeout(now)
	overdue := !now.Before(term.Deadline)
	waiting := false
	for _, inst := range live {
		if inst.State == state.ContainerCreated {
			tp.Remove = append(tp.Remove, inst.ID)
			continue
		}
		spec := podspec.ContainerSpec(pod, inst.Name)
		if h := preStopHandler(spec); h != nil && !overdue && !term.PreStopRan(inst.ID) && inst.State == state.ContainerRunning {
			tp.PreStop = append(tp.PreStop, plan.PreStopHook{ContainerID: inst.ID, Name: inst.Name, Handler: h, Timeout: timeout})
		}
		if !overdue && mustWaitForTurn(pod, live, inst.Name) {
			waiting = true
			continue
		}
		tp.Stop = append(tp.Stop, plan.ContainerStop{ContainerID: inst.ID, Name: inst.Name, Timeout: timeout})
	}
	if waiting {
		tp.RequeueAfter = term.Deadline.Sub(now)
	}
	return tp
}

func preStopHandler(c *v1.Container) *v1.LifecycleHandler {
	if c == nil || c.Lifecycle == nil {
		return nil
	}
	return c.Lifecycle.PreStop
}

// mustWaitForTurn reports whether the named container is a sidecar that may
// not be stopped yet: regular containers, and sidecars declared after it,
// still run.
func mustWaitForTurn(pod *v1.Pod, live []state.Container, name string) bool {
	idx := -1
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name && IsSidecar(&pod.Spec.InitContainers[i]) {
			idx = i
		}
	}
	if idx < 0 {
		return false
	}
	isLive := map[string]bool{}
	for _, c := range live {
		isLive[c.Name] = true
	}
	for _, c := range pod.Spec.Containers {
		if isLive[c.Name] {
			return true
		}
	}
	for _, c := range pod.Spec.InitContainers[idx+1:] {
		if IsSidecar(&c) && isLive[c.Name] {
			return true
		}
	}
	return false
}

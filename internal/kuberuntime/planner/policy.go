package planner

import (
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

// IsSidecar reports whether an init container is a restartable one, which
// keeps running next to the regular containers.
func IsSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// runsOnce reports whether a regular container that succeeded is not run
// again in a new sandbox.
func runsOnce(pod *v1.Pod, c *v1.Container) bool {
	if c.RestartPolicy != nil {
		return *c.RestartPolicy == v1.ContainerRestartPolicyOnFailure
	}
	return pod.Spec.RestartPolicy == v1.RestartPolicyOnFailure
}

// Succeeded reports whether a container instance exited with 0.
func Succeeded(inst *state.Container) bool {
	return inst != nil && inst.State == state.ContainerExited && inst.ExitCode == 0
}

// ShouldRestart reports whether a container whose newest instance is inst
// (nil: never created) must be started.
func ShouldRestart(pod *v1.Pod, c *v1.Container, inst *state.Container) bool {
	switch {
	case pod.DeletionTimestamp != nil:
		return false
	case inst == nil:
		return true
	case inst.State == state.ContainerRunning:
		return false
	case inst.State == state.ContainerExited:
		return ShouldRestartExited(pod, c, inst.ExitCode)
	default:
		// Created or unknown: it did not run as it should, try again.
		return true
	}
}

// ShouldRestartExited applies the container's restart rules and policy,
// then the pod's restart policy, to an exit code.
func ShouldRestartExited(pod *v1.Pod, c *v1.Container, exitCode int32) bool {
	if c.RestartPolicy != nil {
		if rule, ok := matchingRestartRule(c, exitCode); ok && rule.Action != "" {
			// Restart, and RestartAllContainers treated as restarting this one.
			return true
		}
		switch *c.RestartPolicy {
		case v1.ContainerRestartPolicyAlways:
			return true
		case v1.ContainerRestartPolicyOnFailure:
			return exitCode != 0
		case v1.ContainerRestartPolicyNever:
			return false
		}
	}
	switch pod.Spec.RestartPolicy {
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	case v1.RestartPolicyNever:
		return false
	default:
		return true
	}
}

// shouldRestartUnknown reports whether an init container in an unknown state
// may be restarted: only its restart policy counts, there is no exit code.
func shouldRestartUnknown(pod *v1.Pod, c *v1.Container) bool {
	if c.RestartPolicy != nil {
		return *c.RestartPolicy != v1.ContainerRestartPolicyNever
	}
	return pod.Spec.RestartPolicy != v1.RestartPolicyNever
}

func matchingRestartRule(c *v1.Container, exitCode int32) (v1.ContainerRestartRule, bool) {
	for _, rule := range c.RestartPolicyRules {
		if rule.ExitCodes == nil {
			continue
		}
		in := slices.Contains(rule.ExitCodes.Values, exitCode)
		switch rule.ExitCodes.Operator {
		case v1.ContainerRestartRuleOnExitCodesOpIn:
			if in {
				return rule, true
			}
		case v1.ContainerRestartRuleOnExitCodesOpNotIn:
			if !in {
				return rule, true
			}
		}
	}
	return v1.ContainerRestartRule{}, false
}

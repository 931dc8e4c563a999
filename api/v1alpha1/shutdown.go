package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateShutdown checks the graceful node shutdown fields with the
// kubelet's rules, which depend on the feature gates GracefulNodeShutdown
// (gracefulNodeShutdown) and GracefulNodeShutdownBasedOnPodPriority
// (byPodPriority): with the first, each period is 0 or at least 1s and the
// critical pods' part is at most the whole; without it, neither period may
// be set. With the second, the priority list and the two periods exclude
// each other; without it, the list must be empty.
func ValidateShutdown(c *NodeletConfiguration, gracefulNodeShutdown, byPodPriority bool) field.ErrorList {
	var errs field.ErrorList
	total, critical := c.ShutdownGracePeriod.Duration, c.ShutdownGracePeriodCriticalPods.Duration
	totalPath, criticalPath := field.NewPath("shutdownGracePeriod"), field.NewPath("shutdownGracePeriodCriticalPods")
	byPriorityPath := field.NewPath("shutdownGracePeriodByPodPriority")
	if gracefulNodeShutdown {
		if critical > total {
			errs = append(errs, field.Invalid(criticalPath, critical.String(),
				"must be at most shutdownGracePeriod ("+total.String()+")"))
		}
		for _, p := range []struct {
			path *field.Path
			d    time.Duration
		}{{totalPath, total}, {criticalPath, critical}} {
			if p.d < 0 || (p.d > 0 && p.d < time.Second) {
				errs = append(errs, field.Invalid(p.path, p.d.String(), "must be 0 or at least 1s"))
			}
		}
	} else {
		if total > 0 {
			errs = append(errs, field.Forbidden(totalPath, "needs the GracefulNodeShutdown feature gate"))
		}
		if critical > 0 {
			errs = append(errs, field.Forbidden(criticalPath, "needs the GracefulNodeShutdown feature gate"))
		}
	}
	switch {
	case len(c.ShutdownGracePeriodByPodPriority) == 0:
	case !byPodPriority:
		errs = append(errs, field.Forbidden(byPriorityPath, "needs the GracefulNodeShutdownBasedOnPodPriority feature gate"))
	case total > 0 || critical > 0:
		errs = append(errs, field.Forbidden(byPriorityPath, "must be empty when shutdownGracePeriod or shutdownGracePeriodCriticalPods is set"))
	}
	return errs
}

package v1alpha1

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Cgroup drivers.
const (
	CgroupDriverCgroupfs = "cgroupfs"
	CgroupDriverSystemd  = "systemd"
)

// EnforceNodeAllocatable values.
const (
	NodeAllocatableEnforcementPods   = "pods"
	NodeAllocatableEnforcementSystem = "system-reserved"
	NodeAllocatableEnforcementKube   = "kube-reserved"
	NodeAllocatableEnforcementNone   = "none"
)

// Defaults of the node hygiene fields: the kubelet's.
const (
	DefaultContainerLogMaxSize   = "10Mi"
	DefaultContainerLogMaxFiles  = 5
	DefaultContainerLogLinksDir  = "/var/log/containers"
	DefaultImageGCHighThreshold  = 85
	DefaultImageGCLowThreshold   = 80
	DefaultPodPidsLimit          = -1
	minContainerLogMonitorPeriod = 3 * time.Second
)

// setHygieneDefaults defaults the fields of log rotation, garbage
// collection, eviction and cgroups.
func setHygieneDefaults(c *NodeletConfiguration) {
	if c.CgroupsPerQOS == nil {
		t := true
		c.CgroupsPerQOS = &t
	}
	setString(&c.CgroupDriver, CgroupDriverCgroupfs)
	if c.PodPidsLimit == nil {
		n := int64(DefaultPodPidsLimit)
		c.PodPidsLimit = &n
	}
	if c.EnforceNodeAllocatable == nil {
		c.EnforceNodeAllocatable = []string{}
		if *c.CgroupsPerQOS {
			c.EnforceNodeAllocatable = []string{NodeAllocatableEnforcementPods}
		}
	}

	setString(&c.ContainerLogMaxSize, DefaultContainerLogMaxSize)
	if c.ContainerLogMaxFiles == 0 {
		c.ContainerLogMaxFiles = DefaultContainerLogMaxFiles
	}
	if c.ContainerLogMaxWorkers == 0 {
		c.ContainerLogMaxWorkers = 1
	}
	setDuration(&c.ContainerLogMonitorInterval, 10*time.Second)
	if c.ContainerLogLinksDir == nil {
		d := DefaultContainerLogLinksDir
		c.ContainerLogLinksDir = &d
	}

	if c.ContainerGC.MaxPerPodContainer == nil {
		n := int32(1)
		c.ContainerGC.MaxPerPodContainer = &n
	}
	if c.ContainerGC.MaxContainers == nil {
		n := int32(-1)
		c.ContainerGC.MaxContainers = &n
	}
	setDuration(&c.ContainerGC.Period, time.Minute)

	if c.ImageGCHighThresholdPercent == nil {
		n := int32(DefaultImageGCHighThreshold)
		c.ImageGCHighThresholdPercent = &n
	}
	if c.ImageGCLowThresholdPercent == nil {
		n := int32(DefaultImageGCLowThreshold)
		c.ImageGCLowThresholdPercent = &n
	}
	setDuration(&c.ImageMinimumGCAge, 2*time.Minute)
	setDuration(&c.ImageGCPeriod, 5*time.Minute)

	setDuration(&c.EvictionPressureTransitionPeriod, 5*time.Minute)
	setDuration(&c.EvictionMonitoringInterval, 10*time.Second)
	if c.LocalStorageCapacityIsolation == nil {
		t := true
		c.LocalStorageCapacityIsolation = &t
	}
}

// validateHygiene checks the fields of log rotation, garbage collection,
// eviction and cgroups, with the kubelet's rules.
func validateHygiene(c *NodeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	p := func(name string) *field.Path { return field.NewPath(name) }

	drivers := []string{CgroupDriverCgroupfs, CgroupDriverSystemd}
	if !slices.Contains(drivers, c.CgroupDriver) {
		errs = append(errs, field.NotSupported(p("cgroupDriver"), c.CgroupDriver, drivers))
	}
	if c.PodPidsLimit != nil && *c.PodPidsLimit < -1 {
		errs = append(errs, field.Invalid(p("podPidsLimit"), *c.PodPidsLimit, "must be -1 (no limit) or a positive number"))
	}
	errs = append(errs, validateEnforcement(c)...)

	if q, err := resource.ParseQuantity(c.ContainerLogMaxSize); err != nil {
		errs = append(errs, field.Invalid(p("containerLogMaxSize"), c.ContainerLogMaxSize, "must be a quantity such as 10Mi"))
	} else if q.Value() < 1024 {
		errs = append(errs, field.Invalid(p("containerLogMaxSize"), c.ContainerLogMaxSize, "must be at least 1Ki"))
	}
	if c.ContainerLogMaxFiles < 2 {
		errs = append(errs, field.Invalid(p("containerLogMaxFiles"), c.ContainerLogMaxFiles, "must be at least 2"))
	}
	if c.ContainerLogMaxWorkers < 1 {
		errs = append(errs, field.Invalid(p("containerLogMaxWorkers"), c.ContainerLogMaxWorkers, "must be at least 1"))
	}
	if c.ContainerLogMonitorInterval.Duration < minContainerLogMonitorPeriod {
		errs = append(errs, field.Invalid(p("containerLogMonitorInterval"), c.ContainerLogMonitorInterval.String(), "must be at least 3s"))
	}
	if d := c.ContainerLogLinksDir; d != nil && *d != "" {
		errs = append(errs, validateAbsPath(p("containerLogLinksDir"), *d)...)
	}

	gc := p("containerGC")
	if c.ContainerGC.MinimumGCAge.Duration < 0 {
		errs = append(errs, field.Invalid(gc.Child("minimumGCAge"), c.ContainerGC.MinimumGCAge.String(), "must not be negative"))
	}
	if n := c.ContainerGC.MaxPerPodContainer; n != nil && *n < 1 {
		errs = append(errs, field.Invalid(gc.Child("maxPerPodContainer"), *n, "must be at least 1: the newest dead instance is the container's lastState"))
	}
	if n := c.ContainerGC.MaxContainers; n != nil && *n < -1 {
		errs = append(errs, field.Invalid(gc.Child("maxContainers"), *n, "must be -1 (no limit) or at least 0"))
	}
	if c.ContainerGC.Period.Duration <= 0 {
		errs = append(errs, field.Invalid(gc.Child("period"), c.ContainerGC.Period.String(), "must be a positive duration"))
	}

	high, low := *c.ImageGCHighThresholdPercent, *c.ImageGCLowThresholdPercent
	if high < 0 || high > 100 {
		errs = append(errs, field.Invalid(p("imageGCHighThresholdPercent"), high, "must be between 0 and 100"))
	}
	if low < 0 || low > 100 {
		errs = append(errs, field.Invalid(p("imageGCLowThresholdPercent"), low, "must be between 0 and 100"))
	} else if low > high {
		errs = append(errs, field.Invalid(p("imageGCLowThresholdPercent"), low,
			fmt.Sprintf("must not be greater than imageGCHighThresholdPercent (%d)", high)))
	}
	if c.ImageMinimumGCAge.Duration < 0 {
		errs = append(errs, field.Invalid(p("imageMinimumGCAge"), c.ImageMinimumGCAge.String(), "must not be negative"))
	}
	if d := c.ImageMaximumGCAge.Duration; d < 0 {
		errs = append(errs, field.Invalid(p("imageMaximumGCAge"), c.ImageMaximumGCAge.String(), "must not be negative"))
	} else if d > 0 && d <= c.ImageMinimumGCAge.Duration {
		errs = append(errs, field.Invalid(p("imageMaximumGCAge"), c.ImageMaximumGCAge.String(),
			"must be greater than imageMinimumGCAge ("+c.ImageMinimumGCAge.String()+")"))
	}
	if c.ImageGCPeriod.Duration <= 0 {
		errs = append(errs, field.Invalid(p("imageGCPeriod"), c.ImageGCPeriod.String(), "must be a positive duration"))
	}

	errs = append(errs, validateEviction(p("evictionSoft"), c.EvictionSoft)...)
	errs = append(errs, validateEviction(p("evictionMinimumReclaim"), c.EvictionMinimumReclaim)...)
	for k, v := range c.EvictionSoftGracePeriod {
		fp := p("evictionSoftGracePeriod").Key(k)
		if !slices.Contains(EvictionSignals, k) {
			errs = append(errs, field.NotSupported(fp, k, EvictionSignals))
			continue
		}
		if d, err := time.ParseDuration(v); err != nil || d < 0 {
			errs = append(errs, field.Invalid(fp, v, "must be a duration such as 1m30s"))
		}
		if _, ok := c.EvictionSoft[k]; !ok {
			errs = append(errs, field.Invalid(fp, v, "has no threshold in evictionSoft"))
		}
	}
	for k := range c.EvictionSoft {
		if _, ok := c.EvictionSoftGracePeriod[k]; !ok && slices.Contains(EvictionSignals, k) {
			errs = append(errs, field.Required(p("evictionSoftGracePeriod").Key(k), "every soft threshold needs a grace period"))
		}
	}
	if c.EvictionMaxPodGracePeriod < 0 {
		errs = append(errs, field.Invalid(p("evictionMaxPodGracePeriod"), c.EvictionMaxPodGracePeriod, "must not be negative"))
	}
	for name, d := range map[string]metav1.Duration{
		"evictionPressureTransitionPeriod": c.EvictionPressureTransitionPeriod,
		"evictionMonitoringInterval":       c.EvictionMonitoringInterval,
	} {
		if d.Duration <= 0 {
			errs = append(errs, field.Invalid(p(name), d.String(), "must be a positive duration"))
		}
	}
	return errs
}

// validateEnforcement checks enforceNodeAllocatable as the kubelet does.
func validateEnforcement(c *NodeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	fp := field.NewPath("enforceNodeAllocatable")
	known := []string{NodeAllocatableEnforcementPods, NodeAllocatableEnforcementSystem, NodeAllocatableEnforcementKube, NodeAllocatableEnforcementNone}
	for i, v := range c.EnforceNodeAllocatable {
		switch {
		case !slices.Contains(known, v):
			errs = append(errs, field.NotSupported(fp.Index(i), v, known))
		case v == NodeAllocatableEnforcementNone && len(c.EnforceNodeAllocatable) > 1:
			errs = append(errs, field.Invalid(fp.Index(i), v, "none must be the only value"))
		case v != NodeAllocatableEnforcementNone && (c.CgroupsPerQOS == nil || !*c.CgroupsPerQOS):
			errs = append(errs, field.Invalid(fp.Index(i), v, "needs cgroupsPerQOS: true"))
		case v == NodeAllocatableEnforcementSystem && c.SystemReservedCgroup == "":
			errs = append(errs, field.Required(field.NewPath("systemReservedCgroup"), "enforceNodeAllocatable has system-reserved"))
		case v == NodeAllocatableEnforcementKube && c.KubeReservedCgroup == "":
			errs = append(errs, field.Required(field.NewPath("kubeReservedCgroup"), "enforceNodeAllocatable has kube-reserved"))
		}
	}
	return errs
}

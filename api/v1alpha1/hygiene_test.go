package v1alpha1

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestHygieneDefaults(t *testing.T) {
	c := valid()
	checks := []struct {
		field string
		got   any
		want  any
	}{
		{"cgroupsPerQOS", *c.CgroupsPerQOS, true},
		{"cgroupDriver", c.CgroupDriver, "cgroupfs"},
		{"podPidsLimit", *c.PodPidsLimit, int64(-1)},
		{"enforceNodeAllocatable", strings.Join(c.EnforceNodeAllocatable, ","), "pods"},
		{"containerLogMaxSize", c.ContainerLogMaxSize, "10Mi"},
		{"containerLogMaxFiles", c.ContainerLogMaxFiles, int32(5)},
		{"containerLogMaxWorkers", c.ContainerLogMaxWorkers, int32(1)},
		{"containerLogMonitorInterval", c.ContainerLogMonitorInterval.Duration, 10 * time.Second},
		{"containerLogLinksDir", *c.ContainerLogLinksDir, "/var/log/containers"},
		{"containerGC.minimumGCAge", c.ContainerGC.MinimumGCAge.Duration, time.Duration(0)},
		{"containerGC.maxPerPodContainer", *c.ContainerGC.MaxPerPodContainer, int32(1)},
		{"containerGC.maxContainers", *c.ContainerGC.MaxContainers, int32(-1)},
		{"containerGC.period", c.ContainerGC.Period.Duration, time.Minute},
		{"imageGCHighThresholdPercent", *c.ImageGCHighThresholdPercent, int32(85)},
		{"imageGCLowThresholdPercent", *c.ImageGCLowThresholdPercent, int32(80)},
		{"imageMinimumGCAge", c.ImageMinimumGCAge.Duration, 2 * time.Minute},
		{"imageMaximumGCAge", c.ImageMaximumGCAge.Duration, time.Duration(0)},
		{"imageGCPeriod", c.ImageGCPeriod.Duration, 5 * time.Minute},
		{"evictionPressureTransitionPeriod", c.EvictionPressureTransitionPeriod.Duration, 5 * time.Minute},
		{"evictionMonitoringInterval", c.EvictionMonitoringInterval.Duration, 10 * time.Second},
		{"localStorageCapacityIsolation", *c.LocalStorageCapacityIsolation, true},
	}
	for _, tc := range checks {
		if tc.got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.field, tc.got, tc.want)
		}
	}
	off := false
	c = &NodeletConfiguration{NodeName: "a", CgroupsPerQOS: &off}
	SetDefaults(c)
	if len(c.EnforceNodeAllocatable) != 0 {
		t.Errorf("enforceNodeAllocatable without cgroupsPerQOS defaulted to %v, want none", c.EnforceNodeAllocatable)
	}
	if errs := Validate(c); len(errs) != 0 {
		t.Errorf("cgroupsPerQOS false with defaults is invalid: %v", errs)
	}
}

func TestValidateHygiene(t *testing.T) {
	off := false
	i32 := func(n int32) *int32 { return &n }
	cases := []struct {
		name      string
		mutate    func(*NodeletConfiguration)
		wantField string // empty: valid
	}{
		{"defaults", func(*NodeletConfiguration) {}, ""},
		{"systemd driver", func(c *NodeletConfiguration) { c.CgroupDriver = "systemd" }, ""},
		{"unknown driver", func(c *NodeletConfiguration) { c.CgroupDriver = "cgroupv3" }, "cgroupDriver"},
		{"pids limit below -1", func(c *NodeletConfiguration) { n := int64(-2); c.PodPidsLimit = &n }, "podPidsLimit"},
		{"unknown enforcement", func(c *NodeletConfiguration) { c.EnforceNodeAllocatable = []string{"everything"} }, "enforceNodeAllocatable[0]"},
		{"none with pods", func(c *NodeletConfiguration) { c.EnforceNodeAllocatable = []string{"pods", "none"} }, "enforceNodeAllocatable[1]"},
		{"pods without QoS cgroups", func(c *NodeletConfiguration) {
			c.CgroupsPerQOS = &off
			c.EnforceNodeAllocatable = []string{"pods"}
		}, "enforceNodeAllocatable[0]"},
		{"system-reserved without its cgroup", func(c *NodeletConfiguration) {
			c.EnforceNodeAllocatable = []string{"pods", "system-reserved"}
		}, "systemReservedCgroup"},
		{"kube-reserved with its cgroup", func(c *NodeletConfiguration) {
			c.EnforceNodeAllocatable = []string{"pods", "kube-reserved"}
			c.KubeReservedCgroup = "/kube.slice"
		}, ""},
		{"log size not a quantity", func(c *NodeletConfiguration) { c.ContainerLogMaxSize = "big" }, "containerLogMaxSize"},
		{"log size tiny", func(c *NodeletConfiguration) { c.ContainerLogMaxSize = "10" }, "containerLogMaxSize"},
		{"one log file", func(c *NodeletConfiguration) { c.ContainerLogMaxFiles = 1 }, "containerLogMaxFiles"},
		{"no log workers", func(c *NodeletConfiguration) { c.ContainerLogMaxWorkers = -1 }, "containerLogMaxWorkers"},
		{"log monitor too fast", func(c *NodeletConfiguration) { c.ContainerLogMonitorInterval.Duration = time.Second }, "containerLogMonitorInterval"},
		{"relative links dir", func(c *NodeletConfiguration) { d := "logs"; c.ContainerLogLinksDir = &d }, "containerLogLinksDir"},
		{"links off", func(c *NodeletConfiguration) { d := ""; c.ContainerLogLinksDir = &d }, ""},
		{"no dead instance kept", func(c *NodeletConfiguration) { c.ContainerGC.MaxPerPodContainer = i32(0) }, "containerGC.maxPerPodContainer"},
		{"max containers below -1", func(c *NodeletConfiguration) { c.ContainerGC.MaxContainers = i32(-3) }, "containerGC.maxContainers"},
		{"negative container age", func(c *NodeletConfiguration) { c.ContainerGC.MinimumGCAge.Duration = -time.Second }, "containerGC.minimumGCAge"},
		{"high threshold over 100", func(c *NodeletConfiguration) { c.ImageGCHighThresholdPercent = i32(101) }, "imageGCHighThresholdPercent"},
		{"low above high", func(c *NodeletConfiguration) { c.ImageGCLowThresholdPercent = i32(90) }, "imageGCLowThresholdPercent"},
		{"image GC off", func(c *NodeletConfiguration) { c.ImageGCHighThresholdPercent = i32(100) }, ""},
		{"maximum age under minimum", func(c *NodeletConfiguration) { c.ImageMaximumGCAge.Duration = time.Minute }, "imageMaximumGCAge"},
		{"maximum age", func(c *NodeletConfiguration) { c.ImageMaximumGCAge.Duration = 24 * time.Hour }, ""},
		{"soft threshold without grace period", func(c *NodeletConfiguration) {
			c.EvictionSoft = map[string]string{"memory.available": "500Mi"}
		}, "evictionSoftGracePeriod[memory.available]"},
		{"soft threshold with grace period", func(c *NodeletConfiguration) {
			c.EvictionSoft = map[string]string{"memory.available": "500Mi"}
			c.EvictionSoftGracePeriod = map[string]string{"memory.available": "1m30s"}
		}, ""},
		{"grace period without soft threshold", func(c *NodeletConfiguration) {
			c.EvictionSoftGracePeriod = map[string]string{"nodefs.available": "1m"}
		}, "evictionSoftGracePeriod[nodefs.available]"},
		{"grace period not a duration", func(c *NodeletConfiguration) {
			c.EvictionSoft = map[string]string{"memory.available": "500Mi"}
			c.EvictionSoftGracePeriod = map[string]string{"memory.available": "soon"}
		}, "evictionSoftGracePeriod[memory.available]"},
		{"unknown reclaim signal", func(c *NodeletConfiguration) {
			c.EvictionMinimumReclaim = map[string]string{"cpu": "1"}
		}, "evictionMinimumReclaim[cpu]"},
		{"negative max pod grace", func(c *NodeletConfiguration) { c.EvictionMaxPodGracePeriod = -1 }, "evictionMaxPodGracePeriod"},
		{"negative transition period", func(c *NodeletConfiguration) {
			c.EvictionPressureTransitionPeriod = metav1.Duration{Duration: -time.Second}
		}, "evictionPressureTransitionPeriod"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mutate(c)
			errs := Validate(c)
			if tc.wantField == "" {
				if len(errs) != 0 {
					t.Fatalf("want valid, got %v", errs)
				}
				return
			}
			for _, e := range errs {
				if e.Field == tc.wantField {
					return
				}
			}
			t.Fatalf("want an error on %s, got %v", tc.wantField, errs)
		})
	}
}

package controller

import (
	"fmt"
	"os"
	goruntime "runtime"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/cgroups"
	"github.com/nodelet/nodelet/internal/executor"
	"github.com/nodelet/nodelet/internal/nodeinfo"
)

// setupPodCgroups makes the kubelet's cgroup tree when cgroupsPerQOS is on
// (kubepods under cgroupRoot, bounded by the node's allocatable when
// enforceNodeAllocatable has pods; its QoS children; the reserved cgroups
// bounded) and gives the executor and housekeeping the manager of the
// pods' cgroups. Off, nothing is made and sandboxes get cgroupRoot as
// their parent.
func setupPodCgroups(mgr ctrl.Manager, cfg *v1alpha1.NodeletConfiguration, exec *executor.Executor, hk *housekeeper) error {
	if cfg.CgroupsPerQOS == nil || !*cfg.CgroupsPerQOS {
		return nil
	}
	opts, err := cgroupOptions(cfg)
	if err != nil {
		return err
	}
	opts.HugePageSizes, opts.MemoryQoS = exec.Resources.HugePageSizes, exec.Resources.MemoryQoS
	opts.Log = mgr.GetLogger().WithName("cgroups")
	m, err := cgroups.New(opts)
	if err != nil {
		return err
	}
	if err := m.Setup(); err != nil {
		return fmt.Errorf("making the pod cgroups under cgroupRoot %q: %w", cfg.CgroupRoot, err)
	}
	exec.Cgroups, hk.cgroups = m, m
	return nil
}

// cgroupOptions reads what the cgroup manager needs of the configuration
// and of the host: the node's capacity (CPUs, memory) less the
// reservations bounds kubepods when enforceNodeAllocatable has pods.
func cgroupOptions(cfg *v1alpha1.NodeletConfiguration) (cgroups.Options, error) {
	opts := cgroups.Options{Driver: cgroups.Driver(cfg.CgroupDriver), Root: cfg.CgroupRoot, Reserved: map[string]corev1.ResourceList{}, CPUQuota: cpuQuota(cfg)}
	if cfg.PodPidsLimit != nil {
		opts.PodPidsLimit = *cfg.PodPidsLimit
	}
	sys, err := nodeinfo.ParseResourceList(cfg.SystemReserved)
	if err != nil {
		return opts, fmt.Errorf("parsing systemReserved: %w", err)
	}
	kube, err := nodeinfo.ParseResourceList(cfg.KubeReserved)
	if err != nil {
		return opts, fmt.Errorf("parsing kubeReserved: %w", err)
	}
	enforce := cfg.EnforceNodeAllocatable
	if slices.Contains(enforce, v1alpha1.NodeAllocatableEnforcementPods) {
		data, err := os.ReadFile("/proc/meminfo")
		if err != nil {
			return opts, fmt.Errorf("reading the node's memory: %w", err)
		}
		mem, err := nodeinfo.ParseMeminfo(data)
		if err != nil {
			return opts, fmt.Errorf("reading the node's memory: %w", err)
		}
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(int64(goruntime.NumCPU()), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(mem.TotalBytes, resource.BinarySI),
		}
		// The huge pages of the default size the node has, as its
		// capacity reports them: kubepods holds no more of them.
		if mem.HugePageSizeBytes > 0 {
			size := resource.NewQuantity(mem.HugePageSizeBytes, resource.BinarySI)
			capacity[corev1.ResourceName(corev1.ResourceHugePagesPrefix+size.String())] =
				*resource.NewQuantity(mem.HugePagesTotal*mem.HugePageSizeBytes, resource.BinarySI)
		}
		opts.Allocatable = cgroups.Allocatable(capacity, sys, kube)
	}
	if slices.Contains(enforce, v1alpha1.NodeAllocatableEnforcementSystem) {
		opts.Reserved[cfg.SystemReservedCgroup] = sys
	}
	if slices.Contains(enforce, v1alpha1.NodeAllocatableEnforcementKube) {
		opts.Reserved[cfg.KubeReservedCgroup] = kube
	}
	return opts, nil
}

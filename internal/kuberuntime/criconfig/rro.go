package criconfig

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// WantsRecursiveReadOnly reports whether one of c's volume mounts asks for
// a recursive read-only mount (IfPossible or Enabled).
func WantsRecursiveReadOnly(c *v1.Container) bool {
	for i := range c.VolumeMounts {
		if m := c.VolumeMounts[i].RecursiveReadOnly; m != nil && *m != v1.RecursiveReadOnlyDisabled {
			return true
		}
	}
	return false
}

// RecursiveReadOnly decides whether vm is mounted read-only recursively
// (every mount below it read-only too), as the kubelet decides: never when
// it asks for nothing or Disabled; IfPossible where the runtime handler
// supports it; Enabled only where it does, an error elsewhere. A mount that
// asks for either must be readOnly and have no propagation but None (the
// API server checks both; a static pod is checked here).
func RecursiveReadOnly(vm *v1.VolumeMount, supported bool) (bool, error) {
	if vm.RecursiveReadOnly == nil || *vm.RecursiveReadOnly == v1.RecursiveReadOnlyDisabled {
		return false, nil
	}
	mode := *vm.RecursiveReadOnly
	if !vm.ReadOnly {
		return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not read-only", vm.Name)
	}
	if vm.MountPropagation != nil && *vm.MountPropagation != v1.MountPropagationNone {
		return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not compatible with propagation %q", vm.Name, *vm.MountPropagation)
	}
	switch mode {
	case v1.RecursiveReadOnlyIfPossible:
		return supported, nil
	case v1.RecursiveReadOnlyEnabled:
		if !supported {
			return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not supported by the runtime", vm.Name)
		}
		return true, nil
	default:
		return false, fmt.Errorf("volume %q: unknown recursive read-only mode %q", vm.Name, mode)
	}
}

// ApplyRecursiveReadOnly marks the CRI mounts of c (found by container
// path) whose volume mounts RecursiveReadOnly resolves to true, given
// whether the pod's runtime handler supports such mounts. The first volume
// mount that cannot be had is the error, and nothing is changed.
func ApplyRecursiveReadOnly(c *v1.Container, mounts []*runtimeapi.Mount, supported bool) error {
	var marked []*runtimeapi.Mount
	for i := range c.VolumeMounts {
		vm := &c.VolumeMounts[i]
		rro, err := RecursiveReadOnly(vm, supported)
		if err != nil {
			return err
		}
		if !rro {
			continue
		}
		found := false
		for _, m := range mounts {
			if m.GetContainerPath() == vm.MountPath {
				marked = append(marked, m)
				found = true
			}
		}
		if !found {
			return fmt.Errorf("volume %q requested recursive read-only mode, but its mount at %s was not made", vm.Name, vm.MountPath)
		}
	}
	for _, m := range marked {
		m.Readonly = true
		m.RecursiveReadOnly = true
	}
	return nil
}

package podspec

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
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

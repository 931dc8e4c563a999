package criconfig

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/podspec"
)

// ApplyRecursiveReadOnly marks the CRI mounts of c (found by container
// path) whose volume mounts podspec.RecursiveReadOnly resolves to true, given
// whether the pod's runtime handler supports such mounts. The first volume
// mount that cannot be had is the error, and nothing is changed.
func ApplyRecursiveReadOnly(c *v1.Container, mounts []*runtimeapi.Mount, supported bool) error {
	var marked []*runtimeapi.Mount
	for i := range c.VolumeMounts {
		vm := &c.VolumeMounts[i]
		rro, err := podspec.RecursiveReadOnly(vm, supported)
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

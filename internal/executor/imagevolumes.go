package executor

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// imageVolumesRefused is the error of a container that mounts an image
// volume on a runtime that cannot mount one: a CreateContainerConfigError,
// never a container started with an empty directory where the image should
// be.
type imageVolumesRefused struct{ runtime string }

func (e *imageVolumesRefused) Error() string {
	return fmt.Sprintf("image volumes need a container runtime that mounts them (containerd 2.1 or later, CRI-O 1.31 or later); %s does not", e.runtime)
}

// imageVolumesOf returns the image volumes c mounts, each once, in the
// order of its volumeMounts.
func imageVolumesOf(pod *v1.Pod, c *v1.Container) []*v1.Volume {
	var out []*v1.Volume
	seen := map[string]bool{}
	for _, vm := range c.VolumeMounts {
		if seen[vm.Name] {
			continue
		}
		for i := range pod.Spec.Volumes {
			vol := &pod.Spec.Volumes[i]
			if vol.Name == vm.Name && vol.Image != nil {
				seen[vm.Name] = true
				out = append(out, vol)
			}
		}
	}
	return out
}

// volumeImageError is a failed pull of an image volume's image.
type volumeImageError struct {
	image string
	err   error
}

func (e *volumeImageError) Error() string { return e.err.Error() }
func (e *volumeImageError) Unwrap() error { return e.err }

// volumeImages makes the images of the image volumes c mounts present, each
// by its volume's pull policy, as the container's own image is made present
// just before, and returns their references by volume name (nil when c
// mounts none). A pull's error is a *volumeImageError that names the image
// and wraps the images package's error, for the container's waiting
// reason; a runtime known not to mount images is refused with
// *imageVolumesRefused before anything is pulled.
func (e *Executor) volumeImages(ctx context.Context, pod *v1.Pod, c *v1.Container, pullSecrets []*v1.Secret, sandboxCfg *runtimeapi.PodSandboxConfig) (map[string]string, error) {
	vols := imageVolumesOf(pod, c)
	if len(vols) == 0 {
		return nil, nil
	}
	// Unknown features (no source, or the runtime did not answer) leave
	// the decision to the runtime.
	if f, err := e.features(ctx); err == nil && !f.ImageVolumes {
		return nil, &imageVolumesRefused{runtime: e.runtimeName(ctx)}
	}
	refs := make(map[string]string, len(vols))
	for _, vol := range vols {
		ref, err := e.Images.EnsureVolumeImage(ctx, pod, c, vol.Image, pullSecrets, sandboxCfg)
		if err != nil {
			return nil, &volumeImageError{image: vol.Image.Reference, err: err}
		}
		refs[vol.Name] = ref
	}
	return refs, nil
}

// runtimeName is "<name> <version>" of the runtime, for messages.
func (e *Executor) runtimeName(ctx context.Context) string {
	v, err := e.Runtime.Version(ctx)
	if err != nil {
		return "the container runtime"
	}
	return v.GetRuntimeName() + " " + v.GetRuntimeVersion()
}

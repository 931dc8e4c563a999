package volume

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
)

const (
	// defaultTerminationMessagePath is the API's default
	// terminationMessagePath.
	defaultTerminationMessagePath = "/dev/termination-log"
	// terminationMessageMode lets a container running as any user write its
	// termination message, as the kubelet allows.
	terminationMessageMode fs.FileMode = 0o666
	etcHostsPath                       = "/etc/hosts"
)

// Mounts returns the CRI mounts of container c of pod for its restartCount-th
// start: one per volumeMount (a subPath is opened inside the volume without
// following links, created if missing, and bind-mounted under the pod
// directory; see subPathMount), the pod's /etc/hosts once WriteEtcHosts wrote it,
// and the termination-message file, which it creates empty (mode 0666) at
// TerminationMessagePath. A subPathExpr is expanded with env, the
// container's resolved environment for this start, and the result is
// mounted exactly as a literal subPath. An image volume is mounted by the
// runtime from images[volume name], the reference the executor pulled it
// as; its subPath goes to the runtime as is. These are errors: a volumeMount
// that names no volume of the pod, a subPathExpr naming a variable that is
// unset or empty, a subPath (literal or expanded) that is absolute or
// contains "..", each with the kubelet's message as it is; a subPath that
// resolves outside its volume. Call it after SetUp, just before creating
// the container.
func (m *Manager) Mounts(pod *v1.Pod, c *v1.Container, restartCount int32, env []criconfig.EnvVar, images map[string]string) ([]*runtimeapi.Mount, error) {
	volumes := make(map[string]*v1.Volume, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		volumes[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	mounts := make([]*runtimeapi.Mount, 0, len(c.VolumeMounts)+2)
	covered := make(map[string]bool, len(c.VolumeMounts))
	for i := range c.VolumeMounts {
		vm := &c.VolumeMounts[i]
		vol, ok := volumes[vm.Name]
		if !ok {
			return nil, fmt.Errorf("cannot find volume %q to mount into container %q", vm.Name, c.Name)
		}
		subPath, err := containerSubPath(vm, env)
		if err != nil {
			return nil, err
		}
		var mnt *runtimeapi.Mount
		if vol.Image != nil {
			mnt, err = imageMount(vol, vm, subPath, images[vol.Name])
		} else {
			mnt, err = m.volumeMount(pod, c.Name, i, vol, vm, subPath)
		}
		if err != nil {
			return nil, fmt.Errorf("mounting volume %q into container %q: %w", vm.Name, c.Name, err)
		}
		mounts = append(mounts, mnt)
		covered[filepath.Clean(vm.MountPath)] = true
	}
	hosts, err := m.etcHostsMount(pod, covered)
	if err != nil {
		return nil, err
	}
	if hosts != nil {
		mounts = append(mounts, hosts)
	}
	term, err := m.terminationMessageMount(pod, c, restartCount, covered)
	if err != nil {
		return nil, err
	}
	if term != nil {
		mounts = append(mounts, term)
	}
	return mounts, nil
}

// containerSubPath returns the path inside the volume that vm mounts for a
// container with environment env: its subPathExpr expanded (which takes
// precedence, as in the kubelet; the API never sets both), else its subPath;
// "" for the whole volume. A path that is absolute or has a ".." component
// is refused here, before anything is opened.
func containerSubPath(vm *v1.VolumeMount, env []criconfig.EnvVar) (string, error) {
	subPath := vm.SubPath
	if vm.SubPathExpr != "" {
		var err error
		if subPath, err = criconfig.ExpandSubPathExpr(vm.SubPathExpr, env); err != nil {
			return "", err
		}
	}
	if subPath == "" {
		return "", nil
	}
	return subPath, checkSubPath(subPath)
}

// volumeMount is the CRI mount of vm, whose subPath (already expanded and
// checked) is subPath.
func (m *Manager) volumeMount(pod *v1.Pod, container string, index int, vol *v1.Volume, vm *v1.VolumeMount, subPath string) (*runtimeapi.Mount, error) {
	vp, err := m.hostVolume(pod, vol)
	if err != nil {
		return nil, err
	}
	if vp.Block {
		return nil, fmt.Errorf("volume %s has volumeMode Block, but is specified in volumeMounts", vol.Name)
	}
	// The runtime mounts the host's path: the volume's own, or the bind
	// mount of its subPath that nodelet makes under the pod directory from
	// where it sees the volume.
	hostPath := vp.Path
	if subPath != "" {
		local, eval := m.hostRoot.volumeSource(vp)
		if hostPath, err = m.subPathMount(m.PodDir(pod.UID), vol.Name, container, index, local, subPath, eval); err != nil {
			return nil, err
		}
	}
	propagation, err := mountPropagation(vm.MountPropagation)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.Mount{
		ContainerPath: vm.MountPath,
		HostPath:      hostPath,
		Readonly:      vm.ReadOnly || vp.ReadOnly,
		Propagation:   propagation,
	}, nil
}

// imageMount is the CRI mount of vm, a mount of the image volume vol whose
// image the runtime knows as ref: always read-only, the image's subPath
// (already expanded and checked) handed to the runtime, which refuses one
// the image does not have.
func imageMount(vol *v1.Volume, vm *v1.VolumeMount, subPath, ref string) (*runtimeapi.Mount, error) {
	if ref == "" {
		return nil, fmt.Errorf("the image of volume %q has not been pulled", vol.Name)
	}
	propagation, err := mountPropagation(vm.MountPropagation)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.Mount{
		ContainerPath: vm.MountPath,
		Readonly:      true,
		Propagation:   propagation,
		Image:         &runtimeapi.ImageSpec{Image: ref, UserSpecifiedImage: vol.Image.Reference},
		ImageSubPath:  subPath,
	}, nil
}

// hostVolume returns what backs vol on the host: for a claim or CSI
// volume, what SetUp resolved it to; for the others, their directory.
func (m *Manager) hostVolume(pod *v1.Pod, vol *v1.Volume) (PodVolume, error) {
	if needsResolution(vol) {
		m.mu.Lock()
		vp, ok := m.setUp[pod.UID].resolved[vol.Name]
		m.mu.Unlock()
		if !ok {
			return PodVolume{}, fmt.Errorf("volume %q is not set up", vol.Name)
		}
		return vp, nil
	}
	path, err := m.volumePath(pod, vol)
	if err != nil {
		return PodVolume{}, err
	}
	return PodVolume{Path: path, Kind: volumeKind(&vol.VolumeSource), ReadOnly: contentVolume(vol)}, nil
}

// PodVolumePaths returns what each volume of the pod is on the host, by
// volume name: its directory, the source that backs it and, for a claim,
// the claim and its PV. A claim or CSI volume is present once SetUp set up
// every volume of the pod (until TearDown); the others always are.
// Volumes nodelet does not support are left out.
func (m *Manager) PodVolumePaths(pod *v1.Pod) map[string]PodVolume {
	out := make(map[string]PodVolume, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if vp, err := m.hostVolume(pod, vol); err == nil {
			out[vol.Name] = vp
		}
	}
	return out
}

// volumeKind names the source of a volume nodelet backs by a directory of
// its own or the host's.
func volumeKind(src *v1.VolumeSource) string {
	switch {
	case src.HostPath != nil:
		return KindHostPath
	case src.EmptyDir != nil:
		return KindEmptyDir
	case src.ConfigMap != nil:
		return KindConfigMap
	case src.Secret != nil:
		return KindSecret
	case src.DownwardAPI != nil:
		return KindDownwardAPI
	case src.Projected != nil:
		return KindProjected
	default:
		return sourceKind(src)
	}
}

// volumePath returns the host path that backs vol.
func (m *Manager) volumePath(pod *v1.Pod, vol *v1.Volume) (string, error) {
	src := &vol.VolumeSource
	switch {
	case src.HostPath != nil:
		return src.HostPath.Path, nil
	case src.EmptyDir != nil:
		return m.volumeDir(pod.UID, emptyDirPlugin, vol.Name), nil
	case src.ConfigMap != nil:
		return m.volumeDir(pod.UID, configMapPlugin, vol.Name), nil
	case src.Secret != nil:
		return m.volumeDir(pod.UID, secretPlugin, vol.Name), nil
	case src.DownwardAPI != nil:
		return m.volumeDir(pod.UID, downwardAPIPlugin, vol.Name), nil
	case src.Projected != nil:
		return m.volumeDir(pod.UID, projectedPlugin, vol.Name), nil
	case src.Image != nil:
		return "", fmt.Errorf("image volume %q has no directory on the host: the runtime mounts it", vol.Name)
	default:
		return "", fmt.Errorf("volume source %s is not supported by nodelet", sourceKind(src))
	}
}

// contentVolume reports whether nodelet writes vol's content; such volumes
// are always mounted read-only, as the kubelet mounts them.
func contentVolume(vol *v1.Volume) bool {
	src := &vol.VolumeSource
	return src.ConfigMap != nil || src.Secret != nil || src.DownwardAPI != nil || src.Projected != nil
}

func mountPropagation(mode *v1.MountPropagationMode) (runtimeapi.MountPropagation, error) {
	if mode == nil {
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	}
	switch *mode {
	case v1.MountPropagationNone:
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	case v1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER, nil
	case v1.MountPropagationBidirectional:
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL, nil
	default:
		return 0, fmt.Errorf("invalid mountPropagation %q", *mode)
	}
}

// TerminationMessagePath returns the host file that holds the termination
// message of the restartCount-th start of the named container.
func (m *Manager) TerminationMessagePath(pod *v1.Pod, containerName string, restartCount int32) string {
	return filepath.Join(m.PodDir(pod.UID), containersDirName, containerName, strconv.FormatInt(int64(restartCount), 10))
}

// terminationMessageMount creates an empty termination-message file and
// mounts it at the container's terminationMessagePath, unless a volumeMount
// already uses that path.
func (m *Manager) terminationMessageMount(pod *v1.Pod, c *v1.Container, restartCount int32, covered map[string]bool) (*runtimeapi.Mount, error) {
	target := c.TerminationMessagePath
	if target == "" {
		target = defaultTerminationMessagePath
	}
	if covered[filepath.Clean(target)] {
		return nil, nil
	}
	path := m.TerminationMessagePath(pod, c.Name, restartCount)
	if err := createTerminationFile(path); err != nil {
		return nil, fmt.Errorf("creating termination message file of container %q: %w", c.Name, err)
	}
	return &runtimeapi.Mount{ContainerPath: target, HostPath: path}, nil
}

// createTerminationFile creates an empty file at path that any user may
// write, with its missing parent directories.
func createTerminationFile(path string) error {
	if _, err := makeDir(filepath.Dir(path), stateDirMode); err != nil {
		return err
	}
	return writeFileMode(path, nil, terminationMessageMode)
}

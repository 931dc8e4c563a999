package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/mount-utils"
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
// start: one per volumeMount (with subPath resolved inside the volume and
// created if missing), the pod's /etc/hosts once WriteEtcHosts wrote it,
// and the termination-message file, which it creates empty (mode 0666) at
// TerminationMessagePath. A volumeMount that names no volume of the pod, or a
// subPath that is absolute, contains "..", or resolves outside its volume is
// an error. Call it after SetUp, just before creating the container.
func (m *Manager) Mounts(pod *v1.Pod, c *v1.Container, restartCount int32) ([]*runtimeapi.Mount, error) {
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
		mnt, err := m.volumeMount(pod, vol, vm)
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

func (m *Manager) volumeMount(pod *v1.Pod, vol *v1.Volume, vm *v1.VolumeMount) (*runtimeapi.Mount, error) {
	if vm.SubPathExpr != "" {
		return nil, errors.New("subPathExpr is not supported by nodelet")
	}
	if vm.RecursiveReadOnly != nil && *vm.RecursiveReadOnly == v1.RecursiveReadOnlyEnabled {
		return nil, errors.New("recursiveReadOnly Enabled is not supported by nodelet")
	}
	hostPath, err := m.volumePath(pod, vol)
	if err != nil {
		return nil, err
	}
	if vm.SubPath != "" {
		if hostPath, err = prepareSubPath(hostPath, vm.SubPath); err != nil {
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
		Readonly:      vm.ReadOnly || contentVolume(vol),
		Propagation:   propagation,
	}, nil
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

// prepareSubPath returns the host path of subPath inside the volume at
// volumePath, with links resolved so that the runtime mounts what was
// checked. A missing subPath is created as a directory with the volume's
// mode, as the kubelet does.
func prepareSubPath(volumePath, subPath string) (string, error) {
	if filepath.IsAbs(subPath) {
		return "", fmt.Errorf("subPath %q must not be an absolute path", subPath)
	}
	if slices.Contains(strings.Split(filepath.ToSlash(subPath), "/"), "..") {
		return "", fmt.Errorf("subPath %q must not contain '..'", subPath)
	}
	root, err := filepath.EvalSymlinks(volumePath)
	if err != nil {
		return "", fmt.Errorf("resolving volume path: %w", err)
	}
	full := filepath.Join(root, subPath)
	if _, err := os.Lstat(full); errors.Is(err, fs.ErrNotExist) {
		if err := makeSubPathDir(root, subPath); err != nil {
			return "", err
		}
	}
	resolved, err := filepath.EvalSymlinks(full)
	if err != nil {
		return "", fmt.Errorf("resolving subPath %q: %w", subPath, err)
	}
	if !mount.PathWithinBase(resolved, root) {
		return "", fmt.Errorf("subPath %q resolves outside the volume", subPath)
	}
	return resolved, nil
}

// makeSubPathDir creates the missing directories of subPath under root. The
// part that exists is resolved first and must stay inside root, so a link
// planted in the volume cannot make nodelet create directories elsewhere.
func makeSubPathDir(root, subPath string) error {
	info, err := os.Stat(root)
	if err != nil {
		return fmt.Errorf("reading volume mode: %w", err)
	}
	perm := info.Mode().Perm()
	existing, missing := root, strings.Split(filepath.Clean(subPath), string(filepath.Separator))
	for len(missing) > 0 {
		next := filepath.Join(existing, missing[0])
		if _, err := os.Lstat(next); err != nil {
			break
		}
		existing, missing = next, missing[1:]
	}
	base, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return fmt.Errorf("resolving subPath %q: %w", subPath, err)
	}
	if !mount.PathWithinBase(base, root) {
		return fmt.Errorf("subPath %q resolves outside the volume", subPath)
	}
	for _, name := range missing {
		base = filepath.Join(base, name)
		if err := os.Mkdir(base, perm); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("creating subPath %q: %w", subPath, err)
		}
		if err := os.Chmod(base, perm); err != nil {
			return fmt.Errorf("creating subPath %q: %w", subPath, err)
		}
	}
	return nil
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

func createTerminationFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), stateDirMode); err != nil {
		return err
	}
	if err := os.WriteFile(path, nil, terminationMessageMode); err != nil {
		return err
	}
	return os.Chmod(path, terminationMessageMode)
}

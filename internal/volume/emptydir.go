package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/internal/cgroups"
)

// emptyDirMode is the mode the kubelet gives an emptyDir, so that containers
// running as any user can write to it.
const emptyDirMode fs.FileMode = 0o777

// ErrMountNotPermitted is wrapped by the error of a memory-backed volume
// that could not be mounted because nodelet lacks the privilege to mount.
var ErrMountNotPermitted = errors.New("mounting tmpfs is not permitted: memory-backed volumes need nodelet to run as root (CAP_SYS_ADMIN)")

// readyFileName marks a volume whose set-up is complete, in the volume's
// metadata directory (the kubelet's layout: pods/<uid>/plugins/<plugin>/<name>).
const readyFileName = "ready"

// setUpEmptyDir creates the emptyDir's directory, on tmpfs for medium
// Memory, and hands it to the pod's fsGroup once: a ready marker beside it
// (never inside, where containers write) records that the set-up is done,
// so that a restarted nodelet adopting a running pod does not walk the
// volume again and undo the modes its containers chose.
func (m *Manager) setUpEmptyDir(pod *v1.Pod, name string, src *v1.EmptyDirVolumeSource) error {
	dir := m.volumeDir(pod.UID, emptyDirPlugin, name)
	ready := filepath.Join(m.pluginMetaDir(pod.UID, emptyDirPlugin, name), readyFileName)
	done := fileExists(ready)
	if !done {
		if err := os.MkdirAll(dir, emptyDirMode); err != nil {
			return fmt.Errorf("creating emptyDir directory: %w", err)
		}
	} else if _, err := os.Lstat(dir); err != nil {
		// Marked ready but gone: set it up again.
		done = false
		if err := os.MkdirAll(dir, emptyDirMode); err != nil {
			return fmt.Errorf("creating emptyDir directory: %w", err)
		}
	}
	switch src.Medium {
	case v1.StorageMediumDefault:
	case v1.StorageMediumMemory:
		mounted, err := m.mounter.IsMountPoint(dir)
		if err != nil {
			return fmt.Errorf("checking whether %s is a mount point: %w", dir, err)
		}
		if !mounted {
			// A fresh file system: whatever was set up before is gone.
			done = false
			if err := m.ensureTmpfs(dir, m.memoryVolumeSize(pod, src.SizeLimit)); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("emptyDir medium %q is not supported by nodelet", src.Medium)
	}
	if done {
		return nil
	}
	if err := setEmptyDirOwnership(dir, pod); err != nil {
		return err
	}
	return markReady(ready)
}

// markReady writes the ready marker at path.
func markReady(path string) error {
	if err := mkdirMode(filepath.Dir(path), stateDirMode); err != nil {
		return fmt.Errorf("creating volume metadata directory: %w", err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		return fmt.Errorf("marking volume set up: %w", err)
	}
	return nil
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// setEmptyDirOwnership gives the emptyDir mode 0777 whatever the umask and,
// when the pod has an fsGroup, hands it and its content to that group as the
// kubelet does (setVolumeOwnership, honouring fsGroupChangePolicy), so that
// files created in it inherit the group. Without the privilege to change
// groups (nodelet not root) the group is left as it is.
func setEmptyDirOwnership(dir string, pod *v1.Pod) error {
	if err := os.Chmod(dir, emptyDirMode); err != nil {
		return fmt.Errorf("setting mode of emptyDir directory: %w", err)
	}
	gid := fsGroup(pod)
	if gid == nil {
		return nil
	}
	err := setVolumeOwnership(dir, *gid, pod.Spec.SecurityContext.FSGroupChangePolicy)
	if errors.Is(err, syscall.EPERM) {
		return nil
	}
	return err
}

// memoryVolumeSize is the size of a memory-backed emptyDir's tmpfs, as the
// kubelet sizes it: the node's allocatable memory, or the pod's memory
// limit when that is smaller, or the volume's sizeLimit when that is
// smaller still. Without one the tmpfs gets the host's default size (half
// the machine's memory), which a pod's own limit may well exceed.
func (m *Manager) memoryVolumeSize(pod *v1.Pod, sizeLimit *resource.Quantity) *resource.Quantity {
	var allocatable *resource.Quantity
	if m.nodeAllocatable != nil {
		if alloc, err := m.nodeAllocatable(); err == nil {
			if q, ok := alloc[v1.ResourceMemory]; ok {
				allocatable = &q
			}
		}
	}
	var podLimit *resource.Quantity
	if n, ok := cgroups.PodMemoryLimit(pod); ok {
		podLimit = resource.NewQuantity(n, resource.BinarySI)
	}
	return smallestSize(allocatable, podLimit, sizeLimit)
}

// smallestSize is the smallest positive one of sizes, nil when none is.
func smallestSize(sizes ...*resource.Quantity) *resource.Quantity {
	var out *resource.Quantity
	for _, s := range sizes {
		if s != nil && s.Sign() > 0 && (out == nil || s.Cmp(*out) < 0) {
			out = s
		}
	}
	return out
}

// ensureTmpfs mounts a tmpfs on dir unless one is already mounted there,
// limited to size when it is set.
func (m *Manager) ensureTmpfs(dir string, size *resource.Quantity) error {
	mounted, err := m.mounter.IsMountPoint(dir)
	if err != nil {
		return fmt.Errorf("checking whether %s is a mount point: %w", dir, err)
	}
	if mounted {
		return nil
	}
	var opts []string
	if size != nil && size.Sign() > 0 {
		opts = append(opts, "size="+strconv.FormatInt(size.Value(), 10))
	}
	if err := m.mounter.MountSensitiveWithoutSystemd("tmpfs", dir, "tmpfs", opts, nil); err != nil {
		if isPermissionError(err) {
			return fmt.Errorf("mounting tmpfs at %s: %w (%w)", dir, ErrMountNotPermitted, err)
		}
		return fmt.Errorf("mounting tmpfs at %s: %w", dir, err)
	}
	return nil
}

// isPermissionError reports whether a mount failed for lack of privilege:
// an errno from the system call, or words of mount(8)'s output when the
// mounter runs it.
func isPermissionError(err error) bool {
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		return true
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "permission denied") ||
		strings.Contains(msg, "must be superuser") ||
		strings.Contains(msg, "only root can")
}

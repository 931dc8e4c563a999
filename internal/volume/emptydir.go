package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// emptyDirMode is the mode the kubelet gives an emptyDir, so that containers
// running as any user can write to it.
const emptyDirMode fs.FileMode = 0o777

// ErrMountNotPermitted is wrapped by the error of a memory-backed volume
// that could not be mounted because nodelet lacks the privilege to mount.
var ErrMountNotPermitted = errors.New("mounting tmpfs is not permitted: memory-backed volumes need nodelet to run as root (CAP_SYS_ADMIN)")

// setUpEmptyDir creates the emptyDir's directory, on tmpfs for medium Memory.
func (m *Manager) setUpEmptyDir(pod *v1.Pod, name string, src *v1.EmptyDirVolumeSource) error {
	dir := m.volumeDir(pod.UID, emptyDirPlugin, name)
	if err := os.MkdirAll(dir, emptyDirMode); err != nil {
		return fmt.Errorf("creating emptyDir directory: %w", err)
	}
	switch src.Medium {
	case v1.StorageMediumDefault:
	case v1.StorageMediumMemory:
		if err := m.ensureTmpfs(dir, src.SizeLimit); err != nil {
			return err
		}
	default:
		return fmt.Errorf("emptyDir medium %q is not supported by nodelet", src.Medium)
	}
	return setEmptyDirOwnership(dir, pod)
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

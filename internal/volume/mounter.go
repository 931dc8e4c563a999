package volume

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/mount-utils"
)

// sysMounter is the host's mounter with the operations nodelet uses to
// change mounts (tmpfs, bind mounts, unmount) done by system calls instead
// of mount(8) and umount(8), so
// nodelet needs no mount binaries (its image has none). Listing and
// mount-point checks read /proc, as mount-utils does.
type sysMounter struct {
	mount.Interface
}

func newSysMounter() mount.Interface { return sysMounter{Interface: mount.New("")} }

// MountSensitiveWithoutSystemd mounts source of type fstype on target with
// the comma-joined options as data (tmpfs size=...).
func (sysMounter) MountSensitiveWithoutSystemd(source, target, fstype string, options, sensitiveOptions []string) error {
	data := strings.Join(append(append([]string{}, options...), sensitiveOptions...), ",")
	if err := unix.Mount(source, target, fstype, 0, data); err != nil {
		// Sensitive options stay out of the error.
		return fmt.Errorf("mount -t %s %s %s: %w", fstype, source, target, err)
	}
	return nil
}

// Mount supports bind mounts only (options "bind" and optionally "ro"):
// what nodelet mounts besides tmpfs. A read-only bind is remounted
// read-only, as mount(8) does.
func (sysMounter) Mount(source, target, fstype string, options []string) error {
	bind, ro := false, false
	for _, o := range options {
		switch o {
		case "bind":
			bind = true
		case "ro":
			ro = true
		case "rw":
		default:
			return fmt.Errorf("mount %s %s: option %q is not supported by nodelet's mounter", source, target, o)
		}
	}
	if !bind || fstype != "" {
		return fmt.Errorf("mount %s %s: only bind mounts are supported by nodelet's mounter", source, target)
	}
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("mount --bind %s %s: %w", source, target, err)
	}
	if ro {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			_ = unix.Unmount(target, unix.UMOUNT_NOFOLLOW)
			return fmt.Errorf("remounting %s read-only: %w", target, err)
		}
	}
	return nil
}

// Unmount unmounts target without following a link there.
func (sysMounter) Unmount(target string) error {
	if err := unix.Unmount(target, unix.UMOUNT_NOFOLLOW); err != nil {
		return fmt.Errorf("umount %s: %w", target, err)
	}
	return nil
}

package volume

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/mount-utils"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/internal/nomount"
)

// TearDown unpublishes the pod's CSI volumes (CSI.UnpublishPod; if that
// fails it stops there and returns the error), unmounts every mount under
// the pod's directory (the bind mounts of subPaths and local PVs, the tmpfs
// of memory-backed volumes) and removes the directory, forgetting the pod's
// tokens. If an unmount fails, nothing is removed, so the content of a
// mounted file system is never deleted through it; nor is one that was
// mounted after the listing: the removal stops at any mount point
// (nomount.RemoveAll). It needs only the UID, so
// it also cleans up after pods the API server no longer has (ListPodDirs);
// it is idempotent. Call it after all of the pod's containers and its
// sandbox are gone.
func (m *Manager) TearDown(ctx context.Context, uid types.UID) error {
	if uid == "" {
		return errors.New("tearing down volumes: pod UID is empty")
	}
	defer m.locks.Lock(string(uid))()

	m.forgetSetUp(uid)
	dir := m.PodDir(uid)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		m.tokens.forget(uid)
		m.podCerts.forget(uid)
		return nil
	}
	if m.csi != nil {
		// The drivers unpublish first: nothing of a published volume may
		// be removed through its mount.
		if err := m.csi.UnpublishPod(ctx, uid); err != nil {
			return fmt.Errorf("unpublishing CSI volumes of pod %s: %w", uid, err)
		}
	}
	if err := tearDownSubPaths(dir); err != nil {
		return fmt.Errorf("tearing down subPath mounts of pod %s: %w", uid, err)
	}
	if err := m.removePodDir(uid, dir); err != nil {
		return err
	}
	m.tokens.forget(uid)
	m.podCerts.forget(uid)
	log.FromContext(ctx).V(1).Info("Removed pod volumes", "podUID", uid)
	return nil
}

// removePodDir unmounts every mount under the directory dir of pod uid and
// removes it. With removeFirst it unmounts the volume directories that are
// mount roots (the tmpfs of tokens, secrets and memory-backed volumes, the
// bind mounts of local volumes) and tries the removal, which stops at any
// other mount point, and reads the mount table only when it did: the table
// grows with the node's pods, and a teardown of all of them read it once
// each.
func (m *Manager) removePodDir(uid types.UID, dir string) error {
	if m.removeFirst {
		if err := m.unmountVolumeRoots(dir); err != nil {
			return fmt.Errorf("tearing down volumes of pod %s: %w", uid, err)
		}
		err := nomount.RemoveAll(dir)
		if err == nil {
			return nil
		}
		if !errors.Is(err, nomount.ErrMountPoint) {
			return fmt.Errorf("removing directory of pod %s: %w", uid, err)
		}
	}
	if err := m.unmountUnder(dir); err != nil {
		return fmt.Errorf("tearing down volumes of pod %s: %w", uid, err)
	}
	if err := nomount.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing directory of pod %s: %w", uid, err)
	}
	return nil
}

// maxStackedMounts bounds the mounts unmountVolumeRoots takes off one
// volume directory.
const maxStackedMounts = 8

// unmountVolumeRoots unmounts each of the pod's volume directories
// (volumes/<plugin>/<name>) that is the root of a mount, as nodelet mounts
// a memory-backed volume's tmpfs or a local volume's bind mount, with no
// mount table: a mount anywhere else stops the removal that follows, which
// then reads the table.
func (m *Manager) unmountVolumeRoots(dir string) error {
	vols, err := filepath.Glob(filepath.Join(dir, volumesDirName, "*", "*"))
	if err != nil {
		return fmt.Errorf("listing volume directories: %w", err)
	}
	for _, v := range vols {
		for range maxStackedMounts {
			root, err := isMountRoot(v)
			if err != nil || !root {
				break
			}
			if err := m.mounter.Unmount(v); err != nil {
				return fmt.Errorf("unmounting %s: %w", v, err)
			}
		}
	}
	return nil
}

// isMountRoot reports whether path, not followed if a link, is the root of
// a mount (Linux 5.8's STATX_ATTR_MOUNT_ROOT).
func isMountRoot(path string) (bool, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, unix.STATX_TYPE, &st); err != nil {
		return false, &fs.PathError{Op: "statx", Path: path, Err: err}
	}
	return st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
}

// statxSeesMountRoots reports whether the kernel says which paths are mount
// roots (Linux 5.8).
func statxSeesMountRoots() bool {
	var st unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, "/", unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, unix.STATX_TYPE, &st)
	return err == nil && st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0
}

// unmountUnder unmounts every mount point at or below dir, deepest first.
func (m *Manager) unmountUnder(dir string) error {
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", dir, err)
	}
	mps, err := m.mounts.List()
	if err != nil {
		return fmt.Errorf("listing mounts: %w", err)
	}
	var targets []string
	for _, mp := range mps {
		// Only a path with one of the two as prefix can be within it:
		// filepath.Rel, which PathWithinBase calls, allocates for every
		// entry of a table that grows with the pods.
		if p := filepath.Clean(mp.Path); !strings.HasPrefix(p, resolved) && !strings.HasPrefix(p, filepath.Clean(dir)) {
			continue
		}
		if mount.PathWithinBase(mp.Path, resolved) || mount.PathWithinBase(mp.Path, dir) {
			targets = append(targets, mp.Path)
		}
	}
	// Deepest first; a path listed twice has stacked mounts and is
	// unmounted twice.
	slices.SortStableFunc(targets, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	for _, t := range targets {
		if err := m.mounter.Unmount(t); err != nil {
			return fmt.Errorf("unmounting %s: %w", t, err)
		}
	}
	return nil
}

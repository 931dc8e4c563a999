package volume

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// The bits the kubelet adds for an fsGroup: group read-write on every entry
// of a writable volume, and on directories also group execute and setgid, so
// that what containers create inherits the group.
const (
	groupRWBits   = 0o660
	groupExecBits = 0o110
)

// setVolumeOwnership hands a writable volume to the pod's fsGroup as the
// kubelet does: every entry gets the group and group read-write,
// directories also group execute and setgid; symbolic links get the group
// only and are never followed. With fsGroupChangePolicy OnRootMismatch
// nothing is walked when the root already has the group and the bits.
//
// Containers may be writing to the volume meanwhile, so the walk never uses
// a path twice: each entry is opened relative to its parent's descriptor
// without following links, and changed through that descriptor. An entry
// swapped for a link mid-walk is changed as a link (group only), never
// followed out of the volume.
func setVolumeOwnership(dir string, gid int64, policy *v1.PodFSGroupChangePolicy) error {
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening volume for its fsGroup: %w", err)
	}
	defer unix.Close(root)
	if policy != nil && *policy == v1.FSGroupChangeOnRootMismatch {
		var st unix.Stat_t
		if err := unix.Fstat(root, &st); err != nil {
			return fmt.Errorf("reading volume ownership: %w", err)
		}
		want := uint32(groupRWBits | groupExecBits | unix.S_ISGID)
		if int64(st.Gid) == gid && st.Mode&want == want {
			return nil
		}
	}
	if err := fixEntry(root, true, int(gid)); err != nil {
		return fmt.Errorf("setting fsGroup on the volume root: %w", err)
	}
	return walkOwnership(root, int(gid))
}

// SetVolumeOwnership hands the writable volume mounted at dir to the group
// gid as setVolumeOwnership does, for volumes set up outside this package
// (CSI volumes a driver published).
func SetVolumeOwnership(dir string, gid int64, policy *v1.PodFSGroupChangePolicy) error {
	return setVolumeOwnership(dir, gid, policy)
}

// walkOwnership fixes every entry below the open directory dirFD.
func walkOwnership(dirFD int, gid int) error {
	names, err := readDirNames(dirFD)
	if err != nil {
		return err
	}
	for _, name := range names {
		fd, isDir, err := openEntry(dirFD, name)
		if errors.Is(err, unix.ENOENT) {
			continue // removed by a container meanwhile
		}
		if err != nil {
			return fmt.Errorf("opening %q: %w", name, err)
		}
		err = fixEntry(fd, isDir, gid)
		if err == nil && isDir {
			err = walkOwnership(fd, gid)
		}
		_ = unix.Close(fd)
		if err != nil {
			return fmt.Errorf("setting fsGroup on %q: %w", name, err)
		}
	}
	return nil
}

// openEntry opens name in dirFD without following it: a readable
// descriptor for a directory, an O_PATH one for anything else (a FIFO must
// not be opened for reading).
func openEntry(dirFD int, name string) (fd int, isDir bool, err error) {
	fd, err = unix.Openat(dirFD, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err == nil {
		return fd, true, nil
	}
	if !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ELOOP) {
		return -1, false, err
	}
	fd, err = unix.Openat(dirFD, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	return fd, false, err
}

// fixEntry sets the group and the group bits of the open entry fd; a
// symbolic link gets the group only, as its mode means nothing.
func fixEntry(fd int, isDir bool, gid int) error {
	if err := unix.Fchownat(fd, "", -1, gid, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("changing group: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return nil
	}
	mode := st.Mode&0o7777 | groupRWBits
	if isDir {
		mode |= groupExecBits | unix.S_ISGID
	}
	if mode == st.Mode&0o7777 {
		return nil
	}
	// chmod through the descriptor's /proc link changes the opened inode,
	// whatever its path has become.
	if err := unix.Chmod(fdPath(fd), mode); err != nil {
		return fmt.Errorf("changing mode: %w", err)
	}
	return nil
}

// readDirNames lists the directory open at dirFD without consuming dirFD.
func readDirNames(dirFD int) ([]string, error) {
	dup, err := unix.Dup(dirFD)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "volume-dir")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("listing directory: %w", err)
	}
	return names, nil
}

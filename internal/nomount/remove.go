package nomount

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrMountPoint is returned (wrapped, with the path) when RemoveAll meets
// a mount point: nothing at or below it was removed.
var ErrMountPoint = errors.New("is a mount point")

// openat2 is unix.Openat2; tests replace it to take the path of kernels
// without it.
var openat2 = unix.Openat2

// readBatch is how many entries a directory read returns at a time.
const readBatch = 1024

// RemoveAll removes path and everything below it, as os.RemoveAll does,
// but never crosses into a mount: when path itself or anything below it is
// a mount point (of another file system or a bind mount of the same one),
// it stops with an error wrapping ErrMountPoint. Symbolic links are removed,
// never followed. A path that does not exist is no error.
func RemoveAll(path string) error {
	if path == "" || path == "." || path == ".." || filepath.Base(path) == "." || filepath.Base(path) == ".." {
		return fmt.Errorf("removing %q: not a removable path", path)
	}
	path = filepath.Clean(path)
	parent, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return &fs.PathError{Op: "open", Path: filepath.Dir(path), Err: err}
	}
	defer unix.Close(parent)
	return removeEntry(parent, filepath.Base(path), path)
}

// removeEntry removes name in the directory dirfd (shown as path in
// errors) and, when it is a directory, everything below it.
func removeEntry(dirfd int, name, path string) error {
	unlinkErr := unix.Unlinkat(dirfd, name, 0)
	switch {
	case unlinkErr == nil, errors.Is(unlinkErr, unix.ENOENT):
		return nil
	case errors.Is(unlinkErr, unix.EBUSY):
		return fmt.Errorf("removing %s: %w", path, ErrMountPoint)
	case !errors.Is(unlinkErr, unix.EISDIR) && !errors.Is(unlinkErr, unix.EPERM):
		return &fs.PathError{Op: "unlink", Path: path, Err: unlinkErr}
	}
	fd, err := openBeneath(dirfd, name)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.EXDEV):
		return fmt.Errorf("removing %s: %w", path, ErrMountPoint)
	case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
		// Not a directory: unlink refused it for a reason of its own.
		return &fs.PathError{Op: "unlink", Path: path, Err: unlinkErr}
	case err != nil:
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	if err := removeContent(fd, path); err != nil {
		return err
	}
	err = unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
	switch {
	case err == nil, errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.EBUSY):
		return fmt.Errorf("removing %s: %w", path, ErrMountPoint)
	default:
		return &fs.PathError{Op: "rmdir", Path: path, Err: err}
	}
}

// removeContent removes every entry of the directory fd, which it closes.
func removeContent(fd int, path string) error {
	dir := os.NewFile(uintptr(fd), path)
	defer dir.Close()
	for {
		names, err := dir.Readdirnames(readBatch)
		if len(names) == 0 {
			if err == nil || errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading %s: %w", path, err)
		}
		for _, n := range names {
			if err := removeEntry(fd, n, filepath.Join(path, n)); err != nil {
				return err
			}
		}
		// Entries were removed: read the directory from its start again,
		// so that none is skipped.
		if _, err := dir.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("rewinding %s: %w", path, err)
		}
	}
}

// openBeneath opens the directory name in dirfd without following a
// symbolic link and, where the kernel has openat2 (Linux 5.6), without
// crossing a mount point (EXDEV). On older kernels a mount of another file
// system is still refused, by its device number; a bind mount of the
// same file system is not seen there.
func openBeneath(dirfd int, name string) (int, error) {
	how := &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	}
	fd, err := openat2(dirfd, name, how)
	if !errors.Is(err, unix.ENOSYS) {
		return fd, err
	}
	fd, err = unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	var parent, child unix.Stat_t
	if err := unix.Fstat(dirfd, &parent); err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	if err := unix.Fstat(fd, &child); err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	if parent.Dev != child.Dev {
		_ = unix.Close(fd)
		return -1, unix.EXDEV
	}
	return fd, nil
}

// SeesBindMounts reports whether RemoveAll stops at every mount point here,
// bind mounts of the same file system included: whether the kernel has
// openat2 (Linux 5.6). Without it only mounts of other file systems stop
// it, so callers that rely on RemoveAll to find a mount must read the
// mount table instead. It asks the kernel at each call.
func SeesBindMounts() bool {
	fd, err := openat2(unix.AT_FDCWD, "/", &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC})
	if err != nil {
		return false
	}
	_ = unix.Close(fd)
	return true
}

package containerlogs

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// noOpenat2 is set once the kernel answered openat2 with ENOSYS (Linux
// before 5.6) or a seccomp filter with EPERM: the size checks take the
// os.Root path from then on. Tests set it to take that path.
var noOpenat2 atomic.Bool

// openat2 is unix.Openat2; tests replace it to take the path of kernels
// without it.
var openat2 = unix.Openat2

// beneathNoLinks is how lstatat2 opens a path: for an fstat, below the
// directory, without following a link in any component. Never written:
// a shared value spares an allocation per open.
var beneathNoLinks = unix.OpenHow{
	Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
	Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
}

// openRetries bounds the lookups one size check tries when the kernel
// asks for another (EAGAIN, EINTR).
const openRetries = 4

// logsDir is the pod log directory opened for the size checks of one
// Sync: one openat2 and one fstat per log where the kernel has openat2,
// else an os.Root, which opens each component of the path in turn.
type logsDir struct {
	// dir is the directory's path.
	dir string
	// fd is the directory opened with O_PATH, or -1 with root set.
	fd   int
	root *os.Root
}

// openLogsDir opens the pod log directory dir for size checks.
func openLogsDir(dir string) (*logsDir, error) {
	if noOpenat2.Load() {
		root, err := os.OpenRoot(dir)
		if err != nil {
			return nil, fmt.Errorf("opening the pod log directory: %w", err)
		}
		return &logsDir{dir: dir, fd: -1, root: root}, nil
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the pod log directory: %w", &os.PathError{Op: "open", Path: dir, Err: err})
	}
	return &logsDir{dir: dir, fd: fd}, nil
}

// Close closes the directory.
func (d *logsDir) Close() error {
	if d.root != nil {
		return d.root.Close()
	}
	return unix.Close(d.fd)
}

// lstat returns whether rel, a clean relative path below the directory,
// is a regular file, and its size. No link is followed, in any component
// of rel: a link, or a path through one, is not a regular file, or an
// error. The os.Root path, for kernels without openat2, follows the links
// of the directories of rel that stay below the directory. An error for
// which errors.Is(err, fs.ErrNotExist) holds says there is nothing at rel.
func (d *logsDir) lstat(rel string) (regular bool, size int64, err error) {
	if d.root == nil {
		regular, size, err = d.lstatat2(rel)
		if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
			return regular, size, err
		}
		noOpenat2.Store(true)
		root, err := os.OpenRoot(d.dir)
		if err != nil {
			return false, 0, fmt.Errorf("opening the pod log directory: %w", err)
		}
		_ = unix.Close(d.fd)
		d.fd, d.root = -1, root
	}
	fi, err := d.root.Lstat(rel)
	if err != nil {
		return false, 0, err
	}
	return fi.Mode().IsRegular(), fi.Size(), nil
}

// lstatat2 is lstat with one openat2 that resolves rel beneath the
// directory, refusing every link, and an fstat of what it opened.
func (d *logsDir) lstatat2(rel string) (regular bool, size int64, err error) {
	fd := -1
	for range openRetries {
		fd, err = openat2(d.fd, rel, &beneathNoLinks)
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return false, 0, &os.PathError{Op: "openat2", Path: rel, Err: err}
	}
	defer func() { _ = unix.Close(fd) }()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, 0, &os.PathError{Op: "fstat", Path: rel, Err: err}
	}
	return st.Mode&unix.S_IFMT == unix.S_IFREG, st.Size, nil
}

package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/mount-utils"
)

// hostRoot is the host's filesystem as nodelet sees it: the host's path p
// is at <dir>/p. On the host ("/") every method is the plain system call
// on p, as it was before hostRoot existed. In a container (a DaemonSet
// that mounts the host's / at, say, /host) paths are resolved with
// openat2(RESOLVE_IN_ROOT) below dir, so a symbolic link on the host means
// what it means there: an absolute link /etc/x is <dir>/etc/x, never the
// container's /etc/x, and ".." stops at dir. The runtime runs on the host:
// what it is handed stays the host's path p.
type hostRoot struct {
	dir string
}

// newHostRoot returns the hostRoot of dir; "" is the host's own "/".
func newHostRoot(dir string) (hostRoot, error) {
	if dir == "" {
		return hostRoot{dir: "/"}, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return hostRoot{}, fmt.Errorf("host root %q: %w", dir, err)
	}
	return hostRoot{dir: abs}, nil
}

// onHost reports whether nodelet sees the host's filesystem as it is.
func (r hostRoot) onHost() bool { return r.dir == "" || r.dir == "/" }

// local returns where nodelet sees the host's path p, lexically (no link
// resolved): p itself on the host, else <dir>/p.
func (r hostRoot) local(p string) string {
	if r.onHost() {
		return p
	}
	return filepath.Join(r.dir, filepath.Clean("/"+p))
}

// open opens the host's path p below dir with flags, following links as
// the host would (the last one too, unless flags has O_NOFOLLOW). Only for
// a hostRoot that is not the host's.
func (r hostRoot) open(p string, flags int) (int, error) {
	rootFD, err := unix.Open(r.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("opening host root %s: %w", r.dir, err)
	}
	defer unix.Close(rootFD)
	rel := strings.TrimLeft(filepath.Clean("/"+p), "/")
	if rel == "" {
		rel = "."
	}
	var fd int
	for range openRetries {
		fd, err = unix.Openat2(rootFD, rel, &unix.OpenHow{
			Flags:   uint64(flags) | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
		})
		// EAGAIN: a rename elsewhere raced the lookup's "..": try again.
		if !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.EAGAIN) {
			break
		}
	}
	if errors.Is(err, unix.ENOSYS) {
		return -1, fmt.Errorf("hostRoot %s needs openat2 (Linux 5.6 or later): %w", r.dir, err)
	}
	return fd, err
}

// openRetries bounds the lookups open tries when a concurrent rename makes
// the kernel ask for another.
const openRetries = 16

// realPath returns where nodelet sees the host's existing path p once
// every link in it is resolved on the host's terms: a path below dir
// without links. On the host, p's links are resolved as they are.
func (r hostRoot) realPath(p string) (string, error) {
	if r.onHost() {
		return filepath.EvalSymlinks(p)
	}
	fd, err := r.open(p, unix.O_PATH)
	if err != nil {
		return "", &fs.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	resolved, err := os.Readlink(fdPath(fd))
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", p, err)
	}
	if !mount.PathWithinBase(resolved, r.dir) {
		return "", fmt.Errorf("resolving %s: %s is not below the host root %s", p, resolved, r.dir)
	}
	return resolved, nil
}

// evalLocal is filepath.EvalSymlinks for a path under dir (one local
// returned), with the host's links resolved on the host's terms.
func (r hostRoot) evalLocal(local string) (string, error) {
	if r.onHost() {
		return filepath.EvalSymlinks(local)
	}
	rel, err := filepath.Rel(r.dir, local)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%s is not below the host root %s", local, r.dir)
	}
	return r.realPath("/" + rel)
}

// stat is os.Stat of the host's path p.
func (r hostRoot) stat(p string) (fs.FileInfo, error) {
	if r.onHost() {
		return os.Stat(p)
	}
	fd, err := r.open(p, unix.O_PATH)
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	defer unix.Close(fd)
	// stat(2) on the descriptor's /proc link reaches the opened file
	// itself, with Go's mode conversion.
	info, err := os.Stat(fdPath(fd))
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: p, Err: errors.Unwrap(err)}
	}
	return info, nil
}

// exists reports whether anything, a dangling link included, is at the
// host's path p (os.Lstat).
func (r hostRoot) exists(p string) (bool, error) {
	var err error
	if r.onHost() {
		_, err = os.Lstat(p)
	} else {
		var fd int
		if fd, err = r.open(p, unix.O_PATH|unix.O_NOFOLLOW); err == nil {
			_ = unix.Close(fd)
		}
	}
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, err
	}
}

// mkdirAll is os.MkdirAll of the host's path p, each missing directory
// made with mkdirat in its parent, opened below dir.
func (r hostRoot) mkdirAll(p string, mode fs.FileMode) error {
	if r.onHost() {
		return os.MkdirAll(p, mode)
	}
	p = filepath.Clean("/" + p)
	fd, err := r.open(p, unix.O_PATH|unix.O_DIRECTORY)
	if err == nil {
		_ = unix.Close(fd)
		return nil
	}
	if !errors.Is(err, unix.ENOENT) || p == "/" {
		return &fs.PathError{Op: "mkdir", Path: p, Err: err}
	}
	if err := r.mkdirAll(filepath.Dir(p), mode); err != nil {
		return err
	}
	parent, err := r.open(filepath.Dir(p), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return &fs.PathError{Op: "mkdir", Path: p, Err: err}
	}
	defer unix.Close(parent)
	if err := unix.Mkdirat(parent, filepath.Base(p), uint32(mode.Perm())); err != nil && !errors.Is(err, unix.EEXIST) {
		return &fs.PathError{Op: "mkdir", Path: p, Err: err}
	}
	return nil
}

// chmod is os.Chmod of the host's path p.
func (r hostRoot) chmod(p string, mode fs.FileMode) error {
	if r.onHost() {
		return os.Chmod(p, mode)
	}
	fd, err := r.open(p, unix.O_RDONLY)
	if err != nil {
		return &fs.PathError{Op: "chmod", Path: p, Err: err}
	}
	defer unix.Close(fd)
	if err := unix.Fchmod(fd, uint32(mode.Perm())); err != nil {
		return &fs.PathError{Op: "chmod", Path: p, Err: err}
	}
	return nil
}

// createExcl creates the host's file p empty with mode, failing with
// fs.ErrExist when something is there (os.OpenFile with O_CREATE|O_EXCL).
func (r hostRoot) createExcl(p string, mode fs.FileMode) error {
	if r.onHost() {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
		if err != nil {
			return err
		}
		return f.Close()
	}
	parent, err := r.open(filepath.Dir(p), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return &fs.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(parent)
	fd, err := unix.Openat(parent, filepath.Base(p), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(mode.Perm()))
	if err != nil {
		return &fs.PathError{Op: "open", Path: p, Err: err}
	}
	return unix.Close(fd)
}

// volumeSource returns where nodelet sees the volume vp, which backs a
// subPath it bind-mounts, and how links below that path resolve: a
// hostPath volume is the host's path under dir, its links resolved on the
// host's terms; every other volume is nodelet's own directory (the pod
// directory, at the same path for nodelet and the host), taken as it is.
func (r hostRoot) volumeSource(vp PodVolume) (string, func(string) (string, error)) {
	if vp.Kind == KindHostPath {
		return r.local(vp.Path), r.evalLocal
	}
	return vp.Path, filepath.EvalSymlinks
}

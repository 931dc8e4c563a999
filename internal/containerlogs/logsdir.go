package containerlogs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
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
// Sync: where the kernel has openat2, one fstatat per log in its
// directory, kept open between syncs by dirs (one openat2, an fstat and a
// close when dirs is nil or full); else an os.Root, which opens each
// component of the path in turn.
type logsDir struct {
	// dir is the directory's path.
	dir string
	// fd is the directory opened with O_PATH, or -1 with root set.
	fd   int
	root *os.Root
	// dirs, when set, keeps the logs' directories open.
	dirs *dirCache
}

// openLogsDir opens the pod log directory dir for size checks, the logs'
// directories kept open in dirs (nil for none).
func openLogsDir(dir string, dirs *dirCache) (*logsDir, error) {
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
	return &logsDir{dir: dir, fd: fd, dirs: dirs}, nil
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

// lstatat2 is lstat through openat2: an fstatat of the log's name in its
// directory, which dirs keeps open (O_PATH, opened beneath the pod log
// directory refusing every link), or without dirs one openat2 of rel and
// an fstat of what it opened.
func (d *logsDir) lstatat2(rel string) (regular bool, size int64, err error) {
	parent, name := filepath.Split(rel)
	if d.dirs == nil || parent == "" {
		return d.lstatOpen(rel)
	}
	var st unix.Stat_t
	// rel is clean: its directory is parent without the last slash.
	ok, err := d.dirs.fstatat(d.fd, parent[:len(parent)-1], name, &st)
	switch {
	case err != nil:
		return false, 0, err
	case !ok:
		return d.lstatOpen(rel)
	}
	return st.Mode&unix.S_IFMT == unix.S_IFREG, st.Size, nil
}

// lstatOpen is lstat with one openat2 that resolves rel beneath the
// directory, refusing every link, and an fstat of what it opened.
func (d *logsDir) lstatOpen(rel string) (regular bool, size int64, err error) {
	fd, err := openBeneath(d.fd, rel, &beneathNoLinks)
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

// openBeneath is openat2, tried again while the kernel asks for another
// lookup (EAGAIN, EINTR).
func openBeneath(dirfd int, rel string, how *unix.OpenHow) (fd int, err error) {
	for range openRetries {
		fd, err = openat2(dirfd, rel, how)
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			break
		}
	}
	return fd, err
}

// dirBeneathNoLinks is how a dirCache opens a log's directory: as
// beneathNoLinks, and only a directory.
var dirBeneathNoLinks = unix.OpenHow{
	Flags:   beneathNoLinks.Flags | unix.O_DIRECTORY,
	Resolve: beneathNoLinks.Resolve,
}

// dirCache keeps the logs' directories open (O_PATH) between syncs, by
// their path relative to the pod log directory, so that a size check is
// one fstatat: at rest a sync checks the same logs every time. A directory
// no sync looked at since the last sweep is closed by the next. A log
// missing from a directory kept open is looked for again in a fresh open
// of its path: the directory may have been removed and made again. At
// most max are open: beyond, a check opens what it looks at and closes
// it. Safe for concurrent use.
type dirCache struct {
	mu   sync.Mutex
	max  int
	fds  map[string]int
	used map[string]bool
}

// newDirCache returns a cache of at most most directories.
func newDirCache(most int) *dirCache {
	return &dirCache{max: most, fds: map[string]int{}, used: map[string]bool{}}
}

// fstatat stats name, without following a link, in the directory dir
// below the directory root (an fd of the pod log directory); errors are
// *os.PathError. ok is false, with nothing done, when the cache is full
// and dir not in it.
func (c *dirCache) fstatat(root int, dir, name string, st *unix.Stat_t) (ok bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fd, cached := c.fds[dir]
	if !cached && len(c.fds) >= c.max {
		return false, nil
	}
	c.used[dir] = true
	for {
		if !cached {
			if fd, err = openBeneath(root, dir, &dirBeneathNoLinks); err != nil {
				return true, &os.PathError{Op: "openat2", Path: dir, Err: err}
			}
			c.fds[dir] = fd
		}
		for range openRetries {
			if err = unix.Fstatat(fd, name, st, unix.AT_SYMLINK_NOFOLLOW); !errors.Is(err, unix.EINTR) {
				break
			}
		}
		if !cached || !errors.Is(err, unix.ENOENT) {
			break
		}
		// The directory kept open may be gone, or made again since: the
		// log is looked for again in what is at its path now.
		c.closeLocked(dir)
		cached = false
	}
	if err != nil {
		return true, &os.PathError{Op: "fstatat", Path: filepath.Join(dir, name), Err: err}
	}
	return true, nil
}

// sweep closes the directories no check looked at since the last sweep.
func (c *dirCache) sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for dir := range c.fds {
		if !c.used[dir] {
			c.closeLocked(dir)
		}
	}
	clear(c.used)
}

// closeAll closes every directory.
func (c *dirCache) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for dir := range c.fds {
		c.closeLocked(dir)
	}
	clear(c.used)
}

func (c *dirCache) closeLocked(dir string) {
	_ = unix.Close(c.fds[dir])
	delete(c.fds, dir)
}

// maxCachedDirs is how many logs' directories a manager keeps open: an
// eighth of the process's file limit, at most 4096, so that the cache
// never takes the descriptors the rest of nodelet needs.
var maxCachedDirs = sync.OnceValue(func() int {
	const most = 4096
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return int(min(lim.Cur/8, most))
})

package volumestats

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultWalkBudget is how long DiskUsage may walk one directory: the
// kubelet's default evictionMonitoringInterval, so that a walk never takes
// longer than an eviction round's period. A walk counts every entry it
// reaches in that time (measured: about 200,000 entries a second on a
// loaded 2-core machine, several times that on an idle one); one that
// needs longer stops and reports ErrIncomplete.
const DefaultWalkBudget = 10 * time.Second

// walkBudget is DefaultWalkBudget; tests shorten it.
var walkBudget = DefaultWalkBudget

// walkBatch is how many entries of a directory a walk reads at once: it
// looks at its budget after each batch, and holds no more of a large
// directory in memory than that.
const walkBatch = 1024

// ErrIncomplete is returned (wrapped) by DiskUsage, with what it counted,
// when it could not count every entry under the directory: its budget ran
// out, or an entry that exists could not be read. The usage is then a lower
// bound, and callers that enforce a limit must treat the directory as past
// it: whatever the walk left out is usage a pod could hide.
var ErrIncomplete = errors.New("disk usage not fully counted")

// Usage is the space and the inodes the files under a directory take.
type Usage struct {
	// Bytes is the disk space of the files' allocated blocks.
	Bytes int64
	// Inodes counts the directory itself and every entry under it, a file
	// with several hard links once.
	Inodes int64
}

// DiskUsage measures the files under dir (allocated blocks, as du does)
// without following symbolic links and without crossing into other file
// systems, counting every entry within DefaultWalkBudget. Entries that
// vanish during the walk are left out. When the walk could not count
// every entry it returns what it counted and an error wrapping
// ErrIncomplete; any other error means nothing was measured. A directory
// that does not exist uses nothing; a path that is a file is measured as
// that file.
func DiskUsage(dir string) (Usage, error) {
	return diskUsage(dir, walkBudget)
}

type inode struct{ dev, ino uint64 }

// walk is one DiskUsage: what it counted so far.
type walk struct {
	deadline time.Time
	dev      uint64
	links    map[inode]bool
	u        Usage
	entries  int64
	// unread is the first entry that exists but could not be read.
	unread error
}

func diskUsage(dir string, budget time.Duration) (Usage, error) {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return Usage{}, nil
		}
		return Usage{}, &fs.PathError{Op: "lstat", Path: dir, Err: err}
	}
	w := &walk{deadline: time.Now().Add(budget), dev: uint64(st.Dev)} //nolint:unconvert // its type differs between architectures
	w.count(&st)
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return w.u, nil
	}
	// Depth first, one open directory at a time: the subdirectories of a
	// directory are walked after all its entries were counted.
	pending := []string{dir}
	for len(pending) > 0 {
		d := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		subdirs, done := w.dir(d)
		if !done {
			return w.u, fmt.Errorf("%w: %s: walk stopped after %s and %d entries", ErrIncomplete, dir, budget, w.entries)
		}
		pending = append(pending, subdirs...)
	}
	if w.unread != nil {
		return w.u, fmt.Errorf("%w: %s: %w", ErrIncomplete, dir, w.unread)
	}
	return w.u, nil
}

// dir counts the entries of one directory and returns its subdirectories
// on the same file system; false when the budget ran out.
func (w *walk) dir(path string) ([]string, bool) {
	f, err := os.Open(path)
	if err != nil {
		w.fail(path, err)
		return nil, w.inBudget()
	}
	defer f.Close()
	fd := int(f.Fd())
	var subdirs []string
	for {
		ents, err := f.ReadDir(walkBatch)
		for _, e := range ents {
			var st unix.Stat_t
			if err := unix.Fstatat(fd, e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				w.fail(filepath.Join(path, e.Name()), err)
				continue
			}
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				if uint64(st.Dev) != w.dev { //nolint:unconvert // its type differs between architectures
					continue // a mount point: another file system
				}
				subdirs = append(subdirs, filepath.Join(path, e.Name()))
			}
			w.count(&st)
		}
		if !w.inBudget() {
			return nil, false
		}
		if err != nil {
			if err != io.EOF {
				w.fail(path, err)
			}
			return subdirs, true
		}
	}
}

// count adds one entry, a file with several links once.
func (w *walk) count(st *unix.Stat_t) {
	w.entries++
	if st.Mode&unix.S_IFMT != unix.S_IFDIR && st.Nlink > 1 {
		key := inode{uint64(st.Dev), st.Ino} //nolint:unconvert // its type differs between architectures
		if w.links[key] {
			return
		}
		if w.links == nil {
			w.links = map[inode]bool{}
		}
		w.links[key] = true
	}
	w.u.Inodes++
	w.u.Bytes += st.Blocks * 512
}

// fail notes an entry that could not be read; one that vanished is not
// usage.
func (w *walk) fail(path string, err error) {
	if errors.Is(err, fs.ErrNotExist) || w.unread != nil {
		return
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		err = &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	w.unread = err
}

func (w *walk) inBudget() bool { return time.Now().Before(w.deadline) }

// FsInfo is the size of the file system that holds a path.
type FsInfo struct {
	// CapacityBytes is its size; AvailableBytes what an unprivileged user
	// may still write, as df reports it; UsedBytes the blocks in use,
	// which with reserved blocks is less than capacity minus available.
	CapacityBytes, AvailableBytes, UsedBytes uint64
	Inodes, InodesFree, InodesUsed           uint64
}

// Statfs reads the size of the file system that holds path.
func Statfs(path string) (FsInfo, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return FsInfo{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	bsize := uint64(st.Bsize) //nolint:gosec // a block size is positive
	f := FsInfo{
		CapacityBytes:  st.Blocks * bsize,
		AvailableBytes: st.Bavail * bsize,
		UsedBytes:      (st.Blocks - st.Bfree) * bsize,
		Inodes:         st.Files,
		InodesFree:     st.Ffree,
	}
	if st.Files >= st.Ffree {
		f.InodesUsed = st.Files - st.Ffree
	}
	return f, nil
}

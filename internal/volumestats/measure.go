package volumestats

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// MaxWalkEntries bounds the walk of one directory: a directory with more
// entries is measured as far as the walk got.
const MaxWalkEntries = 1 << 20

// Usage is the space and the inodes the files under a directory take.
type Usage struct {
	// Bytes is the disk space of the files' allocated blocks.
	Bytes int64
	// Inodes counts the directory itself and every entry under it, a file
	// with several hard links once.
	Inodes int64
}

// DiskUsage measures the files under dir (allocated blocks, as du does)
// without following symbolic links, without crossing into other file
// systems, and over at most MaxWalkEntries entries. Entries that vanish or
// cannot be read during the walk are left out. A directory that does not
// exist uses nothing.
func DiskUsage(dir string) (Usage, error) {
	root, err := os.Lstat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Usage{}, nil
		}
		return Usage{}, err
	}
	dev := deviceOf(root)
	type inode struct{ dev, ino uint64 }
	var links map[inode]bool
	var u Usage
	entries := 0
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		entries++
		if entries > MaxWalkEntries {
			return filepath.SkipAll
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			u.Inodes++
			if info.Mode().IsRegular() {
				u.Bytes += info.Size()
			}
			return nil
		}
		if d.IsDir() && path != dir && deviceOf(info) != dev {
			return filepath.SkipDir
		}
		if !d.IsDir() && st.Nlink > 1 {
			key := inode{uint64(st.Dev), st.Ino} //nolint:unconvert // its type differs between architectures
			if links[key] {
				return nil
			}
			if links == nil {
				links = map[inode]bool{}
			}
			links[key] = true
		}
		u.Inodes++
		u.Bytes += st.Blocks * 512
		return nil
	})
	return u, err
}

func deviceOf(info fs.FileInfo) uint64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev) //nolint:unconvert // its type differs between architectures
	}
	return 0
}

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

package volumestats

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func writeFile(t *testing.T, path string, size int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDiskUsage(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), 64<<10)
	writeFile(t, filepath.Join(dir, "sub", "b"), 64<<10)
	// A hard link is the same file: counted once.
	if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "a-link")); err != nil {
		t.Fatal(err)
	}
	// A symbolic link to a big directory is not followed.
	other := t.TempDir()
	writeFile(t, filepath.Join(other, "big"), 1<<20)
	if err := os.Symlink(other, filepath.Join(dir, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	u, err := DiskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if u.Bytes < 128<<10 || u.Bytes > 256<<10 {
		t.Errorf("Bytes = %d, want the two files' 128KiB plus directory blocks, not the linked 1MiB", u.Bytes)
	}
	// dir, a, sub, sub/b, elsewhere (a-link is a).
	if u.Inodes != 5 {
		t.Errorf("Inodes = %d, want 5", u.Inodes)
	}
	if u, err := DiskUsage(filepath.Join(dir, "missing")); u != (Usage{}) || err != nil {
		t.Errorf("DiskUsage of a missing directory = %+v, %v", u, err)
	}
}

func TestStatfs(t *testing.T) {
	f, err := Statfs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if f.CapacityBytes == 0 || f.AvailableBytes > f.CapacityBytes || f.UsedBytes > f.CapacityBytes {
		t.Errorf("Statfs = %+v, want a capacity that bounds available and used", f)
	}
	if _, err := Statfs(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("Statfs of a missing path succeeded")
	}
}

func TestDiskUsageCountsEveryEntry(t *testing.T) {
	// More entries than one read of a directory takes, in two levels, and
	// the data in the file the walk reaches last.
	dir := t.TempDir()
	const files = 3 * 1024
	for i := range files {
		sub := "a"
		if i%2 == 1 {
			sub = "b"
		}
		writeFile(t, filepath.Join(dir, sub, fmt.Sprintf("empty-%05d", i)), 0)
	}
	writeFile(t, filepath.Join(dir, "b", "zz-data"), 1<<20)
	u, err := DiskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	// dir, a, b, the empty files and the data.
	if want := int64(3 + files + 1); u.Inodes != want {
		t.Errorf("Inodes = %d, want %d", u.Inodes, want)
	}
	if u.Bytes < 1<<20 {
		t.Errorf("Bytes = %d, want at least the data's 1MiB", u.Bytes)
	}
}

func TestDiskUsageIncomplete(t *testing.T) {
	dir := t.TempDir()
	for i := range 3 * 1024 {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("f-%05d", i)), 0)
	}
	full, err := DiskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}

	// A walk that runs out of time says so, with what it counted.
	defer func(b time.Duration) { walkBudget = b }(walkBudget)
	walkBudget = 0
	u, err := DiskUsage(dir)
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("DiskUsage past its budget = %+v, %v; want ErrIncomplete", u, err)
	}
	if u.Inodes <= 0 || u.Inodes >= full.Inodes {
		t.Errorf("Inodes = %d, want what was counted before the budget ran out: some of %d", u.Inodes, full.Inodes)
	}
}

func TestDiskUsageUnreadableIsIncomplete(t *testing.T) {
	// Data deeper than a path may name (PATH_MAX) cannot be reached by
	// path: the walk must not report the tree without it as complete.
	dir := t.TempDir()
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 2100 {
		if err := unix.Mkdirat(fd, "d", 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, "d", unix.O_DIRECTORY|unix.O_RDONLY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	data, err := unix.Openat(fd, "data", unix.O_CREAT|unix.O_WRONLY, 0o644)
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(data, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := unix.Close(data); err != nil {
		t.Fatal(err)
	}
	u, err := DiskUsage(dir)
	if !errors.Is(err, ErrIncomplete) {
		t.Errorf("DiskUsage of a tree deeper than PATH_MAX = %+v, %v; want ErrIncomplete", u, err)
	}
}

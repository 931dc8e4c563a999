package volumestats

import (
	"os"
	"path/filepath"
	"testing"
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

package nomount

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustExist(t *testing.T, path, content string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil || string(got) != content {
		t.Fatalf("%s = %q, %v; want %q: removed through a link or a mount", path, got, err, content)
	}
}

func mustBeGone(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s is still there: %v", path, err)
	}
}

// mountOrSkip mounts source on target (a bind mount when fstype is empty)
// and unmounts it at cleanup; without the privilege to mount it skips.
func mountOrSkip(t *testing.T, source, target, fstype string) {
	t.Helper()
	flags := uintptr(0)
	if fstype == "" {
		flags = unix.MS_BIND
	}
	if err := unix.Mount(source, target, fstype, flags, ""); err != nil {
		if errors.Is(err, unix.EPERM) {
			t.Skipf("mounting is not permitted here: %v", err)
		}
		t.Fatalf("mounting %s on %s: %v", source, target, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })
}

func TestRemoveAllRemovesATreeAndNeverFollowsLinks(t *testing.T) {
	root := t.TempDir()
	outside := filepath.Join(root, "outside")
	write(t, filepath.Join(outside, "keep"), "host data")
	tree := filepath.Join(root, "pod")
	write(t, filepath.Join(tree, "a", "b", "c", "file"), "x")
	write(t, filepath.Join(tree, "top"), "y")
	if err := os.Symlink(outside, filepath.Join(tree, "a", "to-dir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "keep"), filepath.Join(tree, "to-file")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(tree, "locked"), 0); err != nil {
		t.Fatal(err)
	}
	deep := tree
	for range 300 {
		deep = filepath.Join(deep, "d")
	}
	write(t, filepath.Join(deep, "f"), "z")
	// More entries than one read returns, so that the directory is read
	// again after a batch was removed.
	for i := range readBatch + 10 {
		write(t, filepath.Join(tree, "many", "f"+strconv.Itoa(i)), "")
	}

	if err := RemoveAll(tree); err != nil {
		t.Fatalf("RemoveAll: %v", err)
	}
	mustBeGone(t, tree)
	mustExist(t, filepath.Join(outside, "keep"), "host data")
	if err := RemoveAll(tree); err != nil {
		t.Errorf("RemoveAll of a missing path: %v", err)
	}
	if err := RemoveAll(filepath.Join(root, "no", "such", "parent")); err != nil {
		t.Errorf("RemoveAll below a missing directory: %v", err)
	}
}

func TestRemoveAllRemovesAFileAndALink(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "target"), "keep")
	if err := os.Symlink(filepath.Join(root, "target"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := RemoveAll(filepath.Join(root, "link")); err != nil {
		t.Fatalf("RemoveAll of a link: %v", err)
	}
	mustBeGone(t, filepath.Join(root, "link"))
	mustExist(t, filepath.Join(root, "target"), "keep")
	if err := RemoveAll(filepath.Join(root, "target")); err != nil {
		t.Fatalf("RemoveAll of a file: %v", err)
	}
	mustBeGone(t, filepath.Join(root, "target"))
}

func TestRemoveAllRefusesPathsWithoutAName(t *testing.T) {
	for _, p := range []string{"", ".", "..", "/tmp/..", "a/."} {
		if err := RemoveAll(p); err == nil {
			t.Errorf("RemoveAll(%q) succeeded", p)
		}
	}
}

// TestRemoveAllStopsAtMounts puts mounts where a pod's tree is removed: a
// bind mount of another directory of the same file system (which a device
// number does not tell apart), a tmpfs, a bind-mounted file and the tree
// itself mounted. Each stops the removal with ErrMountPoint, and what is
// mounted keeps its content; os.RemoveAll deletes it.
func TestRemoveAllStopsAtMounts(t *testing.T) {
	cases := map[string]struct {
		fstype string
		// mountAt is relative to the tree; "" mounts the tree itself.
		mountAt string
		file    bool
	}{
		"bind mount of a directory": {mountAt: "vol/sub/mnt"},
		"tmpfs":                     {fstype: "tmpfs", mountAt: "vol/mnt"},
		"bind-mounted file":         {mountAt: "vol/file", file: true},
		"the tree itself":           {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			host := filepath.Join(root, "host")
			write(t, filepath.Join(host, "data"), "host data")
			tree := filepath.Join(root, "pod")
			write(t, filepath.Join(tree, "vol", "mine"), "pod data")
			target := filepath.Join(tree, tc.mountAt)
			source := host
			switch {
			case tc.file:
				source = filepath.Join(host, "data")
				write(t, target, "")
			default:
				if err := os.MkdirAll(target, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if tc.fstype != "" {
				source = "tmpfs"
			}
			mountOrSkip(t, source, target, tc.fstype)
			check := filepath.Join(target, "data")
			if tc.fstype != "" {
				write(t, check, "host data")
			}
			if tc.file {
				check = target
			}

			err := RemoveAll(tree)
			if !errors.Is(err, ErrMountPoint) {
				t.Fatalf("RemoveAll = %v, want ErrMountPoint", err)
			}
			if !strings.Contains(err.Error(), target) {
				t.Errorf("error %q does not name the mount point %s", err, target)
			}
			mustExist(t, check, "host data")
			mustExist(t, filepath.Join(host, "data"), "host data")
		})
	}
}

// TestRemoveAllWithoutOpenat2 takes the path of kernels older than 5.6:
// a mount of another file system is still refused.
func TestRemoveAllWithoutOpenat2(t *testing.T) {
	saved := openat2
	openat2 = func(int, string, *unix.OpenHow) (int, error) { return -1, unix.ENOSYS }
	t.Cleanup(func() { openat2 = saved })

	if SeesBindMounts() {
		t.Error("SeesBindMounts without openat2")
	}
	root := t.TempDir()
	tree := filepath.Join(root, "pod")
	write(t, filepath.Join(tree, "a", "b", "file"), "x")
	if err := RemoveAll(tree); err != nil {
		t.Fatalf("RemoveAll: %v", err)
	}
	mustBeGone(t, tree)

	write(t, filepath.Join(tree, "vol", "mine"), "pod data")
	mnt := filepath.Join(tree, "vol", "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	mountOrSkip(t, "tmpfs", mnt, "tmpfs")
	write(t, filepath.Join(mnt, "data"), "other fs")
	if err := RemoveAll(tree); !errors.Is(err, ErrMountPoint) {
		t.Fatalf("RemoveAll = %v, want ErrMountPoint", err)
	}
	mustExist(t, filepath.Join(mnt, "data"), "other fs")
}

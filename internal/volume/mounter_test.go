package volume

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestSysMounterMountsTmpfsWithoutMountBinaries(t *testing.T) {
	requireRoot(t)
	t.Setenv("PATH", t.TempDir()) // no mount(8) to fall back on
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := newSysMounter()
	if err := m.MountSensitiveWithoutSystemd("tmpfs", dir, "tmpfs", []string{"size=1048576"}, nil); err != nil {
		t.Fatalf("mount: %v", err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type != unix.TMPFS_MAGIC || fs.Blocks*uint64(fs.Bsize) != 1<<20 {
		t.Errorf("mounted fs type %x size %d, want tmpfs of 1 MiB", fs.Type, fs.Blocks*uint64(fs.Bsize))
	}
	if mounted, err := m.IsMountPoint(dir); err != nil || !mounted {
		t.Errorf("IsMountPoint = %v, %v", mounted, err)
	}
	if err := m.Unmount(dir); err != nil {
		t.Fatalf("unmount: %v", err)
	}
	if err := m.Unmount(dir); !errors.Is(err, unix.EINVAL) {
		t.Errorf("second unmount: %v, want EINVAL", err)
	}
}

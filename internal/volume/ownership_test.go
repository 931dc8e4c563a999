package volume

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

func statOf(t *testing.T, path string) (gid uint32, mode os.FileMode) {
	t.Helper()
	info, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Sys().(*syscall.Stat_t).Gid, info.Mode()
}

func TestSetVolumeOwnership(t *testing.T) {
	requireRoot(t)
	const gid = 4321
	outside := filepath.Join(t.TempDir(), "host-file")
	if err := os.WriteFile(outside, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Chmod(dir, 0o777))
	must(os.MkdirAll(filepath.Join(dir, "sub", "deeper"), 0o700))
	must(os.WriteFile(filepath.Join(dir, "sub", "file"), nil, 0o600))
	must(os.Symlink(outside, filepath.Join(dir, "link")))
	must(unix.Mkfifo(filepath.Join(dir, "fifo"), 0o600))

	must(setVolumeOwnership(dir, gid, nil))

	for path, want := range map[string]os.FileMode{
		dir:                                 0o777 | os.ModeSetgid | os.ModeDir,
		filepath.Join(dir, "sub"):           0o770 | os.ModeSetgid | os.ModeDir,
		filepath.Join(dir, "sub", "deeper"): 0o770 | os.ModeSetgid | os.ModeDir,
		filepath.Join(dir, "sub", "file"):   0o660,
		filepath.Join(dir, "fifo"):          0o660 | os.ModeNamedPipe,
	} {
		g, mode := statOf(t, path)
		if g != gid || mode != want {
			t.Errorf("%s: group %d mode %v, want %d %v", path, g, mode, gid, want)
		}
	}
	if g, _ := statOf(t, filepath.Join(dir, "link")); g != gid {
		t.Errorf("the link's own group is %d, want %d", g, gid)
	}
	if g, mode := statOf(t, outside); g == gid || mode != 0o600 {
		t.Errorf("the link's target was changed: group %d mode %v", g, mode)
	}
}

func TestSetVolumeOwnershipOnRootMismatch(t *testing.T) {
	requireRoot(t)
	const gid = 4321
	onRoot := v1.FSGroupChangeOnRootMismatch
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// The root does not match yet: everything is walked.
	if err := setVolumeOwnership(dir, gid, &onRoot); err != nil {
		t.Fatal(err)
	}
	if g, _ := statOf(t, file); g != gid {
		t.Fatalf("first pass: file group %d, want %d", g, gid)
	}
	// The root matches: a new file is left as it is.
	if err := os.Chown(file, -1, 0); err != nil {
		t.Fatal(err)
	}
	if err := setVolumeOwnership(dir, gid, &onRoot); err != nil {
		t.Fatal(err)
	}
	if g, _ := statOf(t, file); g != 0 {
		t.Errorf("OnRootMismatch walked a volume whose root matched: file group %d", g)
	}
	always := v1.FSGroupChangeAlways
	if err := setVolumeOwnership(dir, gid, &always); err != nil {
		t.Fatal(err)
	}
	if g, _ := statOf(t, file); g != gid {
		t.Errorf("Always did not walk: file group %d", g)
	}
}

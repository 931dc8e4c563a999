package volume

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// bothOpeners runs f with openat2 and with the O_NOFOLLOW component walk.
func bothOpeners(t *testing.T, f func(t *testing.T)) {
	for _, openat2 := range []bool{true, false} {
		name := "component walk"
		if openat2 {
			name = "openat2"
		}
		t.Run(name, func(t *testing.T) {
			saved := haveOpenat2
			haveOpenat2 = openat2
			t.Cleanup(func() { haveOpenat2 = saved })
			f(t)
		})
	}
}

func TestOpenBeneathRefusesLinks(t *testing.T) {
	bothOpeners(t, func(t *testing.T) {
		host := t.TempDir()
		root := t.TempDir()
		if err := os.Symlink(host, filepath.Join(root, "a")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/etc/passwd", filepath.Join(root, "last")); err != nil {
			t.Fatal(err)
		}
		// What a container swapping a directory for a link between
		// resolveSubPath and openBeneath leaves behind: the resolved
		// relative path now runs through a link.
		for _, rel := range []string{"a", "a/b", "last"} {
			fd, err := openBeneath(root, rel)
			if err == nil {
				_ = unix.Close(fd)
				t.Errorf("openBeneath(%q) opened a path through a link", rel)
				continue
			}
			if !errors.Is(err, errSymlinkInSubPath) {
				t.Errorf("openBeneath(%q) = %v, want %v", rel, err, errSymlinkInSubPath)
			}
		}
		if _, err := os.Stat(filepath.Join(host, "b")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a directory was created through the link: %v", err)
		}
	})
}

func TestOpenBeneathCreatesWithTheVolumeModeAndChangesNothingElse(t *testing.T) {
	bothOpeners(t, func(t *testing.T) {
		root := t.TempDir()
		if err := os.Chmod(root, 0o775); err != nil {
			t.Fatal(err)
		}
		existing := filepath.Join(root, "keep")
		if err := os.Mkdir(existing, 0o700); err != nil {
			t.Fatal(err)
		}
		fd, err := openBeneath(root, "keep/new/deeper")
		if err != nil {
			t.Fatalf("openBeneath: %v", err)
		}
		_ = unix.Close(fd)
		for path, want := range map[string]os.FileMode{
			existing:                                 0o700,
			filepath.Join(existing, "new"):           0o775,
			filepath.Join(existing, "new", "deeper"): 0o775,
		} {
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := info.Mode().Perm(); got != want {
				t.Errorf("mode of %s = %o, want %o", path, got, want)
			}
		}
	})
}

func TestSubPathMountIsRemountedAndTornDown(t *testing.T) {
	requireRoot(t)
	root := t.TempDir()
	podDir := t.TempDir()
	vol := filepath.Join(root, "vol")
	if err := os.MkdirAll(filepath.Join(vol, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	m := &Manager{}
	target, err := m.subPathMount(podDir, "vol", "c", 2, vol, "dir", filepath.EvalSymlinks)
	if err != nil {
		t.Fatalf("subPathMount: %v", err)
	}
	if want := filepath.Join(podDir, subPathsDirName, "vol", "c", "2"); target != want {
		t.Errorf("target = %s, want %s", target, want)
	}
	// A second start replaces the mount instead of stacking another.
	if _, err := m.subPathMount(podDir, "vol", "c", 2, vol, "dir", filepath.EvalSymlinks); err != nil {
		t.Fatalf("subPathMount again: %v", err)
	}
	if err := os.WriteFile(filepath.Join(vol, "dir", "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tearDownSubPaths(podDir); err != nil {
		t.Fatalf("tearDownSubPaths: %v", err)
	}
	if _, err := os.Stat(filepath.Join(podDir, subPathsDirName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the subPath directory is still there: %v", err)
	}
	if data, err := os.ReadFile(filepath.Join(vol, "dir", "f")); err != nil || string(data) != "x" {
		t.Errorf("the volume's content was touched by the tear-down: %q, %v", data, err)
	}
}

func TestTearDownSubPathsStopsAtAMountItCannotRemove(t *testing.T) {
	requireRoot(t)
	podDir := t.TempDir()
	vol := t.TempDir()
	if err := os.WriteFile(filepath.Join(vol, "precious"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	m := &Manager{}
	target, err := m.subPathMount(podDir, "vol", "c", 0, vol, ".", filepath.EvalSymlinks)
	if err != nil {
		t.Fatalf("subPathMount: %v", err)
	}
	// A second mount stacked on top by someone else keeps the target busy
	// only if unmountAll misses it; it must not.
	if err := unix.Mount(vol, target, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	if err := tearDownSubPaths(podDir); err != nil {
		t.Fatalf("tearDownSubPaths: %v", err)
	}
	if _, err := os.Stat(filepath.Join(vol, "precious")); err != nil {
		t.Errorf("the volume lost a file: %v", err)
	}
}

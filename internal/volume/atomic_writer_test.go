package volume

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// dataDirs lists the data directories of a volume.
func dataDirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("listing %s: %v", dir, err)
	}
	var dirs []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") && e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	return dirs
}

func dataLink(t *testing.T, dir string) string {
	t.Helper()
	target, err := os.Readlink(filepath.Join(dir, dataLinkName))
	if err != nil {
		t.Fatalf("reading ..data: %v", err)
	}
	return target
}

func TestSetUpUpdatesContentAtomically(t *testing.T) {
	e := newTestEnv(t)
	e.f.setConfigMap("app", map[string]string{"a": "one", "gone": "soon"})
	pod := testPod(configMapVolume("cfg", "app", nil, nil, nil))
	ctx := context.Background()
	if err := e.m.SetUp(ctx, pod); err != nil {
		t.Fatalf("SetUp: %v", err)
	}
	dir := e.m.volumeDir(pod.UID, configMapPlugin, "cfg")
	first := dataLink(t, dir)
	if !strings.HasPrefix(first, "..2026_01_02_03_04_05.") {
		t.Errorf("data directory %q is not named after the write time", first)
	}
	if target, err := os.Readlink(filepath.Join(dir, "a")); err != nil || target != "..data/a" {
		t.Errorf("user-visible a = %q, %v; want a link to ..data/a", target, err)
	}

	// The same content again changes nothing.
	if err := e.m.Update(ctx, pod, []string{"cfg"}); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if got := dataLink(t, dir); got != first {
		t.Errorf("unchanged content rewrote the data directory: %q → %q", first, got)
	}

	// New content: files updated in place, dropped keys gone, one data
	// directory left, the link points at it.
	e.clock.Step(time.Minute)
	e.f.setConfigMap("app", map[string]string{"a": "two", "new": "fresh"})
	if err := e.m.SetUp(ctx, pod); err != nil {
		t.Fatalf("SetUp: %v", err)
	}
	if got := dataLink(t, dir); got != first {
		t.Fatalf("SetUp of a set-up pod rewrote its volume: %q → %q", first, got)
	}
	if err := e.m.Update(ctx, pod, []string{"cfg"}); err != nil {
		t.Fatalf("Update: %v", err)
	}
	want := map[string]string{"a": "two", "new": "fresh"}
	if got := volumeFiles(t, dir); !maps.Equal(got, want) {
		t.Errorf("files after update = %v, want %v", got, want)
	}
	second := dataLink(t, dir)
	if second == first {
		t.Fatalf("..data still points at %q", first)
	}
	if dirs := dataDirs(t, dir); len(dirs) != 1 || dirs[0] != second {
		t.Errorf("data directories = %v, want only %q", dirs, second)
	}
	if _, err := os.Lstat(filepath.Join(dir, "gone")); !os.IsNotExist(err) {
		t.Errorf("link of a removed key still exists: %v", err)
	}
	assertMode(t, filepath.Join(dir, second), dataDirMode)
}

func TestAtomicWriterRemovesLeftovers(t *testing.T) {
	dir := t.TempDir()
	// A crash between writing a data directory and swapping the link.
	if err := os.Mkdir(filepath.Join(dir, "..2025_01_01_00_00_00.123"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..nowhere", filepath.Join(dir, newDataLinkName)); err != nil {
		t.Fatal(err)
	}
	w := atomicWriter{dir: dir, now: time.Now}
	if _, err := w.write(payload{"k": {data: []byte("v"), mode: 0o644}}); err != nil {
		t.Fatalf("write: %v", err)
	}
	if dirs := dataDirs(t, dir); len(dirs) != 1 || dirs[0] != dataLink(t, dir) {
		t.Errorf("data directories = %v, want only the current one", dirs)
	}
	if _, err := os.Lstat(filepath.Join(dir, newDataLinkName)); !os.IsNotExist(err) {
		t.Errorf("%s left behind: %v", newDataLinkName, err)
	}
}

func TestAtomicWriterRejectsBadPaths(t *testing.T) {
	for _, path := range []string{"", "/abs", "../up", "a/../../up", "..hidden", "a//b", "./a"} {
		t.Run(path, func(t *testing.T) {
			w := atomicWriter{dir: t.TempDir(), now: time.Now}
			if _, err := w.write(payload{path: {data: []byte("x"), mode: 0o644}}); err == nil {
				t.Errorf("write accepted path %q", path)
			}
		})
	}
}

func TestSetUpReportsEveryFailedVolume(t *testing.T) {
	e := newTestEnv(t)
	pod := testPod(
		configMapVolume("a", "missing-a", nil, nil, nil),
		v1.Volume{Name: "ok", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "nfs", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/x"}}},
	)
	err := e.m.SetUp(context.Background(), pod)
	want := "MountVolume.SetUp failed for volume \"a\" : configmap \"missing-a\" not found\n" +
		"MountVolume.SetUp failed for volume \"nfs\" : volume source nfs is not supported by nodelet"
	if err == nil || err.Error() != want {
		t.Fatalf("SetUp error = %v, want %q", err, want)
	}
	if _, statErr := os.Stat(e.m.volumeDir(pod.UID, emptyDirPlugin, "ok")); statErr != nil {
		t.Errorf("the healthy volume was not set up: %v", statErr)
	}
}

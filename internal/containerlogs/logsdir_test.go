package containerlogs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
)

// TestDue checks which logs a sync sends to rotate, through openat2 and
// through the os.Root path of kernels without it: those at MaxSize, those
// that are no regular file, behind a link or outside the pod log
// directory; never a missing one.
func TestDue(t *testing.T) {
	base := t.TempDir()
	logs, outside := filepath.Join(base, "pods"), filepath.Join(base, "outside")
	pod := filepath.Join(logs, "ns_p_uid")
	writeLog(t, filepath.Join(pod, "c", "small.log"), 99)
	writeLog(t, filepath.Join(pod, "c", "big.log"), 100)
	writeLog(t, filepath.Join(outside, "big.log"), 150)
	writeLog(t, filepath.Join(outside, "small.log"), 1)
	for _, err := range []error{
		os.Mkdir(filepath.Join(pod, "c", "dir.log"), 0o755),
		os.Symlink(filepath.Join(pod, "c", "big.log"), filepath.Join(pod, "c", "link.log")),
		os.Symlink(filepath.Join(outside, "small.log"), filepath.Join(pod, "c", "out.log")),
		os.Symlink(outside, filepath.Join(pod, "out")),
		os.Symlink("c", filepath.Join(pod, "in")),
		os.Symlink(filepath.Join(pod, "c", "gone.log"), filepath.Join(pod, "c", "dangling.log")),
		os.WriteFile(filepath.Join(pod, "file"), nil, 0o600),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	m, err := New(&fakeRuntime{}, Options{PodLogsDir: logs, MaxSize: 100, MaxFiles: 2, MaxWorkers: 1,
		MonitorInterval: time.Second, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		want       bool
		// wantRoot, when set, is what the os.Root path gives instead.
		wantRoot *bool
	}{
		{name: "a log under MaxSize", path: "ns_p_uid/c/small.log"},
		{name: "a log at MaxSize", path: "ns_p_uid/c/big.log", want: true},
		{name: "a missing log", path: "ns_p_uid/c/gone.log"},
		{name: "a log in a missing directory", path: "ns_gone_uid/c/0.log"},
		{name: "a directory", path: "ns_p_uid/c/dir.log", want: true},
		{name: "a link to a log", path: "ns_p_uid/c/link.log", want: true},
		{name: "a link out of the pod log directory", path: "ns_p_uid/c/out.log", want: true},
		{name: "a dangling link", path: "ns_p_uid/c/dangling.log", want: true},
		{name: "a log below a file", path: "ns_p_uid/file/0.log", want: true},
		{name: "a log through a directory link out of the pod log directory", path: "ns_p_uid/out/small.log", want: true},
		{name: "a log through a directory link that stays inside", path: "ns_p_uid/in/small.log", want: true,
			wantRoot: new(false)},
		{name: "a log outside the pod log directory", path: "../outside/small.log", want: true},
	}
	t.Cleanup(func() { noOpenat2.Store(false) })
	for _, mode := range []struct {
		name     string
		fallback bool
		dirs     *dirCache
	}{
		{name: "openat2, directories kept open", dirs: m.dirs},
		{name: "openat2, no room to keep directories open", dirs: newDirCache(0)},
		{name: "os.Root", fallback: true},
	} {
		noOpenat2.Store(mode.fallback)
		dir, err := openLogsDir(logs, mode.dirs)
		if err != nil {
			t.Fatal(err)
		}
		if (dir.root != nil) != mode.fallback {
			t.Fatalf("%s: os.Root path: %v", mode.name, dir.root != nil)
		}
		for _, tt := range tests {
			want := tt.want
			if mode.fallback && tt.wantRoot != nil {
				want = *tt.wantRoot
			}
			if got := m.due(dir, filepath.Join(logs, tt.path)); got != want {
				t.Errorf("%s (%s): due %v, want %v", tt.name, mode.name, got, want)
			}
		}
		if err := dir.Close(); err != nil {
			t.Error(err)
		}
	}
	// Of the directories looked at, the one left open holds the logs
	// (ns_p_uid/c); the others are no directory or are behind a link.
	if got := m.dirs.open(); got != 1 {
		t.Errorf("%d directories kept open, want 1", got)
	}
	noOpenat2.Store(false)
	if !m.due(nil, filepath.Join(logs, "ns_p_uid/c/small.log")) {
		t.Error("a log is not due when the pod log directory could not be opened")
	}
}

// open tells how many directories are open.
func (c *dirCache) open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.fds)
}

// TestDirectoriesKeptOpen checks what the size checks keep open between
// syncs: the directory of each log checked, closed once its log is no
// longer checked, and never the directory of a log that was removed and
// made again in its place.
func TestDirectoriesKeptOpen(t *testing.T) {
	logs := t.TempDir()
	a, b := filepath.Join(logs, "ns_a_uid", "c"), filepath.Join(logs, "ns_b_uid", "c")
	writeLog(t, filepath.Join(a, "0.log"), 10)
	writeLog(t, filepath.Join(b, "0.log"), 10)
	m, err := New(&fakeRuntime{}, Options{PodLogsDir: logs, MaxSize: 100, MaxFiles: 2, MaxWorkers: 1,
		MonitorInterval: time.Second, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	check := func(paths ...string) []bool {
		t.Helper()
		dir, err := openLogsDir(logs, m.dirs)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = dir.Close() }()
		var due []bool
		for _, p := range paths {
			due = append(due, m.due(dir, p))
		}
		m.dirs.sweep()
		return due
	}
	if due := check(filepath.Join(a, "0.log"), filepath.Join(b, "0.log")); due[0] || due[1] {
		t.Fatalf("small logs due: %v", due)
	}
	if got := m.dirs.open(); got != 2 {
		t.Fatalf("%d directories open after checking two logs, want 2", got)
	}
	// b's log is no longer checked: its directory is closed.
	check(filepath.Join(a, "0.log"))
	if got := m.dirs.open(); got != 1 {
		t.Fatalf("%d directories open after checking one log, want 1", got)
	}
	// a's directory is removed and made again, its log now at MaxSize.
	if err := os.RemoveAll(a); err != nil {
		t.Fatal(err)
	}
	writeLog(t, filepath.Join(a, "0.log"), 100)
	if due := check(filepath.Join(a, "0.log")); !due[0] {
		t.Error("the log of a directory made again is not due at MaxSize")
	}
	// A log that grows is seen through the directory kept open.
	writeLog(t, filepath.Join(b, "0.log"), 10)
	check(filepath.Join(b, "0.log"))
	writeLog(t, filepath.Join(b, "0.log"), 200)
	if due := check(filepath.Join(b, "0.log")); !due[0] {
		t.Error("a log grown to MaxSize is not due")
	}
	m.dirs.closeAll()
	if got := m.dirs.open(); got != 0 {
		t.Errorf("%d directories open after closeAll", got)
	}
}

// TestDueWithoutOpenat2 checks the size checks of a kernel that answers
// openat2 with ENOSYS: they take the os.Root path, from the first one on.
func TestDueWithoutOpenat2(t *testing.T) {
	saved := openat2
	openat2 = func(int, string, *unix.OpenHow) (int, error) { return -1, unix.ENOSYS }
	t.Cleanup(func() {
		openat2 = saved
		noOpenat2.Store(false)
	})
	logs := t.TempDir()
	writeLog(t, filepath.Join(logs, "ns_p_uid", "c", "small.log"), 99)
	writeLog(t, filepath.Join(logs, "ns_p_uid", "c", "big.log"), 100)
	if err := os.Symlink("c", filepath.Join(logs, "ns_p_uid", "in")); err != nil {
		t.Fatal(err)
	}
	m, err := New(&fakeRuntime{}, Options{PodLogsDir: logs, MaxSize: 100, MaxFiles: 2, MaxWorkers: 1,
		MonitorInterval: time.Second, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := openLogsDir(logs, m.dirs)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dir.Close() }()
	for _, tt := range []struct {
		path string
		want bool
	}{
		{path: "ns_p_uid/c/small.log"},
		{path: "ns_p_uid/c/big.log", want: true},
		{path: "ns_p_uid/c/gone.log"},
		{path: "ns_p_uid/in/small.log"},
	} {
		if got := m.due(dir, filepath.Join(logs, tt.path)); got != tt.want {
			t.Errorf("%s: due %v, want %v", tt.path, got, tt.want)
		}
	}
	if !noOpenat2.Load() {
		t.Error("the size checks still try openat2")
	}
}

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
	for _, fallback := range []bool{false, true} {
		noOpenat2.Store(fallback)
		dir, err := openLogsDir(logs)
		if err != nil {
			t.Fatal(err)
		}
		if (dir.root != nil) != fallback {
			t.Fatalf("os.Root path: %v, want %v", dir.root != nil, fallback)
		}
		for _, tt := range tests {
			want := tt.want
			if fallback && tt.wantRoot != nil {
				want = *tt.wantRoot
			}
			if got := m.due(dir, filepath.Join(logs, tt.path)); got != want {
				t.Errorf("%s (os.Root path: %v): due %v, want %v", tt.name, fallback, got, want)
			}
		}
		if err := dir.Close(); err != nil {
			t.Error(err)
		}
	}
	noOpenat2.Store(false)
	if !m.due(nil, filepath.Join(logs, "ns_p_uid/c/small.log")) {
		t.Error("a log is not due when the pod log directory could not be opened")
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
	dir, err := openLogsDir(logs)
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

package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// dirNames lists dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// withUmask runs the test under umask mask.
func withUmask(t *testing.T, mask int) {
	t.Helper()
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

func TestWriteFileModeIsPermWhateverTheUmask(t *testing.T) {
	for _, tc := range []struct {
		name  string
		umask int
		perm  os.FileMode
		old   os.FileMode // mode of an existing file; 0 for none
	}{
		{"private file under the usual umask", 0o022, 0o600, 0},
		{"readable file under a strict umask", 0o077, 0o644, 0},
		{"private file under no umask", 0, 0o600, 0},
		{"group-readable file under a strict umask", 0o027, 0o640, 0},
		{"replacing a looser file", 0o022, 0o600, 0o666},
		{"replacing a stricter file", 0o077, 0o644, 0o400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withUmask(t, tc.umask)
			path := filepath.Join(t.TempDir(), "f")
			if tc.old != 0 {
				if err := os.WriteFile(path, []byte("old"), tc.old); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, tc.old); err != nil {
					t.Fatal(err)
				}
			}
			if err := WriteFile(path, []byte("new"), tc.perm); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode(); got != tc.perm {
				t.Errorf("mode = %v, want %v", got, tc.perm)
			}
			if b, err := os.ReadFile(path); err != nil || string(b) != "new" {
				t.Errorf("content = %q, %v; want %q", b, err, "new")
			}
			if names := dirNames(t, filepath.Dir(path)); !slices.Equal(names, []string{"f"}) {
				t.Errorf("directory holds %v, want only f", names)
			}
		})
	}
}

func TestWriteFileFailureKeepsTheOldFile(t *testing.T) {
	errSync := errors.New("input/output error")
	for _, tc := range []struct {
		name string
		// setup prepares dir and returns the path to write.
		setup    func(t *testing.T, dir string) string
		syncFile func(*os.File) error
	}{
		{
			name: "the file's fsync fails",
			setup: func(t *testing.T, dir string) string {
				path := filepath.Join(dir, "f")
				if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
					t.Fatal(err)
				}
				return path
			},
			syncFile: func(*os.File) error { return errSync },
		},
		{
			name: "the rename fails: the path is a directory",
			setup: func(t *testing.T, dir string) string {
				path := filepath.Join(dir, "f")
				if err := os.Mkdir(path, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(path, "old"), []byte("old"), 0o600); err != nil {
					t.Fatal(err)
				}
				return path
			},
		},
		{
			name: "the directory does not exist",
			setup: func(_ *testing.T, dir string) string {
				return filepath.Join(dir, "missing", "f")
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.syncFile != nil {
				syncFile = tc.syncFile
				t.Cleanup(func() { syncFile = (*os.File).Sync })
			}
			dir := t.TempDir()
			path := tc.setup(t, dir)
			before := dirNames(t, dir)

			err := WriteFile(path, []byte("new"), 0o600)
			if err == nil {
				t.Fatal("WriteFile succeeded, want an error")
			}
			if tc.syncFile != nil && !errors.Is(err, errSync) {
				t.Errorf("error %v does not wrap %v", err, errSync)
			}
			if after := dirNames(t, dir); !slices.Equal(after, before) {
				t.Errorf("directory holds %v after the failed write, want %v as before", after, before)
			}
			if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
				if b, _ := os.ReadFile(path); string(b) != "old" {
					t.Errorf("content = %q, want the old one", b)
				}
			}
		})
	}
}

func TestWriteFuncFailureKeepsTheOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "archive.tar")
	if err := WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	errEncode := errors.New("encoding failed")
	err := WriteFunc(path, 0o644, func(w io.Writer) error {
		if _, err := io.WriteString(w, "half of the new"); err != nil {
			return err
		}
		return errEncode
	})
	if !errors.Is(err, errEncode) {
		t.Errorf("WriteFunc = %v, want an error wrapping %v", err, errEncode)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("content = %q, want the old one", b)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"archive.tar"}) {
		t.Errorf("directory holds %v, want only archive.tar", names)
	}

	if err := WriteFunc(path, 0o644, func(w io.Writer) error {
		_, err := io.WriteString(w, "new")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Errorf("content = %q, want %q", b, "new")
	}
}

func TestWriteFileSyncsTheDirectory(t *testing.T) {
	var synced []string
	errSync := errors.New("input/output error")
	var fail error
	syncDir = func(dir string) error {
		synced = append(synced, dir)
		if fail != nil {
			return fail
		}
		return SyncDir(dir)
	}
	t.Cleanup(func() { syncDir = SyncDir })

	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := WriteFile(path, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(synced, []string{dir}) {
		t.Errorf("synced directories %v, want [%s]", synced, dir)
	}

	// The rename is done: the new file is in place, but the caller learns
	// that it may not survive a crash.
	fail = errSync
	if err := WriteFile(path, []byte("two"), 0o600); !errors.Is(err, errSync) {
		t.Errorf("WriteFile = %v, want an error wrapping %v", err, errSync)
	}
	if b, _ := os.ReadFile(path); string(b) != "two" {
		t.Errorf("content = %q, want %q", b, "two")
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"f"}) {
		t.Errorf("directory holds %v, want only f", names)
	}
}

func TestSyncDir(t *testing.T) {
	if err := SyncDir(t.TempDir()); err != nil {
		t.Errorf("SyncDir of a directory: %v", err)
	}
	if err := SyncDir(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("SyncDir of a missing directory = %v, want ErrNotExist", err)
	}
}

func TestIsTemp(t *testing.T) {
	for name, want := range map[string]bool{
		".pod.tmp-123456":        true,
		".nodelet.key.tmp-1":     true,
		"pod":                    false,
		"pod.tmp-1":              false, // not hidden
		".hidden":                false,
		"pod.corrupt-1700000000": false,
	} {
		if got := IsTemp(name); got != want {
			t.Errorf("IsTemp(%q) = %v, want %v", name, got, want)
		}
	}
}

// A temporary file that a write leaves while it is under way is one IsTemp
// recognizes.
func TestIsTempRecognizesWriteFilesTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	var seen []string
	syncFile = func(f *os.File) error {
		seen = dirNames(t, dir)
		return f.Sync()
	}
	t.Cleanup(func() { syncFile = (*os.File).Sync })
	if err := WriteFile(filepath.Join(dir, "nodelet.crt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || !IsTemp(seen[0]) {
		t.Errorf("during the write the directory held %v, want one temporary file", seen)
	}
}

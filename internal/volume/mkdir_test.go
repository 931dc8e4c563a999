package volume

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// withUmask runs the test under umask mask, with processUmask telling it
// (or telling nothing when known is false).
func withUmask(t *testing.T, mask fs.FileMode, known bool) {
	t.Helper()
	old, oldRead := syscall.Umask(int(mask)), processUmask
	processUmask = func() (fs.FileMode, bool) { return mask, known }
	t.Cleanup(func() {
		syscall.Umask(old)
		processUmask = oldRead
	})
}

func TestMkdirModeGivesTheModeWhateverTheUmask(t *testing.T) {
	for _, tc := range []struct {
		name  string
		umask fs.FileMode
		known bool
		// existing is made before, with mode 0o700, when set.
		existing string
		dir      string
		mode     fs.FileMode
	}{
		{name: "new, umask keeps the mode", umask: 0o022, known: true, dir: "pods/uid", mode: 0o750},
		{name: "new, umask clears bits", umask: 0o077, known: true, dir: "pods/uid", mode: 0o750},
		{name: "new, umask unknown", umask: 0o027, known: false, dir: "pods/uid", mode: 0o755},
		{name: "new, parents missing", umask: 0o022, known: true, dir: "a/b/c/d", mode: 0o750},
		{name: "existing with another mode", umask: 0o022, known: true, existing: "pods/uid", dir: "pods/uid", mode: 0o755},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.existing != "" {
				if err := os.MkdirAll(filepath.Join(root, tc.existing), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(filepath.Join(root, tc.existing), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			withUmask(t, tc.umask, tc.known)
			dir := filepath.Join(root, tc.dir)
			if err := mkdirMode(dir, tc.mode); err != nil {
				t.Fatalf("mkdirMode: %v", err)
			}
			assertMode(t, dir, tc.mode)
			// Again: nothing changes, nothing fails.
			if err := mkdirMode(dir, tc.mode); err != nil {
				t.Fatalf("mkdirMode again: %v", err)
			}
			assertMode(t, dir, tc.mode)
		})
	}
}

func TestMakeDir(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		dir         string
		wantCreated bool
		wantErr     error
	}{
		{name: "new", dir: "x", wantCreated: true},
		{name: "existing", dir: "x", wantCreated: false},
		{name: "missing parents", dir: "y/z/w", wantCreated: true},
		{name: "a file", dir: "file", wantErr: syscall.ENOTDIR},
		{name: "under a file", dir: "file/x", wantErr: syscall.ENOTDIR},
	} {
		t.Run(tc.name, func(t *testing.T) {
			created, err := makeDir(filepath.Join(root, tc.dir), 0o750)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("makeDir = %v, %v; want error %v", created, err, tc.wantErr)
				}
				return
			}
			if err != nil || created != tc.wantCreated {
				t.Fatalf("makeDir = %v, %v; want %v", created, err, tc.wantCreated)
			}
			if fi, err := os.Stat(filepath.Join(root, tc.dir)); err != nil || !fi.IsDir() {
				t.Fatalf("%s is not a directory: %v", tc.dir, err)
			}
		})
	}
}

func TestParseUmask(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status string
		want   fs.FileMode
		wantOK bool
	}{
		{name: "022", status: "Name:\tnodelet\nUmask:\t0022\nState:\tS (sleeping)\n", want: 0o022, wantOK: true},
		{name: "077", status: "Umask:\t0077\n", want: 0o077, wantOK: true},
		{name: "no line (old kernel)", status: "Name:\tnodelet\nState:\tS\n", wantOK: false},
		{name: "garbage", status: "Umask:\tzz\n", wantOK: false},
		{name: "too large", status: "Umask:\t01777\n", wantOK: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseUmask(strings.NewReader(tc.status))
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("parseUmask = %#o, %v; want %#o, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestProcessUmaskIsTheRealOne(t *testing.T) {
	mask, ok := processUmask()
	if !ok {
		t.Skip("this kernel's /proc/self/status has no Umask line")
	}
	old := syscall.Umask(0o022)
	syscall.Umask(old)
	if mask != fs.FileMode(old) {
		t.Errorf("processUmask = %#o, the process's umask is %#o", mask, old)
	}
}

func TestTerminationFileModeWhateverTheUmask(t *testing.T) {
	withUmask(t, 0o077, true)
	path := filepath.Join(t.TempDir(), "containers", "c", "0")
	if err := createTerminationFile(path); err != nil {
		t.Fatal(err)
	}
	assertMode(t, path, terminationMessageMode)
	// A file an earlier attempt left is emptied and given the mode.
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := createTerminationFile(path); err != nil {
		t.Fatal(err)
	}
	assertMode(t, path, terminationMessageMode)
	if got := readFile(t, path); got != "" {
		t.Errorf("termination file holds %q, want it empty", got)
	}
}

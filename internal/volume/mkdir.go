package volume

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// makeDir creates dir with mode (less the umask), and its missing parents
// as os.MkdirAll does, and tells whether it made dir itself. An existing
// directory is no error, an existing file is. It tries dir first, so a
// directory whose parent exists costs one system call (MkdirAll looks at
// each level before it makes any).
func makeDir(dir string, mode fs.FileMode) (created bool, err error) {
	err = os.Mkdir(dir, mode)
	if errors.Is(err, fs.ErrNotExist) {
		if parent := filepath.Dir(dir); parent != dir {
			if err := os.MkdirAll(parent, mode); err != nil {
				return false, err
			}
		}
		err = os.Mkdir(dir, mode)
	}
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return false, err
	}
	fi, statErr := os.Stat(dir)
	if statErr != nil {
		return false, statErr
	}
	if !fi.IsDir() {
		return false, &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
	}
	return false, nil
}

// umaskKeeps tells whether the process's umask leaves the permission bits
// of mode as they are, so that a file or directory created with mode has
// it without a chmod. Without a readable umask it says no.
func umaskKeeps(mode fs.FileMode) bool {
	mask, ok := processUmask()
	return ok && mode.Perm()&mask == 0 && mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) == 0
}

// processUmask reads the umask from /proc/self/status once: changing it to
// read it (syscall.Umask) would race with files other goroutines create.
// nodelet never changes its umask.
var processUmask = sync.OnceValues(func() (fs.FileMode, bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	return parseUmask(f)
})

// parseUmask reads the Umask line of /proc/<pid>/status text.
func parseUmask(status io.Reader) (fs.FileMode, bool) {
	sc := bufio.NewScanner(status)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "Umask:")
		if !ok {
			continue
		}
		m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
		if err != nil || m > 0o777 {
			return 0, false
		}
		return fs.FileMode(m), true
	}
	return 0, false
}

// writeFileMode writes data to the file at path, creating or truncating
// it, and gives it exactly mode whatever the umask (through the open file:
// no second lookup of the path).
func writeFileMode(path string, data []byte, mode fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

package atomicfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Temporary files are named tempPrefix + <name of the file> + tempMarker +
// <random>: hidden, and never a name a caller writes itself unless it
// starts with "." and contains ".tmp-".
const (
	tempPrefix = "."
	tempMarker = ".tmp-"
)

// Seams for the tests: the fsyncs are what cannot be made to fail, or be
// observed, from outside.
var (
	syncFile = (*os.File).Sync
	syncDir  = SyncDir
)

// WriteFile replaces the file at path with data, with mode perm exactly
// (not reduced by the umask), atomically and durably: readers see the old
// file or the new one, and so does the disk after a crash once WriteFile
// has returned nil. The directory must exist. On error the old file, if
// any, is left as it was, and the temporary file is removed, except when
// only the final directory fsync failed: the new file is then in place but
// may not survive a crash.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return WriteFunc(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFunc is WriteFile for content that write streams into w, such as
// an archive too large to hold in memory. An error from write fails the
// write like any other, leaving the old file as it was.
func WriteFunc(path string, perm os.FileMode, write func(w io.Writer) error) error {
	if err := writeFile(path, perm, write); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func writeFile(path string, perm os.FileMode, write func(w io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tempPrefix+filepath.Base(path)+tempMarker+"*")
	if err != nil {
		return fmt.Errorf("creating temporary file: %w", err)
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		if err != nil && !renamed {
			_ = f.Close() // closed already on most paths
			_ = os.Remove(tmp)
		}
	}()
	// Before the data, so that the fsync below makes the mode durable too.
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("setting the mode of the temporary file: %w", err)
	}
	if err := write(f); err != nil {
		return err // f's own errors name the temporary file
	}
	if err := syncFile(f); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	renamed = true
	return syncDir(dir)
}

// SyncDir fsyncs the directory dir, which makes the creations, renames
// and removals of entries in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing directory: %w", err)
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return fmt.Errorf("syncing directory: %w", err)
	}
	if err := d.Close(); err != nil {
		return fmt.Errorf("syncing directory: %w", err)
	}
	return nil
}

// IsTemp reports whether name, a file name without its directory, is
// one of WriteFile's temporary files, which a write that a crash
// interrupted can leave behind.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, tempPrefix) && strings.Contains(name, tempMarker)
}

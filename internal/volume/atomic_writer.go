package volume

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nodelet/nodelet/internal/nomount"
)

const (
	// dataDirMode is the mode of the directories that hold volume content.
	dataDirMode fs.FileMode = 0o755
	// readOnlyGroupBits are added to files of a volume when the pod has an
	// fsGroup, so the group can read them (the kubelet's read-only mask).
	readOnlyGroupBits fs.FileMode = 0o440

	dataLinkName    = "..data"
	newDataLinkName = "..data_tmp"
	// dataDirLayout names each data directory after the time it was
	// written; os.MkdirTemp appends a random suffix.
	dataDirLayout = "..2006_01_02_15_04_05."
)

// file is one file of a volume's content.
type file struct {
	data []byte
	mode fs.FileMode
}

// payload is a volume's content: relative path → file.
type payload map[string]file

// atomicWriter writes a payload into dir so that readers see either the old
// or the new content. Each version is written to its own data directory
// "..<timestamp>.<random>"; a "..data" symlink points to the current one and
// is replaced with a rename; each top-level name of the payload is a symlink
// "<name> -> ..data/<name>". Names starting with ".." are reserved.
type atomicWriter struct {
	dir string
	gid *int64 // group that owns the files, when the pod has an fsGroup
	now func() time.Time
}

// write makes dir hold exactly p and reports whether anything changed.
func (w atomicWriter) write(p payload) (bool, error) {
	if err := validatePayload(p); err != nil {
		return false, err
	}
	p = w.withGroupBits(p)
	current, err := w.currentDataDir()
	if err != nil {
		return false, err
	}
	if current != "" {
		same, err := contentEqual(filepath.Join(w.dir, current), p)
		if err != nil {
			return false, fmt.Errorf("comparing volume content: %w", err)
		}
		if same {
			return false, w.tidy(current, p)
		}
	}
	next, err := w.writeDataDir(p)
	if err != nil {
		return false, err
	}
	if err := w.swapDataLink(next); err != nil {
		_ = nomount.RemoveAll(filepath.Join(w.dir, next))
		return false, err
	}
	return true, w.tidy(next, p)
}

// withGroupBits returns p with group read added to every mode when the pod
// has an fsGroup.
func (w atomicWriter) withGroupBits(p payload) payload {
	if w.gid == nil {
		return p
	}
	out := make(payload, len(p))
	for path, f := range p {
		out[path] = file{data: f.data, mode: f.mode | readOnlyGroupBits}
	}
	return out
}

// validatePayload refuses paths that could escape the volume or collide with
// the writer's own names.
func validatePayload(p payload) error {
	for path := range p {
		if path == "" || filepath.IsAbs(path) {
			return fmt.Errorf("invalid path %q in volume content: must be relative and not empty", path)
		}
		for _, part := range strings.Split(path, "/") {
			if part == "" || part == "." || part == ".." {
				return fmt.Errorf("invalid path %q in volume content: must not contain empty, '.' or '..' elements", path)
			}
		}
		if strings.HasPrefix(path, "..") {
			return fmt.Errorf("invalid path %q in volume content: must not start with '..'", path)
		}
	}
	return nil
}

// currentDataDir returns the name of the data directory "..data" points to,
// or "" if there is none yet.
func (w atomicWriter) currentDataDir() (string, error) {
	target, err := os.Readlink(filepath.Join(w.dir, dataLinkName))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s link: %w", dataLinkName, err)
	}
	return target, nil
}

// contentEqual reports whether dataDir holds exactly the files of p with the
// same content and modes.
func contentEqual(dataDir string, p payload) (bool, error) {
	seen := 0
	same := true
	err := filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dataDir, path)
		if err != nil {
			return err
		}
		want, ok := p[filepath.ToSlash(rel)]
		if !ok || !d.Type().IsRegular() {
			same = false
			return filepath.SkipAll
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if info.Mode().Perm() != want.mode.Perm() || !bytes.Equal(data, want.data) {
			same = false
			return filepath.SkipAll
		}
		seen++
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return same && err == nil && seen == len(p), err
}

// writeDataDir writes p into a new data directory and returns its name.
func (w atomicWriter) writeDataDir(p payload) (string, error) {
	tmp, err := os.MkdirTemp(w.dir, w.now().UTC().Format(dataDirLayout))
	if err != nil {
		return "", fmt.Errorf("creating data directory: %w", err)
	}
	for path, f := range p {
		if err := writeFile(filepath.Join(tmp, filepath.FromSlash(path)), f); err != nil {
			_ = nomount.RemoveAll(tmp)
			return "", fmt.Errorf("writing %s: %w", path, err)
		}
	}
	if err := w.fixOwnership(tmp); err != nil {
		_ = nomount.RemoveAll(tmp)
		return "", err
	}
	return filepath.Base(tmp), nil
}

func writeFile(path string, f file) error {
	if err := os.MkdirAll(filepath.Dir(path), dataDirMode); err != nil {
		return err
	}
	if err := os.WriteFile(path, f.data, f.mode.Perm()); err != nil {
		return err
	}
	return os.Chmod(path, f.mode.Perm())
}

// fixOwnership gives the directories of a data directory their mode
// regardless of the umask and, when the pod has an fsGroup, hands every entry
// to that group; directories then also get the setgid bit, as the kubelet
// does. Changing the group is best effort: it needs privileges.
func (w atomicWriter) fixOwnership(dataDir string) error {
	return filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if w.gid != nil {
			_ = os.Lchown(path, -1, int(*w.gid))
		}
		if !d.IsDir() {
			return nil
		}
		mode := dataDirMode
		if w.gid != nil {
			mode |= fs.ModeSetgid
		}
		if err := os.Chmod(path, mode); err != nil {
			return fmt.Errorf("setting mode of %s: %w", path, err)
		}
		return nil
	})
}

// swapDataLink points "..data" at the data directory next with a rename,
// which replaces the old link atomically.
func (w atomicWriter) swapDataLink(next string) error {
	tmp := filepath.Join(w.dir, newDataLinkName)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing stale %s link: %w", newDataLinkName, err)
	}
	if err := os.Symlink(next, tmp); err != nil {
		return fmt.Errorf("creating %s link: %w", newDataLinkName, err)
	}
	w.chownLink(tmp)
	if err := os.Rename(tmp, filepath.Join(w.dir, dataLinkName)); err != nil {
		return fmt.Errorf("replacing %s link: %w", dataLinkName, err)
	}
	return nil
}

func (w atomicWriter) chownLink(path string) {
	if w.gid != nil {
		_ = os.Lchown(path, -1, int(*w.gid))
	}
}

// tidy makes the user-visible links match p and removes every data directory
// but current: old versions and those a crash left behind.
func (w atomicWriter) tidy(current string, p payload) error {
	want := topLevelNames(p)
	for name := range want {
		if err := w.ensureLink(name); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		return fmt.Errorf("listing volume directory: %w", err)
	}
	for _, e := range entries {
		if err := w.removeStale(e, current, want); err != nil {
			return err
		}
	}
	return nil
}

// ensureLink creates the link "<name> -> ..data/<name>" if it is missing.
func (w atomicWriter) ensureLink(name string) error {
	path := filepath.Join(w.dir, name)
	if _, err := os.Lstat(path); err == nil {
		return nil
	}
	if err := os.Symlink(filepath.Join(dataLinkName, name), path); err != nil {
		return fmt.Errorf("linking %s: %w", name, err)
	}
	w.chownLink(path)
	return nil
}

// removeStale removes e if it is a user-visible link that p no longer has or
// a data directory other than current.
func (w atomicWriter) removeStale(e fs.DirEntry, current string, want map[string]bool) error {
	name := e.Name()
	path := filepath.Join(w.dir, name)
	switch {
	case name == dataLinkName || name == current:
		return nil
	case strings.HasPrefix(name, "..") && e.IsDir():
		if err := nomount.RemoveAll(path); err != nil {
			return fmt.Errorf("removing old data directory %s: %w", name, err)
		}
	case !strings.HasPrefix(name, "..") && !want[name] && e.Type()&fs.ModeSymlink != 0:
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("removing link %s: %w", name, err)
		}
	}
	return nil
}

// topLevelNames returns the first element of every path in p.
func topLevelNames(p payload) map[string]bool {
	names := make(map[string]bool, len(p))
	for path := range p {
		first, _, _ := strings.Cut(path, "/")
		names[first] = true
	}
	return names
}

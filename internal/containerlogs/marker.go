package containerlogs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// PodDirMarker is the file nodelet writes into each pod log directory it
// makes, holding the name of its node. A pod log directory is removed, and
// a link into it swept, only when its marker names this node (or when
// nodelet has a record of its pod, see the pod housekeeping): a kubelet
// sharing podLogsDir makes directories of the same name without it, and
// another nodelet writes its own node's name.
const PodDirMarker = ".nodelet"

// maxMarkerLen bounds what is read of a marker: a node name (253 bytes at
// most) and a newline.
const maxMarkerLen = 256

// MarkPodDir writes node's marker into the pod log directory dir, which
// must exist. Writing it again is no error.
func MarkPodDir(dir, node string) error {
	f, err := os.OpenFile(filepath.Join(dir, PodDirMarker), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return fmt.Errorf("marking pod log directory %s: %w", dir, err)
	}
	_, werr := f.WriteString(node + "\n")
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("marking pod log directory %s: %w", dir, err)
	}
	return nil
}

// PodDirOwner returns the node named by the marker of the pod log
// directory dir: "" when it has none (a kubelet's directory, or one
// nodelet made before it marked them) or is no directory. A directory that
// does not exist is an error for which errors.Is(err, fs.ErrNotExist)
// holds.
func PodDirOwner(dir string) (string, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", nil
	}
	f, err := os.OpenFile(filepath.Join(dir, PodDirMarker), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ELOOP):
		// None, or a link where nodelet writes a file: not a marker.
		return "", nil
	case err != nil:
		return "", fmt.Errorf("reading the marker of pod log directory %s: %w", dir, err)
	}
	defer func() { _ = f.Close() }()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxMarkerLen+1))
	if err != nil {
		return "", fmt.Errorf("reading the marker of pod log directory %s: %w", dir, err)
	}
	if len(data) > maxMarkerLen {
		return "", nil
	}
	return strings.TrimSuffix(string(data), "\n"), nil
}

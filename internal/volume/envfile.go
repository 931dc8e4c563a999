package volume

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// OpenVolumeFile opens, for reading, the file at path inside the pod's
// emptyDir volume named volume: the file an env var's fileKeyRef names.
// The path is resolved inside the volume (openat2 RESOLVE_IN_ROOT): a link
// a container wrote there, absolute or with "..", never leaves it. Only a
// regular file is opened; a FIFO or device a container made is refused
// rather than waited on or read.
func (m *Manager) OpenVolumeFile(pod *v1.Pod, volume, path string) (*os.File, error) {
	found := false
	for _, v := range pod.Spec.Volumes {
		if v.Name == volume && v.EmptyDir != nil {
			found = true
			break
		}
	}
	if !found {
		return nil, fmt.Errorf("pod has no emptyDir volume %q", volume)
	}
	root := hostRoot{dir: m.volumeDir(pod.UID, emptyDirPlugin, volume)}
	fd, err := root.open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, fmt.Errorf("opening %s in volume %q: %w", path, volume, err)
	}
	f := os.NewFile(uintptr(fd), path)
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("opening %s in volume %q: %w", path, volume, err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s in volume %q is not a regular file", path, volume)
	}
	return f, nil
}

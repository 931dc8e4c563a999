package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/mount-utils"
)

// subPathsDirName holds the per-container bind mounts of subPaths, as the
// kubelet names it: <podDir>/volume-subpaths/<volume>/<container>/<index>.
const subPathsDirName = "volume-subpaths"

// errSymlinkInSubPath is returned when a component of a subPath is a symbolic
// link at the moment nodelet opens it: either the volume changed while the
// path was being prepared, or a link inside the volume was replaced.
var errSymlinkInSubPath = errors.New("a component is a symbolic link")

// haveOpenat2 is false once the kernel answered openat2 with ENOSYS; tests
// clear it to exercise the component walk.
var haveOpenat2 = true

// subPathMount makes subPath of the volume at volumePath available to one
// container without ever handing the runtime a path a container could
// redirect. The subPath is resolved inside the volume (links that stay
// inside are allowed, as the kubelet allows them), then opened component by
// component relative to the volume root without following any link
// (openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or openat with
// O_NOFOLLOW), creating missing directories the same way; the opened file
// descriptor is bind-mounted onto a target under the pod directory, and the
// target is what the container mounts. A container that swaps a directory
// of the volume for a link between the check and the container start gets
// an error, never the link's target. volumePath is where nodelet sees the
// volume and eval resolves the links of a path below it (see
// hostRoot.volumeSource): the bind mount's source is what nodelet sees,
// its target, which is returned for the runtime, is under podDir.
func (m *Manager) subPathMount(podDir, volume, container string, index int, volumePath, subPath string, eval func(string) (string, error)) (string, error) {
	if err := checkSubPath(subPath); err != nil {
		return "", err
	}
	root, err := eval(volumePath)
	if err != nil {
		return "", fmt.Errorf("resolving volume path: %w", err)
	}
	rel, err := resolveSubPath(root, subPath, eval)
	if err != nil {
		return "", err
	}
	fd, err := openBeneath(root, rel)
	if err != nil {
		return "", fmt.Errorf("opening subPath %q: %w", subPath, err)
	}
	defer unix.Close(fd)

	target := filepath.Join(podDir, subPathsDirName, volume, container, strconv.Itoa(index))
	if err := m.prepareSubPathTarget(target, fd); err != nil {
		return "", fmt.Errorf("preparing the mount of subPath %q: %w", subPath, err)
	}
	if err := unix.Mount(fdPath(fd), target, "", unix.MS_BIND, ""); err != nil {
		return "", fmt.Errorf("bind-mounting subPath %q: %w", subPath, err)
	}
	return target, nil
}

func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// checkSubPath refuses an absolute subPath or one with a ".." component, as
// the kubelet does and with its messages: the API refuses both in a literal
// subPath, but not in what a subPathExpr expands to, and a pod may come from
// somewhere that did not validate it.
func checkSubPath(subPath string) error {
	if filepath.IsAbs(subPath) {
		return fmt.Errorf("error SubPath `%s` must not be an absolute path", subPath)
	}
	if slices.Contains(strings.Split(filepath.ToSlash(subPath), "/"), "..") {
		return fmt.Errorf("unable to provision SubPath `%s`: must not contain '..'", subPath)
	}
	return nil
}

// resolveSubPath returns subPath relative to root with the links of its
// existing part resolved by eval, refusing a result outside root. Missing
// trailing components are kept as they are; openBeneath creates them.
func resolveSubPath(root, subPath string, eval func(string) (string, error)) (string, error) {
	parts := strings.Split(filepath.Clean(subPath), string(filepath.Separator))
	existing := 0
	for existing < len(parts) {
		if _, err := os.Lstat(filepath.Join(root, filepath.Join(parts[:existing+1]...))); err != nil {
			break
		}
		existing++
	}
	resolved, err := eval(filepath.Join(root, filepath.Join(parts[:existing]...)))
	if err != nil {
		return "", fmt.Errorf("resolving subPath %q: %w", subPath, err)
	}
	if !mount.PathWithinBase(resolved, root) {
		return "", fmt.Errorf("subPath %q resolves outside the volume", subPath)
	}
	rel, err := filepath.Rel(root, resolved)
	if err != nil {
		return "", fmt.Errorf("resolving subPath %q: %w", subPath, err)
	}
	return filepath.Join(append([]string{rel}, parts[existing:]...)...), nil
}

// openBeneath opens rel below root without following any symbolic link and
// returns an O_PATH descriptor. Missing directories are created with the
// mode of root; only directories created here get their mode set, so no
// existing directory, inside the volume or out, is ever changed.
func openBeneath(root, rel string) (int, error) {
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("opening volume root: %w", err)
	}
	if rel == "." {
		return rootFD, nil
	}
	if fd, err := openat2Beneath(rootFD, rel); err == nil || !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOSYS) {
		_ = unix.Close(rootFD)
		return fd, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(rootFD, &st); err != nil {
		_ = unix.Close(rootFD)
		return -1, fmt.Errorf("reading volume mode: %w", err)
	}
	return walkBeneath(rootFD, rel, uint32(st.Mode&0o7777))
}

// openat2Beneath opens rel in one call when the kernel has openat2.
func openat2Beneath(dirFD int, rel string) (int, error) {
	if !haveOpenat2 {
		return -1, unix.ENOSYS
	}
	fd, err := unix.Openat2(dirFD, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch {
	case errors.Is(err, unix.ENOSYS):
		haveOpenat2 = false
	case errors.Is(err, unix.ELOOP):
		return -1, errSymlinkInSubPath
	case errors.Is(err, unix.EXDEV):
		return -1, errors.New("the path leaves the volume")
	}
	return fd, err
}

// walkBeneath opens rel one component at a time with O_NOFOLLOW, creating
// missing directories with mode perm. It takes ownership of dirFD.
func walkBeneath(dirFD int, rel string, perm uint32) (int, error) {
	parts := strings.Split(rel, string(filepath.Separator))
	for i, name := range parts {
		last := i == len(parts)-1
		fd, err := openComponent(dirFD, name, last, perm)
		_ = unix.Close(dirFD)
		if err != nil {
			return -1, fmt.Errorf("component %q: %w", name, err)
		}
		dirFD = fd
	}
	return dirFD, nil
}

// openComponent opens one name in dirFD without following it: a directory
// unless last; created as a directory if missing.
func openComponent(dirFD int, name string, last bool, perm uint32) (int, error) {
	flags := unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if !last {
		flags |= unix.O_DIRECTORY
	}
	fd, err := unix.Openat(dirFD, name, flags, 0)
	if errors.Is(err, unix.ENOENT) {
		return createComponent(dirFD, name, perm)
	}
	if err != nil {
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return -1, errSymlinkOrFile(dirFD, name, err)
		}
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		_ = unix.Close(fd)
		return -1, errSymlinkInSubPath
	}
	return fd, nil
}

// createComponent makes a directory and opens what it made without
// following links, then sets its mode through the descriptor, so a link
// planted between the two calls is refused, never chmod'ed through.
func createComponent(dirFD int, name string, perm uint32) (int, error) {
	if err := unix.Mkdirat(dirFD, name, perm); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, fmt.Errorf("creating directory: %w", err)
	}
	fd, err := unix.Openat(dirFD, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, errSymlinkOrFile(dirFD, name, err)
	}
	if err := unix.Fchmod(fd, perm); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("setting directory mode: %w", err)
	}
	return fd, nil
}

// errSymlinkOrFile explains an open that O_NOFOLLOW or O_DIRECTORY refused.
func errSymlinkOrFile(dirFD int, name string, err error) error {
	var st unix.Stat_t
	if unix.Fstatat(dirFD, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return errSymlinkInSubPath
	}
	if errors.Is(err, unix.ENOTDIR) {
		return errors.New("not a directory")
	}
	return err
}

// prepareSubPathTarget creates the mount target of the right kind for the
// opened file: a directory for a directory, an empty file otherwise. A
// target left mounted by an earlier start of the container is unmounted
// first, so every start mounts what is in the volume now.
func (m *Manager) prepareSubPathTarget(target string, fd int) error {
	if err := mkdirMode(filepath.Dir(target), stateDirMode); err != nil {
		return err
	}
	if err := unmountAll(target); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("reading the opened subPath: %w", err)
	}
	wantDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	if info, err := os.Lstat(target); err == nil {
		if info.IsDir() == wantDir && (wantDir || info.Mode().IsRegular()) {
			return nil
		}
		if err := os.Remove(target); err != nil {
			return fmt.Errorf("replacing mount target: %w", err)
		}
	}
	if wantDir {
		return os.Mkdir(target, stateDirMode)
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

// unmountAll removes every mount stacked on path. A path that is not a
// mount point, or does not exist, is left alone.
func unmountAll(path string) error {
	for range 16 {
		err := unix.Unmount(path, unix.UMOUNT_NOFOLLOW)
		switch {
		case err == nil:
			continue
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			return nil
		default:
			return fmt.Errorf("unmounting %s: %w", path, err)
		}
	}
	return fmt.Errorf("unmounting %s: still mounted after 16 unmounts", path)
}

// tearDownSubPaths unmounts and removes the subPath mount targets of a pod
// whose containers are gone. Entries are removed one at a time with
// os.Remove, which refuses a directory that is not empty: a target that is
// somehow still mounted stops the tear-down instead of letting a recursive
// delete reach into the volume, or the host directory, it shows.
func tearDownSubPaths(podDir string) error {
	dir := filepath.Join(podDir, subPathsDirName)
	targets, err := filepath.Glob(filepath.Join(dir, "*", "*", "*"))
	if err != nil {
		return fmt.Errorf("listing subPath mounts: %w", err)
	}
	for _, t := range targets {
		if err := unmountAll(t); err != nil {
			return err
		}
		if err := os.Remove(t); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing subPath mount target: %w", err)
		}
	}
	containers, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
	volumes, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, p := range append(append(containers, volumes...), dir) {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing subPath mount directory: %w", err)
		}
	}
	return nil
}

package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
)

const (
	// hostPathDirMode and hostPathFileMode are the modes of what a
	// DirectoryOrCreate or FileOrCreate hostPath creates, as the kubelet
	// makes them.
	hostPathDirMode  fs.FileMode = 0o755
	hostPathFileMode fs.FileMode = 0o644
)

// checkHostPath makes sure a hostPath volume's path is what its type asks
// for, creating it for the ...OrCreate types, on the host seen at root.
// Messages name the host's path.
func checkHostPath(root hostRoot, src *v1.HostPathVolumeSource) error {
	typ := v1.HostPathUnset
	if src.Type != nil {
		typ = *src.Type
	}
	path := src.Path
	switch typ {
	case v1.HostPathUnset:
		return nil
	case v1.HostPathDirectoryOrCreate:
		if err := createIfMissing(root, path, createDir); err != nil {
			return err
		}
		return checkType(root, path, typ, fs.FileMode.IsDir)
	case v1.HostPathFileOrCreate:
		if err := createIfMissing(root, path, createFile); err != nil {
			return err
		}
		return checkType(root, path, typ, fs.FileMode.IsRegular)
	case v1.HostPathDirectory:
		return checkType(root, path, typ, fs.FileMode.IsDir)
	case v1.HostPathFile:
		return checkType(root, path, typ, fs.FileMode.IsRegular)
	case v1.HostPathSocket:
		return checkType(root, path, typ, isType(fs.ModeSocket))
	case v1.HostPathCharDev:
		return checkType(root, path, typ, isType(fs.ModeDevice|fs.ModeCharDevice))
	case v1.HostPathBlockDev:
		return checkType(root, path, typ, isType(fs.ModeDevice))
	default:
		return fmt.Errorf("hostPath type %q is not valid", typ)
	}
}

func isType(want fs.FileMode) func(fs.FileMode) bool {
	return func(m fs.FileMode) bool { return m.Type() == want }
}

// checkType stats path, following links, and errors unless ok(mode).
func checkType(root hostRoot, path string, typ v1.HostPathType, ok func(fs.FileMode) bool) error {
	info, err := root.stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("hostPath type check failed: %s does not exist (type %s)", path, typ)
	}
	if err != nil {
		return fmt.Errorf("hostPath type check failed: %w", err)
	}
	if !ok(info.Mode()) {
		return fmt.Errorf("hostPath type check failed: %s is not a %s", path, typeNoun(typ))
	}
	return nil
}

func typeNoun(typ v1.HostPathType) string {
	switch typ {
	case v1.HostPathDirectory, v1.HostPathDirectoryOrCreate:
		return "directory"
	case v1.HostPathFile, v1.HostPathFileOrCreate:
		return "file"
	case v1.HostPathSocket:
		return "socket"
	case v1.HostPathCharDev:
		return "character device"
	case v1.HostPathBlockDev:
		return "block device"
	default:
		return string(typ)
	}
}

// createIfMissing calls create when nothing exists at path.
func createIfMissing(root hostRoot, path string, create func(hostRoot, string) error) error {
	if exists, err := root.exists(path); exists || err != nil {
		return nil //nolint:nilerr // as os.Lstat's: the type check that follows reports it
	}
	if err := create(root, path); err != nil {
		return fmt.Errorf("creating hostPath %s: %w", path, err)
	}
	return nil
}

func createDir(root hostRoot, path string) error {
	if err := root.mkdirAll(path, hostPathDirMode); err != nil {
		return err
	}
	return root.chmod(path, hostPathDirMode)
}

func createFile(root hostRoot, path string) error {
	if err := root.mkdirAll(filepath.Dir(path), hostPathDirMode); err != nil {
		return err
	}
	err := root.createExcl(path, hostPathFileMode)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return root.chmod(path, hostPathFileMode)
}

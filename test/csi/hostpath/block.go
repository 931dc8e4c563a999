package hostpath

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A block volume is a file of its capacity, blockImage in the volume's
// directory, which NodeStageVolume attaches to a loop device and
// NodePublishVolume bind-mounts (the device node) at the target file.
const blockImage = "block.img"

// minBlockSize is the size of a block volume created without a capacity.
const minBlockSize = 1 << 20

// wantsBlock tells whether any of caps asks for block access.
func wantsBlock(caps []*csi.VolumeCapability) bool {
	for _, c := range caps {
		if c.GetBlock() != nil {
			return true
		}
	}
	return false
}

func (d *Driver) blockImagePath(id string) string {
	return filepath.Join(d.volumePath(id), blockImage)
}

// createBlockImage makes the volume's image file of size bytes.
func (d *Driver) createBlockImage(id string, size int64) error {
	if size <= 0 {
		size = minBlockSize
	}
	f, err := os.OpenFile(d.blockImagePath(id), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return status.Errorf(codes.Internal, "creating the block image: %v", err)
	}
	defer func() { _ = f.Close() }()
	if err := f.Truncate(size); err != nil {
		return status.Errorf(codes.Internal, "sizing the block image: %v", err)
	}
	return nil
}

// loopDevices lists the loop devices attached to file.
func loopDevices(file string) ([]string, error) {
	out, err := exec.Command("losetup", "-j", file).Output()
	if err != nil {
		return nil, fmt.Errorf("losetup -j %s: %w", file, err)
	}
	var devs []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if dev, _, ok := strings.Cut(line, ":"); ok && dev != "" {
			devs = append(devs, dev)
		}
	}
	return devs, nil
}

// attachLoop returns the loop device of file, attaching one if none is.
func attachLoop(file string) (string, error) {
	devs, err := loopDevices(file)
	if err != nil {
		return "", err
	}
	if len(devs) > 0 {
		return devs[0], nil
	}
	out, err := exec.Command("losetup", "-f", "--show", file).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("losetup -f --show %s: %w: %s", file, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// detachLoops detaches every loop device of file.
func detachLoops(file string) error {
	devs, err := loopDevices(file)
	if err != nil {
		return err
	}
	for _, dev := range devs {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			return fmt.Errorf("losetup -d %s: %w: %s", dev, err, out)
		}
	}
	return nil
}

// stageBlock attaches the volume's image to a loop device. The caller
// holds d.mu.
func (d *Driver) stageBlock(v *volume) error {
	if !v.Block {
		return status.Errorf(codes.InvalidArgument, "volume %s is not a block volume", v.ID)
	}
	if _, err := attachLoop(d.blockImagePath(v.ID)); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	return nil
}

// publishBlock bind-mounts the volume's loop device at target, a file it
// creates. The caller holds d.mu.
func (d *Driver) publishBlock(v *volume, target string, readonly bool) error {
	if !v.Block {
		return status.Errorf(codes.InvalidArgument, "volume %s is not a block volume", v.ID)
	}
	devs, err := loopDevices(d.blockImagePath(v.ID))
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if len(devs) == 0 {
		return status.Errorf(codes.FailedPrecondition, "block volume %s is not staged", v.ID)
	}
	mounted, err := d.isMountPoint(target)
	if err != nil {
		return status.Errorf(codes.Internal, "checking %s: %v", target, err)
	}
	if mounted {
		return nil
	}
	if _, err := os.Stat(filepath.Dir(target)); err != nil {
		return status.Errorf(codes.FailedPrecondition, "the target's directory: %v", err)
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return status.Errorf(codes.Internal, "creating %s: %v", target, err)
	}
	_ = f.Close()
	opts := []string{"bind"}
	if readonly {
		opts = append(opts, "ro")
	}
	if err := d.mounter.Mount(devs[0], target, "", opts); err != nil {
		return status.Errorf(codes.Internal, "bind-mounting %s at %s: %v", devs[0], target, err)
	}
	return nil
}

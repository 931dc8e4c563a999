package hostpath

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
	mount "k8s.io/mount-utils"
)

// NodeGetCapabilities reports staging (so that a node agent exercises
// both steps) and volume stats.
func (d *Driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	types := []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
	}
	caps := make([]*csi.NodeServiceCapability, 0, len(types))
	for _, t := range types {
		caps = append(caps, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{
			Rpc: &csi.NodeServiceCapability_RPC{Type: t},
		}})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

// NodeGetInfo reports the node id, the volume limit and the topology.
func (d *Driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{
		NodeId:             d.cfg.NodeID,
		MaxVolumesPerNode:  d.cfg.MaxVolumesPerNode,
		AccessibleTopology: d.topology()[0],
	}, nil
}

// isMountPoint says whether p is mounted on; a missing p is not.
func (d *Driver) isMountPoint(p string) (bool, error) {
	notMnt, err := d.mounter.IsLikelyNotMountPoint(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return !notMnt, nil
}

// bind mounts source at target, a directory it creates.
func (d *Driver) bind(source, target string, readonly bool) error {
	mounted, err := d.isMountPoint(target)
	if err != nil {
		return status.Errorf(codes.Internal, "checking %s: %v", target, err)
	}
	if mounted {
		return nil
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return status.Errorf(codes.Internal, "creating %s: %v", target, err)
	}
	opts := []string{"bind"}
	if readonly {
		opts = append(opts, "ro")
	}
	if err := d.mounter.Mount(source, target, "", opts); err != nil {
		return status.Errorf(codes.Internal, "bind-mounting %s at %s: %v", source, target, err)
	}
	return nil
}

// NodeStageVolume bind-mounts the volume's directory at the staging path.
func (d *Driver) NodeStageVolume(_ context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	id, staging := req.GetVolumeId(), req.GetStagingTargetPath()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "a volume id is required")
	case staging == "":
		return nil, status.Error(codes.InvalidArgument, "a staging target path is required")
	case req.GetVolumeCapability() == nil:
		return nil, status.Error(codes.InvalidArgument, "a volume capability is required")
	}
	if err := checkCapabilities([]*csi.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.volumes[id]
	if !ok || v.Ephemeral {
		return nil, status.Errorf(codes.NotFound, "volume %s does not exist", id)
	}
	if d.cfg.AttachRequired && (v.PublishedNode != d.cfg.NodeID || req.GetPublishContext()[PublishContextKey] != d.cfg.NodeID) {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not published to node %s", id, d.cfg.NodeID)
	}
	if req.GetVolumeCapability().GetBlock() != nil {
		if err := d.stageBlock(v); err != nil {
			return nil, err
		}
	} else if v.Block {
		return nil, status.Errorf(codes.InvalidArgument, "block volume %s staged with mount access", id)
	} else if err := d.bind(d.volumePath(id), staging, false); err != nil {
		return nil, err
	}
	if !slices.Contains(v.Staged, staging) {
		v.Staged = append(v.Staged, staging)
		if err := d.saveLocked(); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	klog.InfoS("Staged volume", "volumeID", id, "stagingTargetPath", staging)
	return &csi.NodeStageVolumeResponse{}, nil
}

// NodeUnstageVolume unmounts the staging path and leaves the directory,
// which belongs to the caller.
func (d *Driver) NodeUnstageVolume(_ context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	id, staging := req.GetVolumeId(), req.GetStagingTargetPath()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "a volume id is required")
	case staging == "":
		return nil, status.Error(codes.InvalidArgument, "a staging target path is required")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	mounted, err := d.isMountPoint(staging)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "checking %s: %v", staging, err)
	}
	v, ok := d.volumes[id]
	if !ok && !mounted {
		return nil, status.Errorf(codes.NotFound, "volume %s does not exist", id)
	}
	if mounted {
		if err := d.mounter.Unmount(staging); err != nil {
			return nil, status.Errorf(codes.Internal, "unmounting %s: %v", staging, err)
		}
	}
	if ok && slices.Contains(v.Staged, staging) {
		v.Staged = slices.DeleteFunc(v.Staged, func(s string) bool { return s == staging })
		if v.Block && len(v.Staged) == 0 {
			if err := detachLoops(d.blockImagePath(id)); err != nil {
				return nil, status.Error(codes.Internal, err.Error())
			}
		}
		if err := d.saveLocked(); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	klog.InfoS("Unstaged volume", "volumeID", id, "stagingTargetPath", staging)
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// NodePublishVolume bind-mounts the staging path at the target; an
// ephemeral inline volume gets a fresh directory of its own, bound
// without staging.
func (d *Driver) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	id, target := req.GetVolumeId(), req.GetTargetPath()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "a volume id is required")
	case target == "":
		return nil, status.Error(codes.InvalidArgument, "a target path is required")
	case req.GetVolumeCapability() == nil:
		return nil, status.Error(codes.InvalidArgument, "a volume capability is required")
	}
	if err := checkCapabilities([]*csi.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return nil, err
	}
	ephemeral := req.GetVolumeContext()[EphemeralContextKey] == "true"
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.volumes[id]
	var source string
	switch {
	case ephemeral:
		if !validID(id) {
			return nil, status.Errorf(codes.InvalidArgument, "volume id %q cannot name a directory", id)
		}
		if ok && !v.Ephemeral {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s exists and is not ephemeral", id)
		}
		if !ok {
			if err := os.MkdirAll(d.volumePath(id), 0o777); err != nil {
				return nil, status.Errorf(codes.Internal, "creating the volume directory: %v", err)
			}
			if err := os.Chmod(d.volumePath(id), 0o777); err != nil {
				return nil, status.Errorf(codes.Internal, "creating the volume directory: %v", err)
			}
			v = &volume{ID: id, Name: id, Ephemeral: true}
			d.volumes[id] = v
		}
		source = d.volumePath(id)
	case !ok:
		return nil, status.Errorf(codes.NotFound, "volume %s does not exist", id)
	case req.GetStagingTargetPath() == "":
		return nil, status.Error(codes.InvalidArgument, "a staging target path is required")
	case !slices.Contains(v.Staged, req.GetStagingTargetPath()):
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s", id, req.GetStagingTargetPath())
	default:
		source = req.GetStagingTargetPath()
	}
	if req.GetVolumeCapability().GetBlock() != nil {
		if ephemeral {
			return nil, status.Error(codes.InvalidArgument, "an ephemeral volume cannot be a block volume")
		}
		if err := d.publishBlock(v, target, req.GetReadonly()); err != nil {
			return nil, err
		}
	} else if v.Block {
		return nil, status.Errorf(codes.InvalidArgument, "block volume %s published with mount access", id)
	} else if err := d.bind(source, target, req.GetReadonly()); err != nil {
		return nil, err
	}
	if !slices.Contains(v.Published, target) {
		v.Published = append(v.Published, target)
	}
	if err := d.saveLocked(); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	klog.InfoS("Published volume on the node", "volumeID", id, "targetPath", target, "readonly", req.GetReadonly(), "ephemeral", ephemeral)
	return &csi.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume unmounts the target and removes it. An ephemeral
// volume goes with its last target. A volume the driver does not know
// with nothing at the target is NotFound, as the spec has it.
func (d *Driver) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	id, target := req.GetVolumeId(), req.GetTargetPath()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "a volume id is required")
	case target == "":
		return nil, status.Error(codes.InvalidArgument, "a target path is required")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.volumes[id]
	if !ok {
		if _, err := os.Lstat(target); errors.Is(err, fs.ErrNotExist) {
			return nil, status.Errorf(codes.NotFound, "volume %s does not exist", id)
		}
	}
	if err := mount.CleanupMountPoint(target, d.mounter, true); err != nil {
		return nil, status.Errorf(codes.Internal, "unmounting %s: %v", target, err)
	}
	if ok {
		v.Published = slices.DeleteFunc(v.Published, func(s string) bool { return s == target })
		if v.Ephemeral && len(v.Published) == 0 {
			if err := os.RemoveAll(d.volumePath(id)); err != nil {
				return nil, status.Errorf(codes.Internal, "removing the volume directory: %v", err)
			}
			delete(d.volumes, id)
		}
		if err := d.saveLocked(); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	klog.InfoS("Unpublished volume on the node", "volumeID", id, "targetPath", target)
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeGetVolumeStats reports the file system's size and free space at
// the path and what the volume's directory uses of it.
func (d *Driver) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	id, p := req.GetVolumeId(), req.GetVolumePath()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "a volume id is required")
	case p == "":
		return nil, status.Error(codes.InvalidArgument, "a volume path is required")
	}
	d.mu.Lock()
	v, ok := d.volumes[id]
	known := ok && (slices.Contains(v.Published, p) || slices.Contains(v.Staged, p))
	d.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %s does not exist", id)
	}
	if !known {
		return nil, status.Errorf(codes.NotFound, "volume %s is not mounted at %s", id, p)
	}
	if mounted, err := d.isMountPoint(p); err != nil || !mounted {
		return nil, status.Errorf(codes.NotFound, "volume %s is not mounted at %s", id, p)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return nil, status.Errorf(codes.Internal, "statfs %s: %v", p, err)
	}
	usedBytes, usedInodes, err := usage(d.volumePath(id))
	if err != nil {
		return nil, status.Errorf(codes.Internal, "measuring %s: %v", id, err)
	}
	//nolint:gosec // block and inode counts fit in int64
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: int64(st.Blocks) * st.Bsize, Available: int64(st.Bavail) * st.Bsize, Used: usedBytes},
		{Unit: csi.VolumeUsage_INODES, Total: int64(st.Files), Available: int64(st.Ffree), Used: usedInodes},
	}}, nil
}

// usage is what du reports for dir: the bytes of the blocks its files
// take, and the number of its entries, itself included.
func usage(dir string) (bytes, inodes int64, err error) {
	err = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		inodes++
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			bytes += st.Blocks * 512
		}
		return nil
	})
	return bytes, inodes, err
}

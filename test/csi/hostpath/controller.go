package hostpath

import (
	"context"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// ControllerGetCapabilities lists what the controller serves; publishing
// only when attach is required.
func (d *Driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	types := []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_GET_CAPACITY,
	}
	if d.cfg.AttachRequired {
		types = append(types, csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME)
	}
	caps := make([]*csi.ControllerServiceCapability, 0, len(types))
	for _, t := range types {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
			Rpc: &csi.ControllerServiceCapability_RPC{Type: t},
		}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// checkCapabilities refuses capabilities without an access type or mode,
// and a mix of block and mount access.
func checkCapabilities(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	block := wantsBlock(caps)
	for _, c := range caps {
		if block && c.GetMount() != nil {
			return status.Error(codes.InvalidArgument, "block and mount access cannot be mixed")
		}
		if c.GetMount() == nil && c.GetBlock() == nil {
			return status.Error(codes.InvalidArgument, "an access type is required")
		}
		if c.GetAccessMode() == nil {
			return status.Error(codes.InvalidArgument, "an access mode is required")
		}
	}
	return nil
}

// capacityOf is the size a capacity range asks for: its required bytes,
// else its limit, else 0 (no size).
func capacityOf(r *csi.CapacityRange) (int64, error) {
	req, limit := r.GetRequiredBytes(), r.GetLimitBytes()
	if req < 0 || limit < 0 {
		return 0, status.Error(codes.InvalidArgument, "negative capacity")
	}
	if limit > 0 && req > limit {
		return 0, status.Errorf(codes.InvalidArgument, "required bytes %d exceed the limit %d", req, limit)
	}
	if req > 0 {
		return req, nil
	}
	return limit, nil
}

// fits says whether a volume of capacity satisfies r.
func fits(capacity int64, r *csi.CapacityRange) bool {
	if capacity < r.GetRequiredBytes() {
		return false
	}
	return r.GetLimitBytes() == 0 || capacity <= r.GetLimitBytes()
}

func (d *Driver) topology() []*csi.Topology {
	return []*csi.Topology{{Segments: map[string]string{TopologyKey: d.cfg.NodeID}}}
}

// CreateVolume makes the volume's directory; a second call with the same
// name answers with the same volume when the size fits, AlreadyExists
// when it does not.
func (d *Driver) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "a volume name is required")
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	if req.GetVolumeContentSource() != nil {
		return nil, status.Error(codes.InvalidArgument, "volume content sources are not supported")
	}
	capacity, err := capacityOf(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	id := volumeID(req.GetName())
	d.mu.Lock()
	defer d.mu.Unlock()
	if v, ok := d.volumes[id]; ok {
		if !fits(v.Capacity, req.GetCapacityRange()) {
			return nil, status.Errorf(codes.AlreadyExists, "volume %q exists with capacity %d", req.GetName(), v.Capacity)
		}
		return &csi.CreateVolumeResponse{Volume: d.csiVolume(v)}, nil
	}
	if err := os.MkdirAll(d.volumePath(id), 0o777); err != nil {
		return nil, status.Errorf(codes.Internal, "creating the volume directory: %v", err)
	}
	// The mode a pod's non-root user can write, whatever the umask.
	if err := os.Chmod(d.volumePath(id), 0o777); err != nil {
		return nil, status.Errorf(codes.Internal, "creating the volume directory: %v", err)
	}
	v := &volume{ID: id, Name: req.GetName(), Capacity: capacity, Block: wantsBlock(req.GetVolumeCapabilities())}
	if v.Block {
		if err := d.createBlockImage(id, capacity); err != nil {
			return nil, err
		}
	}
	d.volumes[id] = v
	if err := d.saveLocked(); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	klog.InfoS("Created volume", "name", v.Name, "volumeID", id, "capacity", capacity)
	return &csi.CreateVolumeResponse{Volume: d.csiVolume(v)}, nil
}

func (d *Driver) csiVolume(v *volume) *csi.Volume {
	return &csi.Volume{
		VolumeId:           v.ID,
		CapacityBytes:      v.Capacity,
		AccessibleTopology: d.topology(),
	}
}

// DeleteVolume removes the volume's directory; an unknown id is already
// deleted. A volume still mounted on the node is refused.
func (d *Driver) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "a volume id is required")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.volumes[id]
	if !ok {
		return &csi.DeleteVolumeResponse{}, nil
	}
	if len(v.Staged) > 0 || len(v.Published) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is still mounted at %v %v", id, v.Staged, v.Published)
	}
	if err := os.RemoveAll(d.volumePath(id)); err != nil {
		return nil, status.Errorf(codes.Internal, "removing the volume directory: %v", err)
	}
	delete(d.volumes, id)
	if err := d.saveLocked(); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	klog.InfoS("Deleted volume", "volumeID", id)
	return &csi.DeleteVolumeResponse{}, nil
}

// ValidateVolumeCapabilities confirms what checkCapabilities accepts.
func (d *Driver) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "a volume id is required")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	d.mu.Lock()
	_, ok := d.volumes[req.GetVolumeId()]
	d.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %s does not exist", req.GetVolumeId())
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}

// ControllerPublishVolume attaches a volume to this driver's node, the
// only node it knows.
func (d *Driver) ControllerPublishVolume(_ context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	if !d.cfg.AttachRequired {
		return nil, status.Error(codes.Unimplemented, "the driver runs without attach")
	}
	id, node := req.GetVolumeId(), req.GetNodeId()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "a volume id is required")
	case node == "":
		return nil, status.Error(codes.InvalidArgument, "a node id is required")
	case req.GetVolumeCapability() == nil:
		return nil, status.Error(codes.InvalidArgument, "a volume capability is required")
	}
	if err := checkCapabilities([]*csi.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.volumes[id]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %s does not exist", id)
	}
	if node != d.cfg.NodeID {
		return nil, status.Errorf(codes.NotFound, "node %s does not exist", node)
	}
	if v.PublishedNode == "" {
		if limit := d.cfg.MaxVolumesPerNode; limit > 0 && d.publishedCountLocked() >= limit {
			return nil, status.Errorf(codes.ResourceExhausted, "node %s has %d volumes attached", node, limit)
		}
		v.PublishedNode = node
		if err := d.saveLocked(); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		klog.InfoS("Published volume", "volumeID", id, "node", node)
	}
	return &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{PublishContextKey: node}}, nil
}

func (d *Driver) publishedCountLocked() int64 {
	var n int64
	for _, v := range d.volumes {
		if v.PublishedNode != "" {
			n++
		}
	}
	return n
}

// ControllerUnpublishVolume detaches; an unknown volume or node is
// already detached.
func (d *Driver) ControllerUnpublishVolume(_ context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	if !d.cfg.AttachRequired {
		return nil, status.Error(codes.Unimplemented, "the driver runs without attach")
	}
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "a volume id is required")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.volumes[id]
	if !ok || v.PublishedNode == "" || (req.GetNodeId() != "" && req.GetNodeId() != v.PublishedNode) {
		return &csi.ControllerUnpublishVolumeResponse{}, nil
	}
	v.PublishedNode = ""
	if err := d.saveLocked(); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	klog.InfoS("Unpublished volume", "volumeID", id, "node", req.GetNodeId())
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

// GetCapacity reports the free space of the state directory's file system.
func (d *Driver) GetCapacity(context.Context, *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(d.cfg.StateDir, &st); err != nil {
		return nil, status.Errorf(codes.Internal, "statfs %s: %v", d.cfg.StateDir, err)
	}
	return &csi.GetCapacityResponse{AvailableCapacity: int64(st.Bavail) * st.Bsize}, nil //nolint:gosec // block counts fit
}

package csi

import (
	"context"
	"errors"
	"fmt"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/volumestats"
)

// ErrNoVolumeStats is returned for a driver without the node capability
// GET_VOLUME_STATS: its volumes are left out of the stats, as the kubelet
// leaves them out.
var ErrNoVolumeStats = errors.New("CSI driver does not report volume stats")

// StatsMeasurer reads a CSI volume's usage from its driver
// (NodeGetVolumeStats); it implements volumestats.CSIMeasurer.
type StatsMeasurer struct {
	Drivers Drivers
}

var _ volumestats.CSIMeasurer = StatsMeasurer{}

// VolumeStats asks v's driver for its usage at its publish path (and its
// staging path, when it has one). The CSI spec's Go bindings nodelet uses
// carry no volume condition, so none is reported.
func (s StatsMeasurer) VolumeStats(ctx context.Context, _ *v1.Pod, v volumestats.PodVolume) (volumestats.Measure, error) {
	c, err := s.Drivers.NodeClient(ctx, v.Driver)
	if err != nil {
		return volumestats.Measure{}, err
	}
	caps, err := nodeGetCapabilities(ctx, s.Drivers, c, v.Driver)
	if err != nil {
		return volumestats.Measure{}, fmt.Errorf("getting node capabilities of CSI driver %s: %w", v.Driver, err)
	}
	stats := false
	for _, c := range caps.GetCapabilities() {
		if c.GetRpc().GetType() == csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS {
			stats = true
		}
	}
	if !stats {
		return volumestats.Measure{}, fmt.Errorf("%w: %s", ErrNoVolumeStats, v.Driver)
	}
	resp, err := c.NodeGetVolumeStats(ctx, &csipb.NodeGetVolumeStatsRequest{
		VolumeId:          v.VolumeHandle,
		VolumePath:        v.Path,
		StagingTargetPath: v.StagingPath,
	})
	if err != nil {
		return volumestats.Measure{}, fmt.Errorf("reading stats of volume %s from CSI driver %s: %w", v.VolumeHandle, v.Driver, err)
	}
	return measureOf(resp), nil
}

// measureOf turns a NodeGetVolumeStats answer into a measure: the BYTES
// usage gives the sizes, the INODES usage the inode counts; negative
// numbers (a driver's mistake) count as zero.
func measureOf(resp *csipb.NodeGetVolumeStatsResponse) volumestats.Measure {
	var m volumestats.Measure
	for _, u := range resp.GetUsage() {
		switch u.GetUnit() {
		case csipb.VolumeUsage_BYTES:
			m.CapacityBytes, m.AvailableBytes, m.UsedBytes = nonNegative(u.GetTotal()), nonNegative(u.GetAvailable()), nonNegative(u.GetUsed())
		case csipb.VolumeUsage_INODES:
			m.Inodes, m.InodesFree, m.InodesUsed = nonNegative(u.GetTotal()), nonNegative(u.GetAvailable()), nonNegative(u.GetUsed())
		}
	}
	return m
}

func nonNegative(n int64) uint64 {
	if n < 0 {
		return 0
	}
	return uint64(n)
}

package csi

import (
	"context"
	"errors"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"

	"github.com/nodelet/nodelet/internal/volumestats"
)

// statsDriver answers capabilities and NodeGetVolumeStats, and records the
// stats request.
type statsDriver struct {
	csipb.NodeClient
	caps []csipb.NodeServiceCapability_RPC_Type
	resp *csipb.NodeGetVolumeStatsResponse
	req  *csipb.NodeGetVolumeStatsRequest
}

func (d *statsDriver) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest, ...grpc.CallOption) (*csipb.NodeGetCapabilitiesResponse, error) {
	resp := &csipb.NodeGetCapabilitiesResponse{}
	for _, c := range d.caps {
		resp.Capabilities = append(resp.Capabilities, &csipb.NodeServiceCapability{
			Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: c}},
		})
	}
	return resp, nil
}

func (d *statsDriver) NodeGetVolumeStats(_ context.Context, req *csipb.NodeGetVolumeStatsRequest, _ ...grpc.CallOption) (*csipb.NodeGetVolumeStatsResponse, error) {
	d.req = req
	return d.resp, nil
}

type oneDriver struct{ c csipb.NodeClient }

func (o oneDriver) NodeClient(_ context.Context, name string) (csipb.NodeClient, error) {
	if name != testDriver {
		return nil, errors.New("not registered")
	}
	return o.c, nil
}

func TestStatsMeasurer(t *testing.T) {
	usage := []*csipb.VolumeUsage{
		{Unit: csipb.VolumeUsage_BYTES, Total: 1000, Available: 600, Used: 400},
		{Unit: csipb.VolumeUsage_INODES, Total: 50, Available: 45, Used: 5},
	}
	sizes := volumestats.FsInfo{CapacityBytes: 1000, AvailableBytes: 600, UsedBytes: 400, Inodes: 50, InodesFree: 45, InodesUsed: 5}
	stats := csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS
	tests := []struct {
		name    string
		driver  string
		caps    []csipb.NodeServiceCapability_RPC_Type
		resp    *csipb.NodeGetVolumeStatsResponse
		want    volumestats.Measure
		wantErr string
	}{
		{name: "bytes and inodes", caps: []csipb.NodeServiceCapability_RPC_Type{stats}, resp: &csipb.NodeGetVolumeStatsResponse{Usage: usage}, want: volumestats.Measure{FsInfo: sizes}},
		{name: "negative numbers count as zero", caps: []csipb.NodeServiceCapability_RPC_Type{stats},
			resp: &csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{{Unit: csipb.VolumeUsage_BYTES, Total: 10, Available: -1, Used: 3}}},
			want: volumestats.Measure{FsInfo: volumestats.FsInfo{CapacityBytes: 10, UsedBytes: 3}}},
		{name: "driver without GET_VOLUME_STATS", wantErr: "does not report volume stats"},
		{name: "driver not registered", driver: "other.example.com", caps: []csipb.NodeServiceCapability_RPC_Type{stats}, wantErr: "not registered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &statsDriver{caps: tt.caps, resp: tt.resp}
			driver := tt.driver
			if driver == "" {
				driver = testDriver
			}
			v := volumestats.PodVolume{Name: "data", Path: "/pods/u/volumes/kubernetes.io~csi/pv-1/mount", Metrics: volumestats.KindCSI,
				Driver: driver, VolumeHandle: "vol-1", StagingPath: "/plugins/kubernetes.io/csi/d/h/globalmount"}
			got, err := StatsMeasurer{Drivers: oneDriver{c: d}}.VolumeStats(context.Background(), nil, v)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("measure (-want +got):\n%s", diff)
			}
			if d.req.GetVolumeId() != "vol-1" || d.req.GetVolumePath() != v.Path || d.req.GetStagingTargetPath() != v.StagingPath {
				t.Errorf("request = %v, want the volume's handle, publish path and staging path", d.req)
			}
		})
	}
}

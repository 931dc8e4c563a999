package hostpath_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	mount "k8s.io/mount-utils"

	"github.com/nodelet/nodelet/test/csi/hostpath"
)

type clients struct {
	csi.ControllerClient
	csi.NodeClient
}

func dial(t *testing.T, socket string) clients {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return clients{csi.NewControllerClient(conn), csi.NewNodeClient(conn)}
}

func isMounted(t *testing.T, p string) bool {
	t.Helper()
	notMnt, err := mount.New("").IsLikelyNotMountPoint(p)
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return !notMnt
}

var mountCap = &csi.VolumeCapability{
	AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
	AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
}

// TestMountsAndCallLog walks a persistent volume through its life and an
// ephemeral one through its publish, checking the mounts on the host and
// what the call log recorded.
func TestMountsAndCallLog(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	socket, cfg := startDriver(t, true)
	c := dial(t, socket)
	dir := t.TempDir()
	staging := filepath.Join(dir, "staging")
	if err := os.Mkdir(staging, 0o750); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "pod", "target")
	roTarget := filepath.Join(dir, "pod", "ro-target")
	if err := os.Mkdir(filepath.Dir(target), 0o750); err != nil {
		t.Fatal(err)
	}

	vol, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name:               "pvc-1",
		CapacityRange:      &csi.CapacityRange{RequiredBytes: 1 << 20},
		VolumeCapabilities: []*csi.VolumeCapability{mountCap},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := vol.GetVolume().GetVolumeId()
	if got := vol.GetVolume().GetCapacityBytes(); got != 1<<20 {
		t.Errorf("capacity %d, want %d", got, 1<<20)
	}
	if got := vol.GetVolume().GetAccessibleTopology()[0].GetSegments()[hostpath.TopologyKey]; got != "node-a" {
		t.Errorf("topology %q, want node-a", got)
	}
	volDir := filepath.Join(cfg.StateDir, id)
	if _, err := os.Stat(volDir); err != nil {
		t.Fatalf("the volume's directory: %v", err)
	}

	// Staging before the volume is attached is refused.
	_, err = c.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: mountCap})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("staging an unattached volume: %v, want FailedPrecondition", err)
	}
	pub, err := c.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: "node-a", VolumeCapability: mountCap})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
		VolumeId: id, StagingTargetPath: staging, VolumeCapability: mountCap, PublishContext: pub.GetPublishContext(),
	}); err != nil {
		t.Fatal(err)
	}
	if !isMounted(t, staging) {
		t.Fatal("the staging path is not a mount point after NodeStageVolume")
	}
	podInfo := map[string]string{"csi.storage.k8s.io/pod.name": "p", "csi.storage.k8s.io/pod.namespace": "ns"}
	for _, p := range []struct {
		target   string
		readonly bool
	}{{target, false}, {roTarget, true}} {
		if _, err := c.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
			VolumeId: id, StagingTargetPath: staging, TargetPath: p.target, VolumeCapability: mountCap,
			Readonly: p.readonly, VolumeContext: podInfo, PublishContext: pub.GetPublishContext(),
		}); err != nil {
			t.Fatal(err)
		}
		if !isMounted(t, p.target) {
			t.Fatalf("%s is not a mount point after NodePublishVolume", p.target)
		}
	}
	if err := os.WriteFile(filepath.Join(target, "data"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(volDir, "data")); err != nil || string(got) != "hello" {
		t.Fatalf("the volume's directory holds %q, %v; want what was written at the target", got, err)
	}
	if err := os.WriteFile(filepath.Join(roTarget, "other"), nil, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("writing to the read-only target: %v, want EROFS", err)
	}
	stats, err := c.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target})
	if err != nil {
		t.Fatal(err)
	}
	if u := stats.GetUsage(); len(u) != 2 || u[0].GetUsed() <= 0 || u[0].GetTotal() <= 0 || u[1].GetUsed() != 2 {
		t.Errorf("stats %v: want used bytes, a total, and 2 inodes used (the directory and its file)", u)
	}

	for _, p := range []string{target, roTarget} {
		if _, err := c.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: p}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s after NodeUnpublishVolume: %v, want it gone", p, err)
		}
	}
	// Again: idempotent.
	if _, err := c.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := c.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
			t.Fatal(err)
		}
	}
	if isMounted(t, staging) {
		t.Fatal("the staging path is still a mount point after NodeUnstageVolume")
	}
	if _, err := c.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: "node-a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(volDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the volume's directory after DeleteVolume: %v, want it gone", err)
	}

	// An ephemeral inline volume: no staging, a directory of its own that
	// goes with its unpublish.
	eph := filepath.Join(dir, "pod", "inline")
	ephContext := map[string]string{
		hostpath.EphemeralContextKey:               "true",
		"csi.storage.k8s.io/pod.name":              "p",
		"csi.storage.k8s.io/serviceAccount.tokens": `{"":{"token":"t","expirationTimestamp":"2030-01-01T00:00:00Z"}}`,
		"csi.storage.k8s.io/pod.uid":               "uid-1",
		"csi.storage.k8s.io/serviceAccount.name":   "default",
		"csi.storage.k8s.io/pod.namespace":         "ns",
	}
	if _, err := c.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
		VolumeId: "csi-inline-1", TargetPath: eph, VolumeCapability: mountCap, VolumeContext: ephContext,
	}); err != nil {
		t.Fatal(err)
	}
	if !isMounted(t, eph) {
		t.Fatal("the inline volume's target is not a mount point")
	}
	if _, err := os.Stat(filepath.Join(cfg.StateDir, "csi-inline-1")); err != nil {
		t.Fatalf("the inline volume's directory: %v", err)
	}
	if _, err := c.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-inline-1", TargetPath: eph}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cfg.StateDir, "csi-inline-1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the inline volume's directory after unpublish: %v, want it gone", err)
	}
	if _, err := c.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-inline-1", TargetPath: eph}); status.Code(err) != codes.NotFound {
		t.Fatalf("unpublishing a volume gone and a target gone: %v, want NotFound", err)
	}

	recs, err := hostpath.ReadCallLog(cfg.CallLog)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	var inline *hostpath.CallRecord
	for i, r := range recs {
		if r.Code == codes.OK.String() {
			count[r.Method]++
		}
		if r.Method == "NodePublishVolume" && r.VolumeID == "csi-inline-1" {
			inline = &recs[i]
		}
	}
	want := map[string]int{
		"CreateVolume": 1, "ControllerPublishVolume": 1, "NodeStageVolume": 1, "NodePublishVolume": 3,
		"NodeGetVolumeStats": 1, "NodeUnpublishVolume": 4, "NodeUnstageVolume": 2, "ControllerUnpublishVolume": 1,
		"DeleteVolume": 1,
	}
	for m, n := range want {
		if count[m] != n {
			t.Errorf("call log: %d successful %s, want %d (all: %v)", count[m], m, n, count)
		}
	}
	if inline == nil {
		t.Fatal("call log: no NodePublishVolume of the inline volume")
	}
	if inline.TargetPath != eph || inline.VolumeContext["csi.storage.k8s.io/serviceAccount.tokens"] == "" ||
		inline.VolumeContext["csi.storage.k8s.io/pod.uid"] != "uid-1" || inline.Time.IsZero() {
		t.Errorf("call log: the inline publish recorded as %+v", *inline)
	}
}

// TestWithoutAttach: no PUBLISH_UNPUBLISH_VOLUME, and staging needs no
// publish context.
func TestWithoutAttach(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	socket, _ := startDriver(t, false)
	c := dial(t, socket)
	caps, err := c.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cp := range caps.GetCapabilities() {
		if cp.GetRpc().GetType() == csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME {
			t.Error("PUBLISH_UNPUBLISH_VOLUME advertised without attach")
		}
	}
	vol, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-2", VolumeCapabilities: []*csi.VolumeCapability{mountCap}})
	if err != nil {
		t.Fatal(err)
	}
	id := vol.GetVolume().GetVolumeId()
	if _, err := c.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: "node-a", VolumeCapability: mountCap}); status.Code(err) != codes.Unimplemented {
		t.Errorf("ControllerPublishVolume without attach: %v, want Unimplemented", err)
	}
	staging := filepath.Join(t.TempDir(), "staging")
	if _, err := c.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: mountCap}); err != nil {
		t.Fatal(err)
	}
	if !isMounted(t, staging) {
		t.Fatal("the staging path is not a mount point")
	}
	if _, err := c.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}
	if isMounted(t, staging) {
		t.Fatal("the staging path is still a mount point")
	}
}

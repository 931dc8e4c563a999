package hostpath_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

var blockCap = &csi.VolumeCapability{
	AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
	AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
}

// TestBlockVolume walks a block volume through its life: a loop device
// attached at staging, its node bind-mounted at the publish target (a
// file), data written through one target read through another, and
// everything detached and removed at the end.
func TestBlockVolume(t *testing.T) {
	requireRoot(t)
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skip("no losetup")
	}
	ctx := context.Background()
	socket, cfg := startDriver(t, false)
	c := dial(t, socket)
	dir := t.TempDir()
	staging := filepath.Join(dir, "staging")
	if err := os.Mkdir(staging, 0o750); err != nil {
		t.Fatal(err)
	}
	targets := []string{filepath.Join(dir, "publish", "pod-a"), filepath.Join(dir, "publish", "pod-b")}
	if err := os.Mkdir(filepath.Dir(targets[0]), 0o750); err != nil {
		t.Fatal(err)
	}

	vol, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: "pvc-block", CapacityRange: &csi.CapacityRange{RequiredBytes: 4 << 20}, VolumeCapabilities: []*csi.VolumeCapability{blockCap},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := vol.GetVolume().GetVolumeId()
	image := filepath.Join(cfg.StateDir, id, "block.img")
	if fi, err := os.Stat(image); err != nil || fi.Size() != 4<<20 {
		t.Fatalf("block image %v, %v", fi, err)
	}
	if _, err := c.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: blockCap}); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "-j", image).Output()
	if err != nil || len(out) == 0 {
		t.Fatalf("no loop device after NodeStageVolume: %s %v", out, err)
	}
	for _, target := range targets {
		if _, err := c.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
			VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: blockCap,
		}); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(target); err != nil || fi.Mode()&os.ModeDevice == 0 {
			t.Fatalf("target %s is %v (%v), want a device", target, fi, err)
		}
	}
	if err := os.WriteFile(targets[0], []byte("block data"), 0o600); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len("block data"))
	f, err := os.Open(targets[1])
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Read(got)
	_ = f.Close()
	if err != nil || string(got) != "block data" {
		t.Errorf("read %q (%v) through the second target", got, err)
	}

	for _, target := range targets {
		if _, err := c.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(target); !os.IsNotExist(err) {
			t.Errorf("target %s left: %v", target, err)
		}
	}
	if _, err := c.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command("losetup", "-j", image).Output(); len(out) != 0 {
		t.Errorf("loop device left after NodeUnstageVolume: %s", out)
	}
	if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
		t.Fatal(err)
	}
}

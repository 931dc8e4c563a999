package csi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/mount-utils"
)

// mountingDriver is a CSI node service over gRPC on a unix socket that
// really mounts: a tmpfs at the staging path, bound onto each target.
type mountingDriver struct {
	csipb.UnimplementedNodeServer
	mounter mount.Interface
}

func (d *mountingDriver) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	return &csipb.NodeGetCapabilitiesResponse{Capabilities: []*csipb.NodeServiceCapability{{
		Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}},
	}}}, nil
}

func (d *mountingDriver) mounted(path string) bool {
	m, err := d.mounter.IsMountPoint(path)
	return err == nil && m
}

func (d *mountingDriver) NodeStageVolume(_ context.Context, req *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	if !d.mounted(req.StagingTargetPath) {
		if err := unix.Mount("tmpfs", req.StagingTargetPath, "tmpfs", 0, "size=1m"); err != nil {
			return nil, fmt.Errorf("staging: %w", err)
		}
	}
	return &csipb.NodeStageVolumeResponse{}, nil
}

func (d *mountingDriver) NodeUnstageVolume(_ context.Context, req *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	if d.mounted(req.StagingTargetPath) {
		if err := unix.Unmount(req.StagingTargetPath, 0); err != nil {
			return nil, fmt.Errorf("unstaging: %w", err)
		}
	}
	return &csipb.NodeUnstageVolumeResponse{}, nil
}

func (d *mountingDriver) NodePublishVolume(_ context.Context, req *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	if err := os.MkdirAll(req.TargetPath, 0o750); err != nil {
		return nil, err
	}
	if !d.mounted(req.TargetPath) {
		if err := unix.Mount(req.StagingTargetPath, req.TargetPath, "", unix.MS_BIND, ""); err != nil {
			return nil, fmt.Errorf("publishing: %w", err)
		}
	}
	return &csipb.NodePublishVolumeResponse{}, nil
}

func (d *mountingDriver) NodeUnpublishVolume(_ context.Context, req *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	if d.mounted(req.TargetPath) {
		if err := unix.Unmount(req.TargetPath, 0); err != nil {
			return nil, fmt.Errorf("unpublishing: %w", err)
		}
	}
	// Like many drivers, remove the target too.
	if err := os.Remove(req.TargetPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return &csipb.NodeUnpublishVolumeResponse{}, nil
}

// socketDrivers serves the driver's node client while it is registered.
type socketDrivers struct {
	client     csipb.NodeClient
	registered bool
}

func (s *socketDrivers) NodeClient(_ context.Context, name string) (csipb.NodeClient, error) {
	if !s.registered || name != testDriver {
		return nil, fmt.Errorf("CSI driver %s is not registered", name)
	}
	return s.client, nil
}

// mountsUnder lists the mount points below dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	mps, err := mount.New("").List()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mp := range mps {
		if strings.HasPrefix(mp.Path, dir+"/") {
			out = append(out, mp.Path)
		}
	}
	return out
}

// TestPublishWithRealMounts runs publish and teardown against a driver
// over gRPC that really mounts, with the host's mount checks: two pods
// share a staging, data written by one is seen by the other, the teardown
// of the first keeps the second's mounts, and a teardown attempted while
// the driver is away leaves everything for the retry.
func TestPublishWithRealMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	probe := t.TempDir()
	if err := unix.Mount("tmpfs", probe, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount: %v", err)
	}
	_ = unix.Unmount(probe, 0)

	e := newEnv(t)
	root, err := filepath.EvalSymlinks(e.root)
	if err != nil {
		t.Fatal(err)
	}
	e.root = root
	t.Cleanup(func() {
		for _, mp := range mountsUnder(t, root) {
			_ = unix.Unmount(mp, unix.MNT_DETACH)
		}
	})
	sock := filepath.Join(t.TempDir(), "csi.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csipb.RegisterNodeServer(srv, &mountingDriver{mounter: mount.New("")})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	drivers := &socketDrivers{client: csipb.NewNodeClient(conn), registered: true}
	e.attach("vol-1", nil)

	newPublisher := func() *Publisher {
		p := e.publisher()
		p.drivers = drivers
		p.mounter = mount.New("")
		return p
	}
	ctx := context.Background()
	p := newPublisher()
	targetA, err := p.Publish(ctx, testPod("a"), pvVolume("vol-1"))
	if err != nil {
		t.Fatal(err)
	}
	targetB, err := p.Publish(ctx, testPod("b"), pvVolume("vol-1"))
	if err != nil {
		t.Fatal(err)
	}
	// Publishing again is harmless.
	if _, err := p.Publish(ctx, testPod("a"), pvVolume("vol-1")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(targetA, "hello"), []byte("from a"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(targetB, "hello")); err != nil || string(b) != "from a" {
		t.Fatalf("pod b reads %q, %v", b, err)
	}
	if got := len(mountsUnder(t, root)); got != 3 {
		t.Fatalf("%d mounts, want the staging and two targets: %v", got, mountsUnder(t, root))
	}

	if err := newPublisher().UnpublishPod(ctx, "uid-a"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(targetB, "hello")); err != nil || string(b) != "from a" {
		t.Fatalf("after pod a's teardown pod b reads %q, %v", b, err)
	}

	drivers.registered = false
	if err := newPublisher().UnpublishPod(ctx, "uid-b"); err == nil {
		t.Fatal("teardown without the driver succeeded")
	}
	if got := len(mountsUnder(t, root)); got != 2 {
		t.Fatalf("%d mounts, want pod b's and the staging: %v", got, mountsUnder(t, root))
	}
	drivers.registered = true
	if err := newPublisher().UnpublishPod(ctx, "uid-b"); err != nil {
		t.Fatal(err)
	}
	if mps := mountsUnder(t, root); len(mps) != 0 {
		t.Errorf("mounts left: %v", mps)
	}
	for _, path := range []string{podCSIDir(root, "uid-a"), podCSIDir(root, "uid-b"), stagingDataDir(root, testDriver, "vol-1")} {
		if exists(path) {
			t.Errorf("%s is left", path)
		}
	}
}

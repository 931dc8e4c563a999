package hostpath_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"

	"github.com/nodelet/nodelet/test/csi/hostpath"
)

// startDriver serves a driver on a socket in a temp dir until the test
// ends and returns its socket and configuration.
func startDriver(t *testing.T, attach bool) (string, hostpath.Config) {
	t.Helper()
	dir := t.TempDir()
	cfg := hostpath.Config{
		Endpoint:          "unix://" + filepath.Join(dir, "csi.sock"),
		NodeID:            "node-a",
		StateDir:          filepath.Join(dir, "state"),
		MaxVolumesPerNode: 100,
		AttachRequired:    attach,
		CallLog:           filepath.Join(dir, "calls.jsonl"),
	}
	d, err := hostpath.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("driver: %v", err)
		}
	})
	socket := filepath.Join(dir, "csi.sock")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(socket); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the driver did not create %s", socket)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return socket, cfg
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
}

// TestSanity runs the kubernetes-csi sanity suite against the driver with
// attach on, so that ControllerPublish and the publish context are
// exercised too.
func TestSanity(t *testing.T) {
	requireRoot(t)
	socket, _ := startDriver(t, true)
	dir := t.TempDir()
	cfg := sanity.NewTestConfig()
	cfg.Address = "unix://" + socket
	cfg.TargetPath = filepath.Join(dir, "target")
	cfg.StagingPath = filepath.Join(dir, "staging")
	cfg.TestNodeVolumeAttachLimit = true
	sanity.Test(t, cfg)
}

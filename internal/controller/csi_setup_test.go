package controller

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/agent"
	"github.com/nodelet/nodelet/internal/csi"
)

// recordingRunner records the runnables added to it.
type recordingRunner struct{ added []manager.Runnable }

func (r *recordingRunner) Add(x manager.Runnable) error {
	r.added = append(r.added, x)
	return nil
}

func TestSetupCSI(t *testing.T) {
	if _, ok := Default["csi"]; !ok {
		t.Fatal(`"csi" is not in Default`)
	}
	root := t.TempDir()
	cfg := &v1alpha1.NodeletConfiguration{NodeName: "n", RootDir: root, HealthzBindAddress: "0", MetricsBindAddress: "0"}
	v1alpha1.SetDefaults(cfg)
	mgr, err := agent.NewStandaloneManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	local := &recordingRunner{}
	deps := &Deps{Config: cfg, Local: local}
	if err := setupCSI(mgr, deps); err != nil {
		t.Fatal(err)
	}
	// The plugin watcher, and the device plugin manager it hands device
	// plugins to.
	if len(local.added) != 2 {
		t.Fatalf("runnables added to run without the API server: %d, want the device plugin manager and the plugin watcher", len(local.added))
	}
	w, ok := local.added[1].(*csi.Watcher)
	if !ok {
		t.Fatalf("last local runnable is %T, want *csi.Watcher", local.added[1])
	}
	if deps.devices == nil {
		t.Error("no device plugin manager for the watcher's DevicePlugin registrations")
	}
	if reg := csiDriversFor(deps); reg == nil || reg != csiDriversFor(deps) {
		t.Error("csiDriversFor does not return one registry")
	}
	if reg := draDriversFor(mgr, deps); reg == nil || reg != draDriversFor(mgr, deps) {
		t.Error("draDriversFor does not return one registry")
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Start(ctx) }()
	dir := filepath.Join(root, "plugins_registry")
	deadline := time.Now().Add(5 * time.Second)
	for {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not created", dir)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

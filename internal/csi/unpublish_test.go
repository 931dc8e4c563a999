package csi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/mount-utils"
)

// assertGone checks that nothing of the pod's CSI volumes nor of the
// volume handle's staging is left on disk.
func assertGone(t *testing.T, e *env, uid types.UID, handle string) {
	t.Helper()
	for _, path := range []string{podCSIDir(e.root, uid), stagingDataDir(e.root, testDriver, handle)} {
		if exists(path) {
			t.Errorf("%s is left", path)
		}
	}
	if mps, _ := e.driver.mounter.List(); len(mps) != 0 {
		t.Errorf("mounts left: %v", mps)
	}
}

// publishPods publishes the volume handle for each pod.
func publishPods(t *testing.T, e *env, handle string, pods ...string) {
	t.Helper()
	e.attach(handle, nil)
	p := e.publisher()
	for _, name := range pods {
		if _, err := p.Publish(context.Background(), testPod(name), pvVolume(handle)); err != nil {
			t.Fatal(err)
		}
	}
	e.driver.calls = map[string]int{}
}

func TestUnpublishPodLastUserUnstages(t *testing.T) {
	e := newEnv(t, csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	publishPods(t, e, "vol-1", "a", "b")
	ctx := context.Background()

	if err := e.publisher().UnpublishPod(ctx, "uid-a"); err != nil {
		t.Fatal(err)
	}
	if e.driver.count("unpublish") != 1 || e.driver.count("unstage") != 0 {
		t.Fatalf("unpublish %d, unstage %d: pod b still uses the stage", e.driver.count("unpublish"), e.driver.count("unstage"))
	}
	if exists(podCSIDir(e.root, "uid-a")) {
		t.Error("pod a's volumes are left")
	}
	staging := stagingPath(e.root, testDriver, "vol-1")
	if mounted, _ := e.driver.mounter.IsMountPoint(staging); !mounted {
		t.Error("the staging of pod b's volume is gone")
	}
	// Orphan collection leaves a staging that a pod names.
	if err := e.publisher().UnstageOrphans(ctx); err != nil || e.driver.count("unstage") != 0 {
		t.Fatalf("UnstageOrphans: %v, %d unstages", err, e.driver.count("unstage"))
	}

	if err := e.publisher().UnpublishPod(ctx, "uid-b"); err != nil {
		t.Fatal(err)
	}
	if e.driver.count("unpublish") != 2 || e.driver.count("unstage") != 1 {
		t.Errorf("unpublish %d, unstage %d, want 2 and 1", e.driver.count("unpublish"), e.driver.count("unstage"))
	}
	assertGone(t, e, "uid-b", "vol-1")
	// Idempotent: nothing left to do, nothing asked.
	if err := e.publisher().UnpublishPod(ctx, "uid-b"); err != nil || e.driver.count("unpublish") != 2 {
		t.Errorf("repeat: %v, %d unpublishes", err, e.driver.count("unpublish"))
	}
}

func TestUnpublishPodWaitsForItsDriver(t *testing.T) {
	e := newEnv(t, csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	publishPods(t, e, "vol-1", "a")
	ctx := context.Background()
	// After a restart the driver has not registered again yet.
	e.drivers.set(testDriver, nil)
	err := e.publisher().UnpublishPod(ctx, "uid-a")
	if err == nil || !strings.Contains(err.Error(), "not registered") {
		t.Fatalf("got %v, want the driver's absence", err)
	}
	for _, path := range []string{
		filepath.Join(publishDataDir(e.root, "uid-a", "pv-vol-1"), volDataFileName),
		publishPath(e.root, "uid-a", "pv-vol-1"),
		filepath.Join(stagingDataDir(e.root, testDriver, "vol-1"), volDataFileName),
	} {
		if !exists(path) {
			t.Errorf("%s was removed", path)
		}
	}
	if err := e.publisher().UnstageOrphans(ctx); err != nil {
		t.Errorf("UnstageOrphans with the stage in use: %v", err)
	}
	e.drivers.set(testDriver, e.driver)
	if err := e.publisher().UnpublishPod(ctx, "uid-a"); err != nil {
		t.Fatal(err)
	}
	assertGone(t, e, "uid-a", "vol-1")
}

func TestUnpublishPodNeverRemovesAMountPoint(t *testing.T) {
	e := newEnv(t, csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	publishPods(t, e, "vol-1", "a")
	e.driver.keepMounted = true // says it unmounted, did not
	err := e.publisher().UnpublishPod(context.Background(), "uid-a")
	if err == nil || !strings.Contains(err.Error(), "is still mounted") {
		t.Fatalf("got %v, want still mounted", err)
	}
	if !exists(filepath.Join(publishDataDir(e.root, "uid-a", "pv-vol-1"), volDataFileName)) {
		t.Error("the record of a still mounted volume was removed")
	}
	if e.driver.count("unstage") != 0 {
		t.Error("unstaged under a mounted publish")
	}
	e.driver.keepMounted = false
	if err := e.publisher().UnpublishPod(context.Background(), "uid-a"); err != nil {
		t.Fatal(err)
	}
	assertGone(t, e, "uid-a", "vol-1")
}

func TestUnpublishPodDriverFailures(t *testing.T) {
	for _, method := range []string{"unpublish", "unstage"} {
		t.Run(method, func(t *testing.T) {
			e := newEnv(t, csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
			publishPods(t, e, "vol-1", "a")
			ctx := context.Background()
			e.driver.failing(method, errors.New("driver busy"))
			if err := e.publisher().UnpublishPod(ctx, "uid-a"); err == nil {
				t.Fatal("UnpublishPod succeeded with a failing driver")
			}
			e.driver.failing(method, nil)
			// A new publisher, as after a restart: the pod's teardown and
			// the housekeeping's orphan collection finish the work.
			p := e.publisher()
			if err := p.UnpublishPod(ctx, "uid-a"); err != nil {
				t.Fatal(err)
			}
			if err := p.UnstageOrphans(ctx); err != nil {
				t.Fatal(err)
			}
			if e.driver.count("unpublish") != 1 || e.driver.count("unstage") != 1 {
				t.Errorf("unpublish %d, unstage %d, want 1 and 1", e.driver.count("unpublish"), e.driver.count("unstage"))
			}
			assertGone(t, e, "uid-a", "vol-1")
		})
	}
}

// TestUnpublishPodCrashes kills a teardown before each of its steps; a new
// publisher over the same root directory finishes it. A driver call that
// succeeded before the kill but whose record was not yet removed is made
// again (drivers are idempotent); every other call is made once in all.
func TestUnpublishPodCrashes(t *testing.T) {
	tests := []struct {
		step                    string
		wantUnpublish, wantUnst int
	}{
		{stepUnpublish, 1, 1},
		{stepRemovePublish, 2, 1},
		{stepUnstage, 1, 1},
		{stepRemoveStaging, 1, 2},
	}
	for _, tt := range tests {
		for _, shared := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/shared=%v", tt.step, shared), func(t *testing.T) {
				e := newEnv(t, csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
				pods := []string{"a"}
				if shared {
					pods = append(pods, "b")
				}
				publishPods(t, e, "vol-1", pods...)
				ctx := context.Background()

				killed := e.publisher()
				killed.step = func(name string) error {
					if name == tt.step {
						return errKilled
					}
					return nil
				}
				err := killed.UnpublishPod(ctx, "uid-a")
				if shared && (tt.step == stepUnstage || tt.step == stepRemoveStaging) {
					// Pod b keeps the stage: no unstage step to kill.
					if err != nil {
						t.Fatal(err)
					}
				} else if !errors.Is(err, errKilled) {
					t.Fatalf("got %v, want the kill", err)
				}

				restarted := e.publisher()
				if err := restarted.UnstageOrphans(ctx); err != nil {
					t.Fatal(err)
				}
				if err := restarted.UnpublishPod(ctx, "uid-a"); err != nil {
					t.Fatal(err)
				}
				wantUnpublish, wantUnstage := tt.wantUnpublish, tt.wantUnst
				if shared {
					staging := stagingPath(e.root, testDriver, "vol-1")
					if mounted, _ := e.driver.mounter.IsMountPoint(staging); !mounted || e.driver.count("unstage") != 0 {
						t.Fatalf("pod b's stage: mounted %v, %d unstages", mounted, e.driver.count("unstage"))
					}
					if mounted, _ := e.driver.mounter.IsMountPoint(publishPath(e.root, "uid-b", "pv-vol-1")); !mounted {
						t.Fatal("pod b's volume was unpublished")
					}
					if err := restarted.UnpublishPod(ctx, "uid-b"); err != nil {
						t.Fatal(err)
					}
					wantUnpublish, wantUnstage = wantUnpublish+1, 1
					if tt.step == stepUnstage || tt.step == stepRemoveStaging {
						wantUnpublish = 2 // the kill never came
					}
					assertGone(t, e, "uid-b", "vol-1")
				}
				if got := e.driver.count("unpublish"); got != wantUnpublish {
					t.Errorf("unpublish calls %d, want %d", got, wantUnpublish)
				}
				if got := e.driver.count("unstage"); got != wantUnstage {
					t.Errorf("unstage calls %d, want %d", got, wantUnstage)
				}
				assertGone(t, e, "uid-a", "vol-1")
			})
		}
	}
}

func TestUnpublishPodRemovesUnrecordedDirectory(t *testing.T) {
	// A Publish that died before writing its record left a directory no
	// driver knows of.
	e := newEnv(t)
	dir := publishDataDir(e.root, "uid-a", "pv-vol-1")
	if err := os.MkdirAll(dir, dirMode); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "."+volDataFileName+".123"), []byte("{"), fileMode); err != nil {
		t.Fatal(err)
	}
	if err := e.publisher().UnpublishPod(context.Background(), "uid-a"); err != nil {
		t.Fatal(err)
	}
	if exists(podCSIDir(e.root, "uid-a")) {
		t.Error("the directory is left")
	}
	if n := e.driver.count("unpublish"); n != 0 {
		t.Errorf("%d driver calls for an unrecorded volume", n)
	}
}

func TestRemoveUnmountedWithTheHostMounter(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := filepath.Join(t.TempDir(), "mount")
	if err := os.Mkdir(dir, dirMode); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	p := newEnv(t).publisher()
	p.mounter = mount.New("")
	if err := p.removeUnmounted(dir); err == nil || !strings.Contains(err.Error(), "still mounted") {
		t.Fatalf("got %v, want still mounted", err)
	}
	if err := unix.Unmount(dir, 0); err != nil {
		t.Fatal(err)
	}
	if err := p.removeUnmounted(dir); err != nil || exists(dir) {
		t.Fatalf("unmounted directory: %v, exists %v", err, exists(dir))
	}
	if err := p.removeUnmounted(dir); err != nil {
		t.Errorf("gone already: %v", err)
	}
}

func TestUnstageOrphans(t *testing.T) {
	e := newEnv(t, csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	publishPods(t, e, "vol-1", "a")
	publishPods(t, e, "vol-2", "a")
	ctx := context.Background()
	// A crash right after the pod's volumes were unpublished and their
	// records removed: the stagings are orphans.
	for _, h := range []string{"vol-1", "vol-2"} {
		if err := e.driver.mounter.Unmount(publishPath(e.root, "uid-a", "pv-"+h)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(filepath.Join(e.root, "pods")); err != nil {
		t.Fatal(err)
	}
	// Something else of the plugin's directory is no staging of ours.
	other := filepath.Join(driversDir(e.root), testDriver, "not-a-staging")
	if err := os.MkdirAll(other, dirMode); err != nil {
		t.Fatal(err)
	}

	e.drivers.set(testDriver, nil)
	if err := e.publisher().UnstageOrphans(ctx); err == nil {
		t.Fatal("UnstageOrphans succeeded without the driver")
	}
	if !exists(stagingDataDir(e.root, testDriver, "vol-1")) || !exists(stagingDataDir(e.root, testDriver, "vol-2")) {
		t.Fatal("stagings removed without their driver")
	}
	e.drivers.set(testDriver, e.driver)
	if err := e.publisher().UnstageOrphans(ctx); err != nil {
		t.Fatal(err)
	}
	if e.driver.count("unstage") != 2 {
		t.Errorf("%d unstages, want 2", e.driver.count("unstage"))
	}
	assertGone(t, e, "uid-a", "vol-1")
	assertGone(t, e, "uid-a", "vol-2")
	if !exists(other) {
		t.Error("a directory that is no staging was removed")
	}
}

// TestUnpublishRacesPublish tears down one pod while another publishes the
// same volume: whichever goes first, the second pod ends with its volume
// staged and published.
func TestUnpublishRacesPublish(t *testing.T) {
	for i := 0; i < 20; i++ {
		e := newEnv(t, csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
		publishPods(t, e, "vol-1", "a")
		p := e.publisher()
		ctx := context.Background()
		errs := make(chan error, 2)
		go func() { errs <- p.UnpublishPod(ctx, "uid-a") }()
		go func() {
			_, err := p.Publish(ctx, testPod("b"), pvVolume("vol-1"))
			errs <- err
		}()
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		for _, path := range []string{stagingPath(e.root, testDriver, "vol-1"), publishPath(e.root, "uid-b", "pv-vol-1")} {
			if mounted, _ := e.driver.mounter.IsMountPoint(path); !mounted {
				t.Fatalf("round %d: %s is not mounted", i, path)
			}
		}
		if !exists(filepath.Join(stagingDataDir(e.root, testDriver, "vol-1"), volDataFileName)) {
			t.Fatalf("round %d: the staging record is gone", i)
		}
	}
}

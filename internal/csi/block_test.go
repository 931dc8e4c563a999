package csi

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/go-cmp/cmp"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/volume"
)

func blockVolume(handle string) *volume.CSIVolume {
	v := pvVolume(handle)
	v.Block = true
	return v
}

func TestBlockPaths(t *testing.T) {
	root := "/var/lib/kubelet"
	for got, want := range map[string]string{
		blockStagingPath(root, "pv-1"):          "/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/staging/pv-1",
		blockPublishPath(root, "uid-1", "pv-1"): "/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/pv-1/uid-1",
		blockDataDir(root, "pv-1"):              "/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/pv-1/data",
		podBlockPath(root, "uid-1", "pv-1"):     "/var/lib/kubelet/pods/uid-1/volumeDevices/kubernetes.io~csi/pv-1",
	} {
		if got != want {
			t.Errorf("path %s, want %s", got, want)
		}
	}
}

func TestPublishBlockTwoPodsThenTeardown(t *testing.T) {
	e := newEnv(t, csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	e.csiDrivers[testDriver] = &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{
		PodInfoOnMount: ptr.To(true),
		TokenRequests:  []storagev1.TokenRequest{{Audience: "vault"}},
	}}
	e.attach("vol-1", map[string]string{"lun": "1"})
	ctx := context.Background()
	spec := "pv-vol-1"

	path, err := e.publisher().Publish(ctx, testPod("web"), blockVolume("vol-1"))
	if err != nil {
		t.Fatal(err)
	}
	if want := podBlockPath(e.root, "uid-web", spec); path != want {
		t.Errorf("path %s, want the pod's link %s", path, want)
	}
	if dest, err := os.Readlink(path); err != nil || dest != blockPublishPath(e.root, "uid-web", spec) {
		t.Errorf("link to %q (%v), want the publish path", dest, err)
	}
	stage, pub := e.driver.stages[0], e.driver.publishs[0]
	if stage.StagingTargetPath != blockStagingPath(e.root, spec) || stage.VolumeCapability.GetBlock() == nil || stage.PublishContext["lun"] != "1" {
		t.Errorf("stage request %v", stage)
	}
	if pub.TargetPath != blockPublishPath(e.root, "uid-web", spec) || pub.StagingTargetPath != blockStagingPath(e.root, spec) ||
		pub.VolumeCapability.GetBlock() == nil || pub.VolumeCapability.GetMount() != nil {
		t.Errorf("publish request %v", pub)
	}
	if _, ok := pub.VolumeContext[tokensKey]; ok || pub.VolumeContext[podNameKey] != "web" || pub.VolumeContext["attr"] != "value" {
		t.Errorf("publish volume context %v: want the attributes and pod info, no tokens", pub.VolumeContext)
	}
	if len(e.tokenCalls) != 0 {
		t.Errorf("tokens requested for a block volume: %v", e.tokenCalls)
	}
	rec, err := readVolData(blockDataDir(e.root, spec))
	if err != nil || rec.VolumeHandle != "vol-1" || rec.DriverName != testDriver || rec.SpecVolID != spec {
		t.Errorf("record %+v (%v)", rec, err)
	}

	// A second pod: staged again (drivers are idempotent), published at
	// its own path.
	if _, err := e.publisher().Publish(ctx, testPod("db"), blockVolume("vol-1")); err != nil {
		t.Fatal(err)
	}
	if e.driver.count("publish") != 2 {
		t.Errorf("publishes %d, want 2", e.driver.count("publish"))
	}

	// The first pod goes: unpublished, still staged for the second.
	if err := e.publisher().UnpublishPod(ctx, "uid-web"); err != nil {
		t.Fatal(err)
	}
	if e.driver.count("unpublish") != 1 || e.driver.count("unstage") != 0 {
		t.Errorf("unpublish %d, unstage %d; want 1, 0", e.driver.count("unpublish"), e.driver.count("unstage"))
	}
	if exists(podBlockPath(e.root, "uid-web", spec)) || exists(blockPublishPath(e.root, "uid-web", spec)) {
		t.Error("the first pod's link or publish path is left")
	}
	if !exists(blockStagingPath(e.root, spec)) {
		t.Error("the staging went with the first pod")
	}

	// The second goes: unpublished and unstaged, nothing left.
	if err := e.publisher().UnpublishPod(ctx, "uid-db"); err != nil {
		t.Fatal(err)
	}
	if e.driver.count("unpublish") != 2 || e.driver.count("unstage") != 1 {
		t.Errorf("unpublish %d, unstage %d; want 2, 1", e.driver.count("unpublish"), e.driver.count("unstage"))
	}
	var left []string
	_ = filepath.Walk(e.root, func(p string, info os.FileInfo, err error) error {
		if err == nil && p != e.root && !info.IsDir() {
			left = append(left, p)
		}
		return nil
	})
	if len(left) != 0 {
		t.Errorf("files left: %v", left)
	}
	for _, d := range []string{blockDevicesDir(e.root) + "/" + spec, blockPublishDir(e.root, spec), blockStagingPath(e.root, spec), filepath.Join(e.root, "pods", "uid-db", "volumeDevices")} {
		if exists(d) {
			t.Errorf("%s is left", d)
		}
	}
	if mounts, _ := e.driver.mounter.List(); len(mounts) != 0 {
		t.Errorf("mounts left: %v", mounts)
	}
}

// A crash at each step of a block publish: the teardown that follows
// finds the volume from disk alone and leaves nothing staged or mounted.
func TestPublishBlockCrashes(t *testing.T) {
	for _, step := range []string{stepStage, stepPublish} {
		t.Run(step, func(t *testing.T) {
			e := newEnv(t, csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
			e.attach("vol-1", nil)
			ctx := context.Background()
			killed := e.publisher()
			killed.step = func(name string) error {
				if name == step {
					return errKilled
				}
				return nil
			}
			if _, err := killed.Publish(ctx, testPod("web"), blockVolume("vol-1")); err == nil {
				t.Fatal("publish survived the crash")
			}
			if err := e.publisher().UnpublishPod(ctx, "uid-web"); err != nil {
				t.Fatal(err)
			}
			if exists(blockDevicesDir(e.root)+"/pv-vol-1") || exists(podBlockPath(e.root, "uid-web", "pv-vol-1")) || exists(blockStagingPath(e.root, "pv-vol-1")) {
				t.Error("files left after the teardown")
			}
			if mounts, _ := e.driver.mounter.List(); len(mounts) != 0 {
				t.Errorf("mounts left: %v", mounts)
			}
		})
	}
}

func TestBlockCapability(t *testing.T) {
	got := blockCapability(blockVolume("v"), nodeCaps{})
	want := &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	if d := cmp.Diff(want.String(), got.String()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// A crash between the last unpublish and the unstage: no pod links to the
// volume any more, and UnstageOrphans unstages it; a volume a pod still
// links to is left alone.
func TestUnstageOrphanBlocks(t *testing.T) {
	e := newEnv(t, csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	e.attach("vol-1", nil)
	e.attach("vol-2", nil)
	ctx := context.Background()
	for _, pod := range []string{"web", "db"} {
		handle := map[string]string{"web": "vol-1", "db": "vol-2"}[pod]
		if _, err := e.publisher().Publish(ctx, testPod(pod), blockVolume(handle)); err != nil {
			t.Fatal(err)
		}
	}
	killed := e.publisher()
	killed.step = func(name string) error {
		if name == stepUnstage {
			return errKilled
		}
		return nil
	}
	if err := killed.UnpublishPod(ctx, "uid-web"); err == nil {
		t.Fatal("teardown survived the crash")
	}
	if !exists(blockStagingPath(e.root, "pv-vol-1")) || e.driver.count("unstage") != 0 {
		t.Fatal("the crash did not leave the staging")
	}
	if err := e.publisher().UnstageOrphans(ctx); err != nil {
		t.Fatal(err)
	}
	if e.driver.count("unstage") != 1 || exists(blockStagingPath(e.root, "pv-vol-1")) || exists(blockDataDir(e.root, "pv-vol-1")) {
		t.Errorf("orphan not unstaged: unstage calls %d", e.driver.count("unstage"))
	}
	if !exists(blockStagingPath(e.root, "pv-vol-2")) || !exists(blockDataDir(e.root, "pv-vol-2")) {
		t.Error("the volume a pod still links to was unstaged")
	}
}

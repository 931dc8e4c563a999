package csi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/internal/atomicfile"
)

// The steps of a publish and of a teardown, named for the test hook.
const (
	stepStage         = "stage"
	stepPublish       = "publish"
	stepUnpublish     = "unpublish"
	stepRemovePublish = "remove-publish"
	stepUnstage       = "unstage"
	stepRemoveStaging = "remove-staging"
)

// UnpublishPod unpublishes the pod's CSI block volumes (unpublishPodBlocks)
// and every CSI volume that a vol_data.json under the pod's directory names: NodeUnpublishVolume, then the removal of the mount
// directory and the record. A volume whose driver is not registered (yet)
// or whose driver fails keeps all its files, and the error is returned for
// the caller to retry. After each volume, its staging is unstaged when no
// pod names the volume any more. A directory that is still a mount point is
// never removed.
func (p *Publisher) UnpublishPod(ctx context.Context, uid types.UID) error {
	if err := checkPathElement("pod UID", string(uid)); err != nil {
		return err
	}
	var errs []error
	blocks, err := p.unpublishPodBlocks(ctx, uid)
	if err != nil {
		errs = append(errs, err)
	}
	if blocks && p.volumesInUse != nil {
		defer p.volumesInUse.released()
	}
	dir := podCSIDir(p.root, uid)
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return errors.Join(errs...)
	}
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("listing CSI volumes of pod %s: %w", uid, err))...)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if err := p.unpublishVolume(ctx, uid, e.Name()); err != nil {
			errs = append(errs, fmt.Errorf("tearing down CSI volume %s of pod %s: %w", e.Name(), uid, err))
		}
	}
	if p.volumesInUse != nil && len(entries) > 0 {
		// Volumes may have left use: the attach/detach controller detaches
		// them once the Node's status says so.
		p.volumesInUse.released()
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := os.Remove(dir); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	return nil
}

// unpublishVolume tears down one of the pod's volumes and then its staging
// if no pod uses it any more.
func (p *Publisher) unpublishVolume(ctx context.Context, uid types.UID, specName string) error {
	dataDir := publishDataDir(p.root, uid, specName)
	target := filepath.Join(dataDir, publishMountName)
	d, err := readVolData(dataDir)
	if os.IsNotExist(err) {
		// Without a record no driver was asked anything for this
		// directory: Publish writes the record first.
		if err := p.removeUnmounted(target); err != nil {
			return err
		}
		return removeDataDir(dataDir)
	}
	if err != nil {
		return err
	}
	unlock := p.lock(d.DriverName, d.VolumeHandle)
	defer unlock()
	if err := p.nodeUnpublish(ctx, d, target, "volume"); err != nil {
		return err
	}
	if err := p.removeUnmounted(target); err != nil {
		return err
	}
	if err := removeFile(filepath.Join(dataDir, volDataFileName)); err != nil {
		return err
	}
	if err := removeDataDir(dataDir); err != nil {
		return err
	}
	log.FromContext(ctx).V(1).Info("Unpublished CSI volume", "podUID", uid, "volume", specName, "driver", d.DriverName, "volumeHandle", d.VolumeHandle)
	return p.unstageIfUnusedLocked(ctx, d.DriverName, d.VolumeHandle)
}

// nodeUnpublish asks the volume's driver to unpublish it from target (what
// names the kind of volume in the error). The caller holds the volume's
// lock.
func (p *Publisher) nodeUnpublish(ctx context.Context, d volData, target, what string) error {
	client, err := p.drivers.NodeClient(ctx, d.DriverName)
	if err != nil {
		return err
	}
	if err := p.step(stepUnpublish); err != nil {
		return err
	}
	if _, err := client.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{
		VolumeId:   d.VolumeHandle,
		TargetPath: target,
	}); err != nil {
		return fmt.Errorf("NodeUnpublishVolume of %s %s by CSI driver %s: %w", what, d.VolumeHandle, d.DriverName, err)
	}
	return p.step(stepRemovePublish)
}

// UnstageOrphans unstages every staging under the plugin directory that no
// pod's vol_data.json names (and every block volume no pod links to): what a crash between a pod's last unpublish
// and the unstage left behind. Run it at start and in housekeeping; a
// staging whose driver is not registered yet stays, and the error says so.
func (p *Publisher) UnstageOrphans(ctx context.Context) error {
	errs := []error{p.unstageOrphanBlocks(ctx)}
	drivers, err := os.ReadDir(driversDir(p.root))
	if os.IsNotExist(err) {
		return errors.Join(errs...)
	}
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("listing CSI stagings: %w", err))...)
	}
	for _, drv := range drivers {
		if !drv.IsDir() {
			continue
		}
		vols, err := os.ReadDir(filepath.Join(driversDir(p.root), drv.Name()))
		if err != nil {
			errs = append(errs, fmt.Errorf("listing CSI stagings: %w", err))
			continue
		}
		for _, vol := range vols {
			d, err := readVolData(filepath.Join(driversDir(p.root), drv.Name(), vol.Name()))
			if os.IsNotExist(err) {
				continue // not a staging of ours
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if d.DriverName != drv.Name() || sha256Hex(d.VolumeHandle) != vol.Name() {
				continue // not the layout nodelet writes
			}
			if err := p.unstageIfUnused(ctx, d.DriverName, d.VolumeHandle); err != nil {
				errs = append(errs, fmt.Errorf("unstaging orphaned CSI volume %s of driver %s: %w", d.VolumeHandle, d.DriverName, err))
			}
		}
	}
	return errors.Join(errs...)
}

func (p *Publisher) unstageIfUnused(ctx context.Context, driver, handle string) error {
	unlock := p.lock(driver, handle)
	defer unlock()
	return p.unstageIfUnusedLocked(ctx, driver, handle)
}

// unstageIfUnusedLocked unstages the driver's volume handle and removes its
// staging directory when it has a staging record and no pod names it. The
// caller holds the volume's lock.
func (p *Publisher) unstageIfUnusedLocked(ctx context.Context, driver, handle string) error {
	dataDir := stagingDataDir(p.root, driver, handle)
	if _, err := readVolData(dataDir); os.IsNotExist(err) {
		return nil // never staged, or unstaged already
	} else if err != nil {
		return err
	}
	used, err := p.inUse(driver, handle)
	if err != nil || used {
		return err
	}
	client, err := p.drivers.NodeClient(ctx, driver)
	if err != nil {
		return err
	}
	caps, err := p.nodeCapabilities(ctx, client, driver)
	if err != nil {
		return err
	}
	staging := filepath.Join(dataDir, globalMountName)
	if err := p.step(stepUnstage); err != nil {
		return err
	}
	if caps.stage {
		if _, err := client.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{
			VolumeId:          handle,
			StagingTargetPath: staging,
		}); err != nil {
			return fmt.Errorf("NodeUnstageVolume of volume %s by CSI driver %s: %w", handle, driver, err)
		}
	}
	if err := p.step(stepRemoveStaging); err != nil {
		return err
	}
	if err := p.removeUnmounted(staging); err != nil {
		return err
	}
	if err := removeFile(filepath.Join(dataDir, volDataFileName)); err != nil {
		return err
	}
	if err := removeDataDir(dataDir); err != nil {
		return err
	}
	log.FromContext(ctx).V(1).Info("Unstaged CSI volume", "driver", driver, "volumeHandle", handle)
	return nil
}

// inUse tells whether any pod's vol_data.json names the driver's volume
// handle. An unreadable record counts as a use: better a staging kept
// than one pulled from under a pod.
func (p *Publisher) inUse(driver, handle string) (bool, error) {
	records, err := podRecords(p.root)
	if err != nil {
		return false, err
	}
	for _, r := range records {
		d, err := readVolData(filepath.Dir(r))
		if os.IsNotExist(err) {
			continue // removed meanwhile
		}
		if err != nil {
			return true, err
		}
		if d.DriverName == driver && d.VolumeHandle == handle {
			return true, nil
		}
	}
	return false, nil
}

// removeUnmounted removes the directory path unless it is a mount point,
// which is an error: a driver that says it unmounted and did not.
func (p *Publisher) removeUnmounted(path string) error {
	mounted, err := p.mounter.IsMountPoint(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking whether %s is a mount point: %w", path, err)
	}
	if mounted {
		return fmt.Errorf("%s is still mounted", path)
	}
	return removeDir(path)
}

// removeDataDir removes a volume's emptied record directory, with a
// temporary record a crash may have left in it.
func removeDataDir(dir string) error {
	tmps, _ := filepath.Glob(filepath.Join(dir, "."+volDataFileName+".*"))
	for _, t := range tmps {
		if err := removeFile(t); err != nil {
			return err
		}
	}
	return removeDir(dir)
}

func removeDir(path string) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	return nil
}

func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	return atomicfile.SyncDir(filepath.Dir(path))
}

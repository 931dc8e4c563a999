package csi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/internal/atomicfile"
	"github.com/nodelet/nodelet/internal/volume"
)

// The kubelet's on-disk layout for CSI raw block volumes (volumeMode
// Block PVs), named by the PV:
//
//	<root>/plugins/kubernetes.io/csi/volumeDevices/staging/<pv>            staging path (a directory)
//	<root>/plugins/kubernetes.io/csi/volumeDevices/publish/<pv>/<pod uid>  publish path (a file the driver makes the device)
//	<root>/plugins/kubernetes.io/csi/volumeDevices/<pv>/data/vol_data.json specVolID, volumeHandle, driverName, ...
//	<root>/pods/<uid>/volumeDevices/kubernetes.io~csi/<pv>                 symbolic link to the publish path
const (
	volumeDevicesDirName = "volumeDevices"
	blockStagingDirName  = "staging"
	blockPublishDirName  = "publish"
	blockDataDirName     = "data"
)

// blockDevicesDir holds the block volumes' stagings, publishes and records.
func blockDevicesDir(root string) string {
	return filepath.Join(driversDir(root), volumeDevicesDirName)
}

// blockStagingPath is the staging target path of a block volume.
func blockStagingPath(root, specName string) string {
	return filepath.Join(blockDevicesDir(root), blockStagingDirName, specName)
}

// blockPublishDir holds the publish paths of a block volume, one per pod.
func blockPublishDir(root, specName string) string {
	return filepath.Join(blockDevicesDir(root), blockPublishDirName, specName)
}

// blockPublishPath is the target path at which a block volume is published
// for a pod.
func blockPublishPath(root string, uid types.UID, specName string) string {
	return filepath.Join(blockPublishDir(root, specName), string(uid))
}

// blockVolumeDir holds the record of a block volume.
func blockVolumeDir(root, specName string) string {
	return filepath.Join(blockDevicesDir(root), specName)
}

// blockDataDir is the directory of a block volume's vol_data.json.
func blockDataDir(root, specName string) string {
	return filepath.Join(blockVolumeDir(root, specName), blockDataDirName)
}

// podBlockDir holds a pod's links to its CSI block volumes.
func podBlockDir(root string, uid types.UID) string {
	return filepath.Join(root, podsDirName, string(uid), volumeDevicesDirName, podPluginDirName)
}

// podBlockPath is the pod's link to a block volume's publish path: the
// device the container gets.
func podBlockPath(root string, uid types.UID, specName string) string {
	return filepath.Join(podBlockDir(root, uid), specName)
}

// blockCapability is the block access capability for v.
func blockCapability(v *volume.CSIVolume, caps nodeCaps) *csipb.VolumeCapability {
	return &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: accessMode(v.AccessModes, caps.singleNodeMultiWriter)},
	}
}

// blockRequest is what publishBlock needs beyond the volume.
type blockRequest struct {
	client         csipb.NodeClient
	pod            *v1.Pod
	driver         *storagev1.CSIDriver
	caps           nodeCaps
	publishContext map[string]string
	stageSecrets   map[string]string
	publishSecrets map[string]string
}

// publishBlock publishes a block volume for a pod, as the kubelet does,
// and returns the pod's link to the device. Its record comes first, then
// the pod's link (so that a teardown knows of the volume whatever the
// driver has done yet), then NodeStageVolume at the staging directory when
// the driver stages, then NodePublishVolume at the pod's publish path,
// both with a block capability, no mount options, no fsGroup and no tokens.
// The caller holds the volume's lock.
func (p *Publisher) publishBlock(ctx context.Context, v *volume.CSIVolume, r blockRequest) (string, error) {
	pod := r.pod
	capability := blockCapability(v, r.caps)
	if err := os.MkdirAll(blockDataDir(p.root, v.SpecName), dirMode); err != nil {
		return "", fmt.Errorf("creating %s: %w", blockDataDir(p.root, v.SpecName), err)
	}
	if err := writeVolData(blockDataDir(p.root, v.SpecName), volData{
		SpecVolID:           v.SpecName,
		VolumeHandle:        v.VolumeHandle,
		DriverName:          v.Driver,
		NodeName:            p.nodeName,
		AttachmentID:        attachmentName(v.VolumeHandle, v.Driver, p.nodeName),
		VolumeLifecycleMode: string(storagev1.VolumeLifecyclePersistent),
	}); err != nil {
		return "", err
	}
	target := blockPublishPath(p.root, pod.UID, v.SpecName)
	link := podBlockPath(p.root, pod.UID, v.SpecName)
	if err := ensureLink(target, link); err != nil {
		return "", err
	}

	var staging string
	if r.caps.stage {
		staging = blockStagingPath(p.root, v.SpecName)
		if err := os.MkdirAll(staging, dirMode); err != nil {
			return "", fmt.Errorf("creating %s: %w", staging, err)
		}
		if err := p.step(stepStage); err != nil {
			return "", err
		}
		if _, err := r.client.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{
			VolumeId:          v.VolumeHandle,
			PublishContext:    r.publishContext,
			StagingTargetPath: staging,
			VolumeCapability:  capability,
			Secrets:           r.stageSecrets,
			VolumeContext:     v.Attributes,
		}); err != nil {
			return "", fmt.Errorf("NodeStageVolume of block volume %s by CSI driver %s: %w", v.VolumeHandle, v.Driver, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(target), dirMode); err != nil {
		return "", fmt.Errorf("creating %s: %w", filepath.Dir(target), err)
	}
	if err := p.step(stepPublish); err != nil {
		return "", err
	}
	if _, err := r.client.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{
		VolumeId:          v.VolumeHandle,
		PublishContext:    r.publishContext,
		StagingTargetPath: staging,
		TargetPath:        target,
		VolumeCapability:  capability,
		Readonly:          v.ReadOnly,
		Secrets:           r.publishSecrets,
		VolumeContext:     volumeContext(v.Attributes, r.driver, pod, false, ""),
	}); err != nil {
		return "", fmt.Errorf("NodePublishVolume of block volume %s by CSI driver %s: %w", v.VolumeHandle, v.Driver, err)
	}
	log.FromContext(ctx).V(1).Info("Published CSI block volume", "pod", klog.KObj(pod), "volume", v.VolumeName, "driver", v.Driver, "volumeHandle", v.VolumeHandle)
	return link, nil
}

// ensureLink makes link a symbolic link to target, replacing whatever
// else is at link.
func ensureLink(target, link string) error {
	if cur, err := os.Readlink(link); err == nil && cur == target {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(link), dirMode); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(link), err)
	}
	if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("replacing %s: %w", link, err)
	}
	if err := os.Symlink(target, link); err != nil {
		return fmt.Errorf("linking %s to %s: %w", link, target, err)
	}
	return atomicfile.SyncDir(filepath.Dir(link))
}

// unpublishPodBlocks tears down every block volume the pod links to.
func (p *Publisher) unpublishPodBlocks(ctx context.Context, uid types.UID) (found bool, err error) {
	dir := podBlockDir(p.root, uid)
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("listing CSI block volumes of pod %s: %w", uid, err)
	}
	var errs []error
	for _, e := range entries {
		if err := p.unpublishBlock(ctx, uid, e.Name()); err != nil {
			errs = append(errs, fmt.Errorf("tearing down CSI block volume %s of pod %s: %w", e.Name(), uid, err))
		}
	}
	if len(errs) > 0 {
		return len(entries) > 0, errors.Join(errs...)
	}
	if err := removeDir(dir); err != nil {
		return true, err
	}
	// The pod's volumeDevices directory goes too once empty.
	if err := os.Remove(filepath.Dir(dir)); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) {
		return true, fmt.Errorf("removing %s: %w", filepath.Dir(dir), err)
	}
	return len(entries) > 0, nil
}

// unpublishBlock unpublishes one of the pod's block volumes
// (NodeUnpublishVolume, then the publish path and the pod's link are
// removed) and, when no other pod has it published, unstages it
// (NodeUnstageVolume, then the staging directory, the publish directory and
// the record are removed).
func (p *Publisher) unpublishBlock(ctx context.Context, uid types.UID, specName string) error {
	link := podBlockPath(p.root, uid, specName)
	target := blockPublishPath(p.root, uid, specName)
	d, err := readVolData(blockDataDir(p.root, specName))
	if os.IsNotExist(err) {
		// Without a record no driver was asked anything: Publish writes
		// the record before the link.
		return removeFile(link)
	}
	if err != nil {
		return err
	}
	unlock := p.lock(d.DriverName, d.VolumeHandle)
	defer unlock()
	if err := p.nodeUnpublish(ctx, d, target, "block volume"); err != nil {
		return err
	}
	if err := p.removeUnmountedFile(target); err != nil {
		return err
	}
	if err := removeFile(link); err != nil {
		return err
	}
	log.FromContext(ctx).V(1).Info("Unpublished CSI block volume", "podUID", uid, "volume", specName, "driver", d.DriverName, "volumeHandle", d.VolumeHandle)

	others, err := os.ReadDir(blockPublishDir(p.root, specName))
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("listing the publishes of block volume %s: %w", specName, err)
	}
	if len(others) > 0 {
		return nil
	}
	client, err := p.drivers.NodeClient(ctx, d.DriverName)
	if err != nil {
		return err
	}
	return p.unstageBlockLocked(ctx, client, d, specName)
}

// unstageBlockLocked unstages a block volume that no pod has published
// and removes its directories and record. The caller holds its lock.
func (p *Publisher) unstageBlockLocked(ctx context.Context, client csipb.NodeClient, d volData, specName string) error {
	staging := blockStagingPath(p.root, specName)
	if _, err := os.Stat(staging); err == nil {
		caps, err := p.nodeCapabilities(ctx, client, d.DriverName)
		if err != nil {
			return err
		}
		if err := p.step(stepUnstage); err != nil {
			return err
		}
		if caps.stage {
			if _, err := client.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{
				VolumeId:          d.VolumeHandle,
				StagingTargetPath: staging,
			}); err != nil {
				return fmt.Errorf("NodeUnstageVolume of block volume %s by CSI driver %s: %w", d.VolumeHandle, d.DriverName, err)
			}
		}
		if err := p.step(stepRemoveStaging); err != nil {
			return err
		}
		if err := p.removeUnmounted(staging); err != nil {
			return err
		}
	} else if !os.IsNotExist(err) {
		return fmt.Errorf("checking %s: %w", staging, err)
	}
	if err := removeDir(blockPublishDir(p.root, specName)); err != nil {
		return err
	}
	dataDir := blockDataDir(p.root, specName)
	if err := removeFile(filepath.Join(dataDir, volDataFileName)); err != nil {
		return err
	}
	if err := removeDataDir(dataDir); err != nil {
		return err
	}
	if err := removeDir(blockVolumeDir(p.root, specName)); err != nil {
		return err
	}
	log.FromContext(ctx).V(1).Info("Unstaged CSI block volume", "driver", d.DriverName, "volumeHandle", d.VolumeHandle)
	return nil
}

// removeUnmountedFile removes a publish path (a file or a directory the
// driver left) unless something is still mounted on it.
func (p *Publisher) removeUnmountedFile(path string) error {
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
	return removeFile(path)
}

// unstageOrphanBlocks unstages every block volume with a record that no
// pod links to: what a crash between a pod's last unpublish and the unstage
// left behind. The check runs under the volume's lock, so a volume being
// published (its link is written before any driver call) is never taken.
func (p *Publisher) unstageOrphanBlocks(ctx context.Context) error {
	records, err := filepath.Glob(filepath.Join(blockDevicesDir(p.root), "*", blockDataDirName, volDataFileName))
	if err != nil {
		return fmt.Errorf("listing CSI block volume records: %w", err)
	}
	var errs []error
	for _, r := range records {
		specName := filepath.Base(filepath.Dir(filepath.Dir(r)))
		d, err := readVolData(filepath.Dir(r))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := p.unstageOrphanBlock(ctx, d, specName); err != nil {
			errs = append(errs, fmt.Errorf("unstaging orphaned CSI block volume %s of driver %s: %w", d.VolumeHandle, d.DriverName, err))
		}
	}
	return errors.Join(errs...)
}

func (p *Publisher) unstageOrphanBlock(ctx context.Context, d volData, specName string) error {
	unlock := p.lock(d.DriverName, d.VolumeHandle)
	defer unlock()
	links, err := filepath.Glob(filepath.Join(p.root, podsDirName, "*", volumeDevicesDirName, podPluginDirName, specName))
	if err != nil {
		return fmt.Errorf("listing the links to block volume %s: %w", specName, err)
	}
	if len(links) > 0 {
		return nil
	}
	client, err := p.drivers.NodeClient(ctx, d.DriverName)
	if err != nil {
		return err
	}
	return p.unstageBlockLocked(ctx, client, d, specName)
}

package volume

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/storage/ephemeral"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// localVolumePlugin is the kubelet's directory name for local PVs: the
// local path is bind-mounted at volumes/kubernetes.io~local-volume/<pv>.
const localVolumePlugin = "kubernetes.io~local-volume"

// localVolumeDirMode is the mode of the mount point of a local PV.
const localVolumeDirMode fs.FileMode = 0o750

// Kinds of PodVolume: the source that backs a pod volume on the host.
const (
	KindEmptyDir    = "emptyDir"
	KindHostPath    = "hostPath"
	KindConfigMap   = "configMap"
	KindSecret      = "secret"
	KindDownwardAPI = "downwardAPI"
	KindProjected   = "projected"
	KindLocal       = "local"
	KindCSI         = "csi"
)

// PodVolume is what a pod volume is on the host once set up.
type PodVolume struct {
	// Path is the host directory containers mount (the root of the volume;
	// a subPath is below it).
	Path string
	// Kind is the source that backs the volume (Kind* constants): for a
	// claim, its PersistentVolume's source.
	Kind string
	// PVName is the PersistentVolume behind a claim; empty otherwise.
	PVName string
	// ClaimNamespace and ClaimName name the PersistentVolumeClaim the
	// volume uses (a generic ephemeral volume's claim too); empty otherwise.
	ClaimNamespace, ClaimName string
	// ReadOnly is a volume that containers mount read-only whatever their
	// volumeMount says (or, for a block device, may only read).
	ReadOnly bool
	// Block is a PV of volumeMode Block: Path is a block device that
	// containers get through volumeDevices (Devices), never mounted.
	Block bool
	// CSIDriver and CSIVolumeHandle name a CSI volume to its driver.
	CSIDriver, CSIVolumeHandle string
}

// needsResolution says whether vol is backed by something the manager
// resolves at SetUp and remembers: a claim (persistentVolumeClaim, or a
// generic ephemeral volume's) or an inline CSI volume.
func needsResolution(vol *v1.Volume) bool {
	src := &vol.VolumeSource
	return src.PersistentVolumeClaim != nil || src.Ephemeral != nil || src.CSI != nil
}

// boundClaim is a pod's claim and the PV bound to it.
type boundClaim struct {
	claim *v1.PersistentVolumeClaim
	pv    *v1.PersistentVolume
	// readOnly is the pod's persistentVolumeClaim.readOnly.
	readOnly bool
}

// setUpResolved sets up a claim or inline CSI volume and returns what it
// resolved to; the error is a *SetUpError.
func (m *Manager) setUpResolved(ctx context.Context, pod *v1.Pod, vol *v1.Volume) (PodVolume, error) {
	if vol.CSI != nil {
		cv := inlineCSIVolume(pod, vol)
		path, err := m.publishCSI(ctx, pod, cv)
		if err != nil {
			return PodVolume{}, &SetUpError{Volume: vol.Name, Err: err}
		}
		return PodVolume{Path: path, Kind: KindCSI, ReadOnly: cv.ReadOnly, CSIDriver: cv.Driver, CSIVolumeHandle: cv.VolumeHandle}, nil
	}
	bc, err := m.resolveClaim(ctx, pod, vol)
	if err != nil {
		return PodVolume{}, &SetUpError{Volume: vol.Name, Err: err, Stage: StageProcess}
	}
	if err := checkVolumeMode(vol.Name, bc.pv, podVolumeUses(pod)); err != nil {
		return PodVolume{}, &SetUpError{Volume: vol.Name, Err: err, Stage: StageProcess}
	}
	if bc.pv.Spec.NodeAffinity != nil {
		if err := m.checkNodeAffinity(ctx, bc.pv); err != nil {
			return PodVolume{}, &SetUpError{Volume: vol.Name, Err: err, Stage: StageNodeAffinity}
		}
	}
	vp, err := m.setUpPersistentVolume(ctx, pod, vol.Name, bc)
	if err != nil {
		return PodVolume{}, &SetUpError{Volume: vol.Name, Err: err}
	}
	log.FromContext(ctx).V(1).Info("Set up persistent volume", "pod", klog.KObj(pod), "volume", vol.Name,
		"claim", klog.KObj(bc.claim), "persistentVolume", bc.pv.Name, "path", vp.Path)
	return vp, nil
}

// resolveClaim reads the claim vol uses and the PV bound to it, and checks
// them as the kubelet does, with its messages.
func (m *Manager) resolveClaim(ctx context.Context, pod *v1.Pod, vol *v1.Volume) (*boundClaim, error) {
	name, readOnly := claimOf(pod, vol)
	claim, err := m.fetcher.PersistentVolumeClaim(ctx, pod.Namespace, name)
	if err != nil {
		return nil, fmt.Errorf("error processing PVC %s/%s: failed to fetch PVC from API server: %w", pod.Namespace, name, err)
	}
	if err := checkClaim(claim); err != nil {
		return nil, fmt.Errorf("error processing PVC %s/%s: %w", pod.Namespace, name, err)
	}
	if vol.Ephemeral != nil {
		// A claim of that name that the pod does not control was not
		// made for it: using it would hand the pod someone else's data.
		if err := ephemeral.VolumeIsForPod(pod, claim); err != nil {
			return nil, err
		}
	}
	pv, err := m.fetcher.PersistentVolume(ctx, claim.Spec.VolumeName)
	if err != nil {
		return nil, fmt.Errorf("error processing PVC %s/%s: failed to fetch PV %s from API server: %w", pod.Namespace, name, claim.Spec.VolumeName, err)
	}
	if err := checkBoundPV(pv, claim.UID); err != nil {
		return nil, fmt.Errorf("error processing PVC %s/%s: %w", pod.Namespace, name, err)
	}
	return &boundClaim{claim: claim, pv: pv, readOnly: readOnly}, nil
}

// claimOf returns the name of the claim vol uses and the pod's readOnly
// for it: a generic ephemeral volume's claim is "<pod>-<volume>".
func claimOf(pod *v1.Pod, vol *v1.Volume) (name string, readOnly bool) {
	if vol.PersistentVolumeClaim != nil {
		return vol.PersistentVolumeClaim.ClaimName, vol.PersistentVolumeClaim.ReadOnly
	}
	return ephemeral.VolumeClaimName(pod, vol), false
}

// checkClaim refuses a claim that is being deleted (a pod must not start on
// it) or is not bound to a PV yet.
func checkClaim(claim *v1.PersistentVolumeClaim) error {
	switch {
	case claim.DeletionTimestamp != nil:
		return errors.New("PVC is being deleted")
	case claim.Status.Phase != v1.ClaimBound:
		return errors.New("PVC is not bound")
	case claim.Spec.VolumeName == "":
		return errors.New("PVC has empty pvc.Spec.VolumeName")
	}
	return nil
}

// checkBoundPV refuses a PV that is being deleted or that is not bound to
// the claim with UID claimUID (a claim bound to a PV that was since given
// to another claim of the same name).
func checkBoundPV(pv *v1.PersistentVolume, claimUID types.UID) error {
	switch {
	case pv.DeletionTimestamp != nil:
		return fmt.Errorf("can't start pod because PV %s is being deleted", pv.Name)
	case pv.Spec.ClaimRef == nil:
		return fmt.Errorf("found PV object %s but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim", pv.Name)
	case pv.Spec.ClaimRef.UID != claimUID:
		return fmt.Errorf("found PV object %s but its pv.Spec.ClaimRef.UID %s does not point to claim.UID %s", pv.Name, pv.Spec.ClaimRef.UID, claimUID)
	}
	return nil
}

// volumeUses are the names of the volumes the pod's containers (init,
// regular and ephemeral) mount (volumeMounts) and map as devices
// (volumeDevices).
type volumeUses struct {
	mounts, devices map[string]bool
}

func podVolumeUses(pod *v1.Pod) volumeUses {
	u := volumeUses{mounts: map[string]bool{}, devices: map[string]bool{}}
	add := func(mounts []v1.VolumeMount, devices []v1.VolumeDevice) {
		for _, vm := range mounts {
			u.mounts[vm.Name] = true
		}
		for _, vd := range devices {
			u.devices[vd.Name] = true
		}
	}
	for i := range pod.Spec.InitContainers {
		add(pod.Spec.InitContainers[i].VolumeMounts, pod.Spec.InitContainers[i].VolumeDevices)
	}
	for i := range pod.Spec.Containers {
		add(pod.Spec.Containers[i].VolumeMounts, pod.Spec.Containers[i].VolumeDevices)
	}
	for i := range pod.Spec.EphemeralContainers {
		add(pod.Spec.EphemeralContainers[i].VolumeMounts, pod.Spec.EphemeralContainers[i].VolumeDevices)
	}
	return u
}

// pvVolumeMode is the PV's volumeMode, Filesystem when unset.
func pvVolumeMode(pv *v1.PersistentVolume) v1.PersistentVolumeMode {
	if pv.Spec.VolumeMode != nil {
		return *pv.Spec.VolumeMode
	}
	return v1.PersistentVolumeFilesystem
}

// checkVolumeMode refuses a PV used against its volumeMode (a Block PV in
// volumeMounts, a Filesystem PV in volumeDevices), with the kubelet's
// messages.
func checkVolumeMode(name string, pv *v1.PersistentVolume, uses volumeUses) error {
	mode := pvVolumeMode(pv)
	if uses.mounts[name] && mode != v1.PersistentVolumeFilesystem {
		return fmt.Errorf("volume %s has volumeMode %s, but is specified in volumeMounts", name, mode)
	}
	if uses.devices[name] && mode != v1.PersistentVolumeBlock {
		return fmt.Errorf("volume %s has volumeMode %s, but is specified in volumeDevices", name, mode)
	}
	return nil
}

// checkNodeAffinity checks the PV's nodeAffinity against this node's
// labels, as the kubelet does before it mounts a PV.
func (m *Manager) checkNodeAffinity(ctx context.Context, pv *v1.PersistentVolume) error {
	var labels map[string]string
	if m.nodeLabels != nil {
		var err error
		if labels, err = m.nodeLabels(ctx); err != nil {
			return fmt.Errorf("reading the node's labels: %w", err)
		}
	}
	return storagehelpers.CheckNodeAffinity(pv, labels)
}

// setUpPersistentVolume makes a bound PV available to the pod: a hostPath
// PV is checked against its type and mounted where it is; a local PV is
// bind-mounted under the pod directory and handed to the pod's fsGroup; a
// CSI PV is published by its driver.
func (m *Manager) setUpPersistentVolume(ctx context.Context, pod *v1.Pod, volumeName string, bc *boundClaim) (PodVolume, error) {
	pv := bc.pv
	vp := PodVolume{PVName: pv.Name, ClaimNamespace: bc.claim.Namespace, ClaimName: bc.claim.Name, ReadOnly: bc.readOnly}
	if pvVolumeMode(pv) == v1.PersistentVolumeBlock {
		return m.setUpBlock(ctx, pod, volumeName, bc, vp)
	}
	switch {
	case pv.Spec.HostPath != nil:
		// No fsGroup: the kubelet leaves a hostPath's ownership alone.
		if err := checkHostPath(m.hostRoot, &v1.HostPathVolumeSource{Path: pv.Spec.HostPath.Path, Type: pv.Spec.HostPath.Type}); err != nil {
			return PodVolume{}, err
		}
		vp.Kind, vp.Path = KindHostPath, pv.Spec.HostPath.Path
	case pv.Spec.Local != nil:
		path, err := m.setUpLocal(pod, pv, bc.readOnly)
		if err != nil {
			return PodVolume{}, err
		}
		vp.Kind, vp.Path = KindLocal, path
	case pv.Spec.CSI != nil:
		return m.setUpCSIPV(ctx, pod, volumeName, bc, vp)
	default:
		return PodVolume{}, fmt.Errorf("PersistentVolume %s has source %s, which nodelet does not support", pv.Name, pvSourceKind(pv))
	}
	return vp, nil
}

// setUpLocal bind-mounts a local PV's directory at the pod's
// volumes/kubernetes.io~local-volume/<pv>, read-only if readOnly, so that
// TearDown's unmount releases it, and hands it to the pod's fsGroup unless
// it is read-only. A mount already there (a restarted nodelet) is kept.
func (m *Manager) setUpLocal(pod *v1.Pod, pv *v1.PersistentVolume, readOnly bool) (string, error) {
	src := pv.Spec.Local.Path
	info, err := m.hostRoot.stat(src)
	if err != nil {
		return "", fmt.Errorf("local volume %s: %w", pv.Name, err)
	}
	if info.Mode().Type() == fs.ModeDevice {
		return "", fmt.Errorf("local volume %s: %s is a block device, and nodelet mounts only directories as local volumes of volumeMode Filesystem", pv.Name, src)
	}
	if !info.IsDir() {
		return "", fmt.Errorf("local volume %s: %s is not a directory", pv.Name, src)
	}
	dir := m.volumeDir(pod.UID, localVolumePlugin, pv.Name)
	if err := mkdirMode(dir, localVolumeDirMode); err != nil {
		return "", fmt.Errorf("creating local volume mount point: %w", err)
	}
	mounted, err := m.mounter.IsMountPoint(dir)
	if err != nil {
		return "", fmt.Errorf("checking whether %s is a mount point: %w", dir, err)
	}
	if !mounted {
		opts := []string{"bind"}
		if readOnly {
			opts = append(opts, "ro")
		}
		// nodelet mounts it: the source is where nodelet sees the host's
		// path, its links resolved on the host's terms.
		local, err := m.hostRoot.realPath(src)
		if err != nil {
			return "", fmt.Errorf("local volume %s: %w", pv.Name, err)
		}
		if err := m.mounter.Mount(local, dir, "", opts); err != nil {
			return "", fmt.Errorf("bind-mounting local volume %s: %w", pv.Name, err)
		}
	}
	if gid := fsGroup(pod); gid != nil && !readOnly {
		err := setVolumeOwnership(dir, *gid, pod.Spec.SecurityContext.FSGroupChangePolicy)
		if err != nil && !errors.Is(err, syscall.EPERM) {
			return "", err
		}
	}
	return dir, nil
}

// setUpCSIPV publishes the claim's CSI PersistentVolume and returns vp
// completed with what it was published as.
func (m *Manager) setUpCSIPV(ctx context.Context, pod *v1.Pod, volumeName string, bc *boundClaim, vp PodVolume) (PodVolume, error) {
	cv := persistentCSIVolume(bc.pv, volumeName, bc.readOnly)
	path, err := m.publishCSI(ctx, pod, cv)
	if err != nil {
		return PodVolume{}, err
	}
	vp.Kind, vp.Path, vp.ReadOnly = KindCSI, path, cv.ReadOnly
	vp.CSIDriver, vp.CSIVolumeHandle = cv.Driver, cv.VolumeHandle
	return vp, nil
}

// setUpBlock resolves a PV of volumeMode Block to the block device that
// containers get: a local PV's path, which must be a block device, or the
// path a CSI driver publishes the volume at. Other sources have no block
// mode.
func (m *Manager) setUpBlock(ctx context.Context, pod *v1.Pod, volumeName string, bc *boundClaim, vp PodVolume) (PodVolume, error) {
	pv := bc.pv
	vp.Block = true
	switch {
	case pv.Spec.Local != nil:
		// The runtime, on the host, gets the device at the host's path.
		info, err := m.hostRoot.stat(pv.Spec.Local.Path)
		if err != nil {
			return PodVolume{}, fmt.Errorf("local volume %s: %w", pv.Name, err)
		}
		if info.Mode().Type() != fs.ModeDevice {
			return PodVolume{}, fmt.Errorf("local volume %s has volumeMode Block, but %s is not a block device", pv.Name, pv.Spec.Local.Path)
		}
		vp.Kind, vp.Path = KindLocal, pv.Spec.Local.Path
	case pv.Spec.CSI != nil:
		return m.setUpCSIPV(ctx, pod, volumeName, bc, vp)
	case pv.Spec.HostPath != nil:
		return PodVolume{}, fmt.Errorf("PersistentVolume %s has volumeMode Block, which its source hostPath does not support", pv.Name)
	default:
		return PodVolume{}, fmt.Errorf("PersistentVolume %s has source %s, which nodelet does not support", pv.Name, pvSourceKind(pv))
	}
	return vp, nil
}

// blockDevicePermissions are the device cgroup permissions of a block
// volume, as the kubelet gives them: read only for a read-only volume.
func blockDevicePermissions(readOnly bool) string {
	if readOnly {
		return "r"
	}
	return "mrw"
}

// Devices returns the CRI devices of container c of pod: one per
// volumeDevice, the block device its PV resolved to at SetUp, at the
// devicePath it asks for. Call it after SetUp, with Mounts.
func (m *Manager) Devices(pod *v1.Pod, c *v1.Container) ([]*runtimeapi.Device, error) {
	if len(c.VolumeDevices) == 0 {
		return nil, nil
	}
	volumes := make(map[string]*v1.Volume, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		volumes[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	devices := make([]*runtimeapi.Device, 0, len(c.VolumeDevices))
	for _, vd := range c.VolumeDevices {
		vol, ok := volumes[vd.Name]
		if !ok {
			return nil, fmt.Errorf("cannot find volume %q to map into container %q", vd.Name, c.Name)
		}
		vp, err := m.hostVolume(pod, vol)
		if err != nil {
			return nil, fmt.Errorf("mapping volume %q into container %q: %w", vd.Name, c.Name, err)
		}
		if !vp.Block {
			return nil, fmt.Errorf("volume %s is not a block volume, but is specified in volumeDevices of container %q", vd.Name, c.Name)
		}
		devices = append(devices, &runtimeapi.Device{ContainerPath: vd.DevicePath, HostPath: vp.Path, Permissions: blockDevicePermissions(vp.ReadOnly)})
	}
	return devices, nil
}

// pvSourceKind names a PV's source, for the error of one nodelet does not
// support.
func pvSourceKind(pv *v1.PersistentVolume) string {
	src := &pv.Spec.PersistentVolumeSource
	switch {
	case src.NFS != nil:
		return "nfs"
	case src.ISCSI != nil:
		return "iscsi"
	case src.FC != nil:
		return "fc"
	case src.RBD != nil:
		return "rbd"
	case src.CephFS != nil:
		return "cephfs"
	case src.Glusterfs != nil:
		return "glusterfs"
	case src.FlexVolume != nil:
		return "flexVolume"
	case src.AWSElasticBlockStore != nil:
		return "awsElasticBlockStore"
	case src.GCEPersistentDisk != nil:
		return "gcePersistentDisk"
	case src.AzureDisk != nil:
		return "azureDisk"
	case src.AzureFile != nil:
		return "azureFile"
	case src.VsphereVolume != nil:
		return "vsphereVolume"
	default:
		return "of an unknown type"
	}
}

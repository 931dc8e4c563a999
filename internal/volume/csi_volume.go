package volume

import (
	"context"
	"crypto/sha256"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// inlineCSIVolume is the CSIVolume of a pod's inline csi source. Its handle
// is derived from the pod UID and the volume name as the kubelet derives
// it, so that a driver sees the same handle from either.
func inlineCSIVolume(pod *v1.Pod, vol *v1.Volume) *CSIVolume {
	src := vol.CSI
	cv := &CSIVolume{
		Driver:       src.Driver,
		VolumeHandle: inlineVolumeHandle(string(pod.UID), vol.Name),
		SpecName:     vol.Name,
		VolumeName:   vol.Name,
		ReadOnly:     src.ReadOnly != nil && *src.ReadOnly,
		Attributes:   src.VolumeAttributes,
		Ephemeral:    true,
	}
	if src.FSType != nil {
		cv.FSType = *src.FSType
	}
	if src.NodePublishSecretRef != nil {
		cv.NodePublishSecretRef = &v1.SecretReference{Name: src.NodePublishSecretRef.Name, Namespace: pod.Namespace}
	}
	return cv
}

// inlineVolumeHandle is "csi-" and the hex SHA-256 of the pod UID followed
// by the volume name.
func inlineVolumeHandle(podUID, volumeName string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(podUID+volumeName)))
}

// persistentCSIVolume is the CSIVolume of a PV's csi source, reached
// through a claim (a generic ephemeral volume's claim included) that the pod
// names volumeName; the volume is read-only if the pod's claim source or the
// PV's source says so.
func persistentCSIVolume(pv *v1.PersistentVolume, volumeName string, claimReadOnly bool) *CSIVolume {
	src := pv.Spec.CSI
	cv := &CSIVolume{
		Driver:               src.Driver,
		VolumeHandle:         src.VolumeHandle,
		SpecName:             pv.Name,
		VolumeName:           volumeName,
		PVName:               pv.Name,
		ReadOnly:             claimReadOnly || src.ReadOnly,
		FSType:               src.FSType,
		Attributes:           src.VolumeAttributes,
		MountOptions:         pv.Spec.MountOptions,
		AccessModes:          pv.Spec.AccessModes,
		Block:                pvVolumeMode(pv) == v1.PersistentVolumeBlock,
		NodeStageSecretRef:   src.NodeStageSecretRef,
		NodePublishSecretRef: src.NodePublishSecretRef,
	}
	return cv
}

// publishCSI publishes cv through the CSI publisher; without one, it fails
// as the kubelet does for a driver that has not registered.
func (m *Manager) publishCSI(ctx context.Context, pod *v1.Pod, cv *CSIVolume) (string, error) {
	if m.csi == nil {
		return "", fmt.Errorf("kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: driver name %s not found in the list of registered CSI drivers", cv.Driver)
	}
	path, err := m.csi.Publish(ctx, pod, cv)
	if err != nil {
		return "", err
	}
	return path, nil
}

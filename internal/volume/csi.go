package volume

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// CSIVolume is a CSI volume that a pod uses: a PersistentVolume's csi
// source (reached through a claim, or a generic ephemeral volume's claim) or
// the pod's own inline csi source (Ephemeral).
type CSIVolume struct {
	// Driver is the CSI driver's name.
	Driver string
	// VolumeHandle names the volume to the driver: the PV's volumeHandle;
	// for an inline volume, "csi-" and the hex SHA-256 of the pod UID and
	// the volume's name, as the kubelet makes it.
	VolumeHandle string
	// SpecName is the volume's directory under the pod's
	// volumes/kubernetes.io~csi: the PV's name, or the pod's volume name for
	// an inline volume.
	SpecName string
	// VolumeName is the pod's name for the volume (spec.volumes[].name).
	VolumeName string
	// PVName is the PersistentVolume's name; empty for an inline volume.
	PVName string
	// ReadOnly publishes the volume read-only: the claim's readOnly in the
	// pod, the PV's csi.readOnly, or the inline source's readOnly.
	ReadOnly bool
	// FSType is the file system the driver is asked for; empty lets it choose.
	FSType string
	// Attributes are the volume attributes (volume context) of the source.
	Attributes map[string]string
	// MountOptions are the PV's mountOptions.
	MountOptions []string
	// AccessModes are the PV's access modes; an inline volume has none.
	AccessModes []v1.PersistentVolumeAccessMode
	// Block is a PV with volumeMode Block.
	Block bool
	// Secret references of the PV's source (an inline source has only
	// NodePublishSecretRef, in the pod's namespace).
	NodeStageSecretRef   *v1.SecretReference
	NodePublishSecretRef *v1.SecretReference
	// Ephemeral is an inline volume: it lives and dies with the pod.
	Ephemeral bool
}

// CSI publishes a pod's CSI volumes through their drivers and unpublishes
// them (internal/csi implements it).
type CSI interface {
	// Publish makes v available to pod and returns the host path that
	// containers mount: it waits for the volume's attachment when its
	// driver needs one, stages it once per node when the driver stages,
	// and publishes it at the pod's path. It is idempotent.
	Publish(ctx context.Context, pod *v1.Pod, v *CSIVolume) (string, error)
	// UnpublishPod unpublishes every CSI volume found on disk under the
	// pod's directory and unstages those no other pod still publishes. It
	// needs only the UID: it works from what Publish wrote to disk, so it
	// finishes a teardown that a crash cut short. It is idempotent.
	UnpublishPod(ctx context.Context, uid types.UID) error
}

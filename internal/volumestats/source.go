package volumestats

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Kind says how a volume is measured.
type Kind int

const (
	// KindNone volumes are not measured (hostPath, as the kubelet does not
	// measure them).
	KindNone Kind = iota
	// KindDu volumes have their used bytes and inodes counted by walking
	// the directory, and capacity, available bytes and inodes from statfs
	// of the file system that holds it (emptyDir on disk, configMap,
	// secret, downwardAPI, projected).
	KindDu
	// KindStatfs volumes have every number from statfs of their own file
	// system (a tmpfs emptyDir, a local PersistentVolume).
	KindStatfs
	// KindCSI volumes get their numbers from the CSI driver's
	// NodeGetVolumeStats.
	KindCSI
)

func (k Kind) String() string {
	switch k {
	case KindDu:
		return "du"
	case KindStatfs:
		return "statfs"
	case KindCSI:
		return "csi"
	default:
		return "none"
	}
}

// PodVolume is one of a pod's volumes as the node holds it.
type PodVolume struct {
	// Name is the pod's name for the volume (spec.volumes[].name).
	Name string
	// Path is the volume's directory on the node, as containers mount it.
	Path string
	// Metrics says how the volume is measured.
	Metrics Kind
	// PVC is the claim behind the volume (a persistentVolumeClaim source,
	// or the claim of a generic ephemeral volume); nil for others.
	PVC *types.NamespacedName
	// Driver and VolumeHandle name a KindCSI volume to its driver;
	// StagingPath is where the driver staged it, if it stages.
	Driver       string
	VolumeHandle string
	StagingPath  string
}

// VolumeSource lists the volumes of a pod, in the order of its spec. It
// must not block on the API server: it is called from the measuring loops.
// A volume whose path does not exist yet is skipped by the Calculator.
type VolumeSource interface {
	PodVolumes(pod *v1.Pod) []PodVolume
}

// IsLocalEphemeral says whether a volume counts towards the pod's
// ephemeral storage, as the kubelet counts them: gitRepo, emptyDir not
// backed by memory, and configMap volumes.
func IsLocalEphemeral(vol *v1.Volume) bool {
	return vol.GitRepo != nil ||
		(vol.EmptyDir != nil && vol.EmptyDir.Medium == v1.StorageMediumDefault) ||
		vol.ConfigMap != nil
}

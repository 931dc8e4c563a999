package volume

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/volumestats"
)

var _ volumestats.VolumeSource = (*Manager)(nil)

// PodVolumes lists the pod's volumes with their directories on the node and
// how each is measured, in the order of the pod's spec: emptyDir on disk and
// the volumes whose content nodelet writes (configMap, secret, downwardAPI,
// projected) by walking their directory, a memory-backed emptyDir and a
// local PersistentVolume by statfs of their file system, a CSI volume by its
// driver; a hostPath volume (inline or a PV) and a block volume are listed
// but not measured, as the kubelet does not measure them. A volume of a
// claim carries the claim. Claim and CSI volumes are listed once the pod is
// set up; sources nodelet does not set up are left out.
func (m *Manager) PodVolumes(pod *v1.Pod) []volumestats.PodVolume {
	var out []volumestats.PodVolume
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if needsResolution(vol) {
			vp, err := m.hostVolume(pod, vol)
			if err != nil {
				continue
			}
			out = append(out, resolvedStatsVolume(vol.Name, vp))
			continue
		}
		src := &vol.VolumeSource
		kind := volumestats.KindDu
		switch {
		case src.HostPath != nil:
			kind = volumestats.KindNone
		case src.EmptyDir != nil && src.EmptyDir.Medium == v1.StorageMediumMemory:
			kind = volumestats.KindStatfs
		case src.EmptyDir != nil, src.ConfigMap != nil, src.Secret != nil, src.DownwardAPI != nil, src.Projected != nil:
		default:
			continue
		}
		path, err := m.volumePath(pod, vol)
		if err != nil {
			continue
		}
		out = append(out, volumestats.PodVolume{Name: vol.Name, Path: path, Metrics: kind})
	}
	return out
}

// resolvedStatsVolume is how a claim's or a CSI volume is measured.
func resolvedStatsVolume(name string, vp PodVolume) volumestats.PodVolume {
	out := volumestats.PodVolume{Name: name, Path: vp.Path, Metrics: volumestats.KindNone}
	switch {
	case vp.Block:
	case vp.Kind == KindLocal:
		out.Metrics = volumestats.KindStatfs
	case vp.Kind == KindCSI:
		out.Metrics, out.Driver, out.VolumeHandle = volumestats.KindCSI, vp.CSIDriver, vp.CSIVolumeHandle
	}
	if vp.ClaimName != "" {
		out.PVC = &types.NamespacedName{Namespace: vp.ClaimNamespace, Name: vp.ClaimName}
	}
	return out
}

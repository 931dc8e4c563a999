package volume

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/volumestats"
)

var _ volumestats.VolumeSource = (*Manager)(nil)

// PodVolumes lists the pod's volumes with their directories on the node and
// how each is measured, in the order of the pod's spec: emptyDir on disk and
// the volumes whose content nodelet writes (configMap, secret, downwardAPI,
// projected) by walking their directory, a memory-backed emptyDir by statfs
// of its tmpfs; a hostPath volume is listed but not measured, as the kubelet
// does not measure it. Volume sources nodelet does not set up are left out.
func (m *Manager) PodVolumes(pod *v1.Pod) []volumestats.PodVolume {
	var out []volumestats.PodVolume
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
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

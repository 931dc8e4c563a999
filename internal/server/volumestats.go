package server

import (
	"errors"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/internal/volumestats"
)

// VolumeStatsCache gives the latest background measure of a pod's volumes
// (volumestats.Calculator); the summary never measures volumes itself.
type VolumeStatsCache interface {
	PodVolumeStats(uid types.UID) (volumestats.PodStats, bool)
}

// podVolumeStats returns the pod's volume list as the summary shows it,
// the local ephemeral volumes first and then the others (those of claims),
// each group in the order of the pod's spec, and the bytes the local
// ephemeral ones use, which count towards the pod's ephemeral storage.
// It returns nil, 0 before the pod's volumes were first measured.
func podVolumeStats(cache VolumeStatsCache, uid types.UID) ([]statsapi.VolumeStats, uint64) {
	if cache == nil {
		return nil, 0
	}
	ps, ok := cache.PodVolumeStats(uid)
	if !ok {
		return nil, 0
	}
	var ephemeral, persistent []statsapi.VolumeStats
	var used uint64
	for _, v := range ps.Volumes {
		if v.LocalEphemeral {
			ephemeral = append(ephemeral, v.VolumeStats)
			if v.UsedBytes != nil {
				used += *v.UsedBytes
			}
		} else {
			persistent = append(persistent, v.VolumeStats)
		}
	}
	return append(ephemeral, persistent...), used
}

// etcHostsUsage is the disk space of the pod's /etc/hosts file, which the
// kubelet counts in the pod's ephemeral storage too; 0 when it cannot be
// read. One small file: measured on the request path. A measure that is
// not complete is a lower bound, still better than nothing.
func (p *StatsProvider) etcHostsUsage(uid types.UID) uint64 {
	if p.RootDir == "" {
		return 0
	}
	u, err := volumestats.DiskUsage(filepath.Join(p.RootDir, "pods", string(uid), "etc-hosts"))
	if (err != nil && !errors.Is(err, volumestats.ErrIncomplete)) || u.Bytes < 0 {
		return 0
	}
	return uint64(u.Bytes)
}

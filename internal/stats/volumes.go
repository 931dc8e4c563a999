package stats

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
// each group in the order of the pod's spec, and the bytes and inodes the
// local ephemeral ones use, which count towards the pod's ephemeral
// storage. It returns nil, zero before the pod's volumes were first
// measured.
func podVolumeStats(cache VolumeStatsCache, uid types.UID) ([]statsapi.VolumeStats, fsUsage) {
	var used fsUsage
	if cache == nil {
		return nil, used
	}
	ps, ok := cache.PodVolumeStats(uid)
	if !ok {
		return nil, used
	}
	var ephemeral, persistent []statsapi.VolumeStats
	for _, v := range ps.Volumes {
		if v.LocalEphemeral {
			ephemeral = append(ephemeral, v.VolumeStats)
			used.add(v.UsedBytes, v.InodesUsed)
		} else {
			persistent = append(persistent, v.VolumeStats)
		}
	}
	return append(ephemeral, persistent...), used
}

// fsUsage adds up the bytes and inodes of a pod's ephemeral storage.
type fsUsage struct{ bytes, inodes uint64 }

// add adds what is known of bytes and inodes.
func (u *fsUsage) add(bytes, inodes *uint64) {
	if bytes != nil {
		u.bytes += *bytes
	}
	if inodes != nil {
		u.inodes += *inodes
	}
}

// etcHostsUsage is the disk space and inodes of the pod's /etc/hosts file,
// which the kubelet counts in the pod's ephemeral storage too; zero when
// it cannot be read. One small file: measured on the request path. A
// measure that is not complete is a lower bound, still better than
// nothing.
func (p *Provider) etcHostsUsage(uid types.UID) fsUsage {
	if p.RootDir == "" {
		return fsUsage{}
	}
	u, err := volumestats.DiskUsage(filepath.Join(p.RootDir, "pods", string(uid), "etc-hosts"))
	if (err != nil && !errors.Is(err, volumestats.ErrIncomplete)) || u.Bytes < 0 || u.Inodes < 0 {
		return fsUsage{}
	}
	return fsUsage{bytes: uint64(u.Bytes), inodes: uint64(u.Inodes)}
}

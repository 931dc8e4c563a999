package volume

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/volumestats"
)

func TestPodVolumes(t *testing.T) {
	e := newTestEnv(t)
	vols := func(name string, src v1.VolumeSource) v1.Volume { return v1.Volume{Name: name, VolumeSource: src} }
	pod := testPod(
		vols("data", v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}),
		vols("mem", v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}),
		vols("host", v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/var/log"}}),
		vols("cm", v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}),
		vols("sec", v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}),
		vols("down", v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{}}),
		vols("proj", v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{}}),
		vols("nfs", v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}}),
	)
	dir := func(plugin, name string) string {
		return filepath.Join(e.root, "pods", "uid-1", "volumes", plugin, name)
	}
	want := []volumestats.PodVolume{
		{Name: "data", Path: dir("kubernetes.io~empty-dir", "data"), Metrics: volumestats.KindDu},
		{Name: "mem", Path: dir("kubernetes.io~empty-dir", "mem"), Metrics: volumestats.KindStatfs},
		{Name: "host", Path: "/var/log", Metrics: volumestats.KindNone},
		{Name: "cm", Path: dir("kubernetes.io~configmap", "cm"), Metrics: volumestats.KindDu},
		{Name: "sec", Path: dir("kubernetes.io~secret", "sec"), Metrics: volumestats.KindDu},
		{Name: "down", Path: dir("kubernetes.io~downward-api", "down"), Metrics: volumestats.KindDu},
		{Name: "proj", Path: dir("kubernetes.io~projected", "proj"), Metrics: volumestats.KindDu},
	}
	if diff := cmp.Diff(want, e.m.PodVolumes(pod)); diff != "" {
		t.Errorf("PodVolumes (-want +got):\n%s", diff)
	}
}

func TestResolvedStatsVolume(t *testing.T) {
	claim := &types.NamespacedName{Namespace: "ns", Name: "data"}
	tests := []struct {
		name string
		vp   PodVolume
		want volumestats.PodVolume
	}{
		{name: "local PV by statfs, with its claim",
			vp:   PodVolume{Path: "/p", Kind: KindLocal, PVName: "pv", ClaimNamespace: "ns", ClaimName: "data"},
			want: volumestats.PodVolume{Name: "v", Path: "/p", Metrics: volumestats.KindStatfs, PVC: claim}},
		{name: "hostPath PV not measured",
			vp:   PodVolume{Path: "/p", Kind: KindHostPath, ClaimNamespace: "ns", ClaimName: "data"},
			want: volumestats.PodVolume{Name: "v", Path: "/p", Metrics: volumestats.KindNone, PVC: claim}},
		{name: "CSI PV by its driver",
			vp:   PodVolume{Path: "/p", Kind: KindCSI, ClaimNamespace: "ns", ClaimName: "data", CSIDriver: "d", CSIVolumeHandle: "h"},
			want: volumestats.PodVolume{Name: "v", Path: "/p", Metrics: volumestats.KindCSI, PVC: claim, Driver: "d", VolumeHandle: "h"}},
		{name: "inline CSI volume has no claim",
			vp:   PodVolume{Path: "/p", Kind: KindCSI, CSIDriver: "d", CSIVolumeHandle: "h"},
			want: volumestats.PodVolume{Name: "v", Path: "/p", Metrics: volumestats.KindCSI, Driver: "d", VolumeHandle: "h"}},
		{name: "block volume not measured",
			vp:   PodVolume{Path: "/dev/loop0", Kind: KindLocal, Block: true, ClaimNamespace: "ns", ClaimName: "data"},
			want: volumestats.PodVolume{Name: "v", Path: "/dev/loop0", Metrics: volumestats.KindNone, PVC: claim}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, resolvedStatsVolume("v", tt.vp)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

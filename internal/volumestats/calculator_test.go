package volumestats

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// fakeSource lists fixed volumes for every pod.
type fakeSource []PodVolume

func (f fakeSource) PodVolumes(*v1.Pod) []PodVolume { return f }

// fakeCSI reports fixed numbers, or an error.
type fakeCSI struct {
	m   Measure
	err error
}

func (f fakeCSI) VolumeStats(context.Context, *v1.Pod, PodVolume) (Measure, error) { return f.m, f.err }

func testPod(volumes ...v1.Volume) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"},
		Spec:       v1.PodSpec{NodeName: "node", Volumes: volumes},
	}
}

func TestMeasurePod(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	writeFile(t, filepath.Join(data, "f"), 1<<20)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	claim := &types.NamespacedName{Namespace: "ns", Name: "claim"}
	emptyDir := v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}
	memory := v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}}
	pvc := v1.Volume{Name: "pv", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "claim"}}}

	for _, tc := range []struct {
		name    string
		volumes []v1.Volume
		source  fakeSource
		csi     CSIMeasurer
		check   func(t *testing.T, got []VolumeStats)
	}{{
		name:    "du counts the files and takes capacity from statfs",
		volumes: []v1.Volume{emptyDir},
		source:  fakeSource{{Name: "data", Path: data, Metrics: KindDu}},
		check: func(t *testing.T, got []VolumeStats) {
			if len(got) != 1 {
				t.Fatalf("got %d volumes, want 1", len(got))
			}
			v := got[0]
			if v.Name != "data" || v.PVCRef != nil || !v.LocalEphemeral || !v.Time.Time.Equal(at) {
				t.Errorf("got %+v", v)
			}
			if u := *v.UsedBytes; u < 1<<20 || u > 2<<20 {
				t.Errorf("UsedBytes = %d, want about 1MiB", u)
			}
			if *v.InodesUsed != 2 {
				t.Errorf("InodesUsed = %d, want 2", *v.InodesUsed)
			}
			if *v.CapacityBytes == 0 || *v.Inodes == 0 {
				t.Errorf("no capacity from statfs: %+v", v.FsStats)
			}
		},
	}, {
		name:    "statfs takes every number from the file system",
		volumes: []v1.Volume{memory},
		source:  fakeSource{{Name: "mem", Path: data, Metrics: KindStatfs}},
		check: func(t *testing.T, got []VolumeStats) {
			if len(got) != 1 || got[0].LocalEphemeral {
				t.Fatalf("got %+v, want one volume that is not local ephemeral", got)
			}
			f, _ := Statfs(data)
			if *got[0].CapacityBytes != f.CapacityBytes || *got[0].UsedBytes == 0 {
				t.Errorf("got %+v, want statfs's %+v", got[0].FsStats, f)
			}
		},
	}, {
		name:    "hostPath, missing paths and CSI without a measurer are left out",
		volumes: []v1.Volume{emptyDir},
		source: fakeSource{
			{Name: "host", Path: dir, Metrics: KindNone},
			{Name: "data", Path: filepath.Join(dir, "not-yet"), Metrics: KindDu},
			{Name: "csi", Metrics: KindCSI, Driver: "d"},
		},
		check: func(t *testing.T, got []VolumeStats) {
			if len(got) != 0 {
				t.Errorf("got %+v, want none", got)
			}
		},
	}, {
		name:    "a claim's volume carries its reference",
		volumes: []v1.Volume{pvc},
		source:  fakeSource{{Name: "pv", Path: data, Metrics: KindStatfs, PVC: claim}},
		check: func(t *testing.T, got []VolumeStats) {
			if len(got) != 1 || got[0].PVCRef == nil || *got[0].PVCRef != (statsapi.PVCReference{Name: "claim", Namespace: "ns"}) {
				t.Errorf("got %+v, want the claim's reference", got)
			}
			if got[0].LocalEphemeral {
				t.Error("a claim's volume counted as local ephemeral")
			}
		},
	}, {
		name:    "CSI numbers and condition come from the driver",
		volumes: []v1.Volume{pvc},
		source:  fakeSource{{Name: "pv", Metrics: KindCSI, PVC: claim, Driver: "d", VolumeHandle: "h"}},
		csi:     fakeCSI{m: Measure{FsInfo: FsInfo{CapacityBytes: 10, AvailableBytes: 4, UsedBytes: 6, Inodes: 3, InodesFree: 1, InodesUsed: 2}, Abnormal: ptr.To(true)}},
		check: func(t *testing.T, got []VolumeStats) {
			if len(got) != 1 {
				t.Fatalf("got %d volumes, want 1", len(got))
			}
			f := got[0].FsStats
			if *f.CapacityBytes != 10 || *f.AvailableBytes != 4 || *f.UsedBytes != 6 || *f.Inodes != 3 || *f.InodesFree != 1 || *f.InodesUsed != 2 {
				t.Errorf("got %+v", f)
			}
			if got[0].Abnormal == nil || !*got[0].Abnormal {
				t.Error("the driver's abnormal condition was lost")
			}
		},
	}, {
		name:    "a driver that cannot report leaves the volume out",
		volumes: []v1.Volume{pvc},
		source:  fakeSource{{Name: "pv", Metrics: KindCSI, PVC: claim}},
		csi:     fakeCSI{err: errors.New("no GET_VOLUME_STATS")},
		check: func(t *testing.T, got []VolumeStats) {
			if len(got) != 0 {
				t.Errorf("got %+v, want none", got)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Calculator{Volumes: tc.source, CSI: tc.csi, Clock: clocktesting.NewFakePassiveClock(at)}
			got := c.MeasurePod(context.Background(), testPod(tc.volumes...))
			if got.UID != "uid-1" || got.Namespace != "ns" || got.Name != "p" {
				t.Errorf("pod reference = %+v", got)
			}
			tc.check(t, got.Volumes)
		})
	}
}

func TestIsLocalEphemeral(t *testing.T) {
	for _, tc := range []struct {
		src  v1.VolumeSource
		want bool
	}{
		{v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}, true},
		{v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}, false},
		{v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}, true},
		{v1.VolumeSource{GitRepo: &v1.GitRepoVolumeSource{}}, true},
		{v1.VolumeSource{Secret: &v1.SecretVolumeSource{}}, false},
		{v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{}}, false},
		{v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{}}, false},
		{v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{}}, false},
		{v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{}}, false},
	} {
		if got := IsLocalEphemeral(&v1.Volume{VolumeSource: tc.src}); got != tc.want {
			t.Errorf("IsLocalEphemeral(%+v) = %v, want %v", tc.src, got, tc.want)
		}
	}
}

// TestSync checks that a pod's loop starts when it is first seen, measures
// at once, and is stopped with its cache entry when the pod is gone; pods
// of other nodes are not measured.
func TestSync(t *testing.T) {
	dir := t.TempDir()
	c := &Calculator{NodeName: "node", Period: time.Hour, Volumes: fakeSource{{Name: "data", Path: dir, Metrics: KindDu}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pod := testPod(v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	other := testPod()
	other.UID, other.Name, other.Spec.NodeName = "uid-2", "elsewhere", "other-node"

	c.Sync(ctx, []v1.Pod{*pod, *other})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if s, ok := c.PodVolumeStats(pod.UID); ok {
			if len(s.Volumes) != 1 || s.Volumes[0].Name != "data" {
				t.Fatalf("PodVolumeStats = %+v", s)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pod's volumes were not measured")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := c.PodVolumeStats(other.UID); ok {
		t.Error("a pod of another node was measured")
	}
	if got := c.ListPodVolumeStats(); len(got) != 1 || got[0].UID != pod.UID {
		t.Errorf("ListPodVolumeStats = %+v", got)
	}

	c.mu.Lock()
	loop := c.pods[pod.UID]
	c.mu.Unlock()
	c.Sync(ctx, nil)
	select {
	case <-loop.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop of a gone pod did not stop")
	}
	if _, ok := c.PodVolumeStats(pod.UID); ok {
		t.Error("a gone pod's volume stats are still served")
	}
}

func TestStartDisabled(t *testing.T) {
	c := &Calculator{Period: 0}
	done := make(chan error, 1)
	go func() { done <- c.Start(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a disabled calculator kept running")
	}
}

package volumestats

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
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

// TestSync checks that a pod is measured at once when it is first seen,
// and forgotten with its result when the pod is gone; pods of other nodes
// are not measured.
func TestSync(t *testing.T) {
	dir := t.TempDir()
	c := &Calculator{NodeName: "node", Period: time.Hour, Volumes: fakeSource{{Name: "data", Path: dir, Metrics: KindDu}}}
	ctx, cancel := context.WithCancel(context.Background())
	pod := testPod(v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	other := testPod()
	other.UID, other.Name, other.Spec.NodeName = "uid-2", "elsewhere", "other-node"

	c.Sync(ctx, []*v1.Pod{pod, other})
	waitMeasured(t, c, pod.UID)
	if s, _ := c.PodVolumeStats(pod.UID); len(s.Volumes) != 1 || s.Volumes[0].Name != "data" {
		t.Fatalf("PodVolumeStats = %+v", s)
	}
	if _, ok := c.PodVolumeStats(other.UID); ok {
		t.Error("a pod of another node was measured")
	}
	if got := c.ListPodVolumeStats(); len(got) != 1 || got[0].UID != pod.UID {
		t.Errorf("ListPodVolumeStats = %+v", got)
	}

	c.Sync(ctx, nil)
	if _, ok := c.PodVolumeStats(pod.UID); ok {
		t.Error("a gone pod's volume stats are still served")
	}
	cancel()
	c.stopAll()
}

func waitMeasured(t *testing.T, c *Calculator, uid types.UID) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := c.PodVolumeStats(uid); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the volumes of pod %s were not measured", uid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// emptyDirPods returns n pods of the node, each with an emptyDir volume
// "data".
func emptyDirPods(n int) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		p := testPod(v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
		p.UID, p.Name = types.UID(fmt.Sprintf("uid-%d", i)), fmt.Sprintf("pod-%d", i)
		pods[i] = p
	}
	return pods
}

// One goroutine schedules every pod's measures: pods between measures
// hold none, and each is measured again a period (and a jitter of up to
// one) after its last measure.
func TestPodsBetweenMeasuresHoldNoGoroutines(t *testing.T) {
	dir := t.TempDir()
	const period = 300 * time.Millisecond
	c := &Calculator{NodeName: "node", Period: period, Volumes: fakeSource{{Name: "data", Path: dir, Metrics: KindDu}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); c.stopAll() }()
	before := runtime.NumGoroutine()
	const n = 50
	pods := emptyDirPods(n)
	c.Sync(ctx, pods)
	for i := range pods {
		waitMeasured(t, c, pods[i].UID)
	}
	first, _ := c.PodVolumeStats(pods[0].UID)
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() >= before+5 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines with %d pods between measures, %d before", runtime.NumGoroutine(), n, before)
		}
		time.Sleep(10 * time.Millisecond)
	}
	deadline = time.Now().Add(10 * period)
	for {
		again, _ := c.PodVolumeStats(pods[0].UID)
		if again.Volumes[0].Time.After(first.Volumes[0].Time.Time) {
			if d := again.Volumes[0].Time.Sub(first.Volumes[0].Time.Time); d < period {
				t.Errorf("measured again after %s, before a period", d)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pod was not measured again")
		}
		time.Sleep(20 * time.Millisecond)
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

// TestMeasurePodIncompleteWalk checks that a walk that could not count
// every entry still reports what it counted (a lower bound, not a volume
// gone from the pod's stats) and is logged once for the pod's volume.
func TestMeasurePodIncompleteWalk(t *testing.T) {
	dir := t.TempDir()
	for i := range 3 * walkBatch {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("f-%05d", i)), 0)
	}
	defer func(b time.Duration) { walkBudget = b }(walkBudget)
	walkBudget = 0

	var logged []string
	log := funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})
	pod := testPod(v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	c := &Calculator{Volumes: fakeSource{{Name: "data", Path: dir, Metrics: KindDu}}, Log: log,
		pods: map[types.UID]*podLoop{pod.UID: {pod: pod}}}
	for range 2 {
		got := c.MeasurePod(context.Background(), pod)
		if len(got.Volumes) != 1 {
			t.Fatalf("got %+v, want the volume with what was counted", got.Volumes)
		}
		if n := *got.Volumes[0].InodesUsed; n == 0 || n > 3*walkBatch {
			t.Errorf("InodesUsed = %d, want some of the %d entries", n, 3*walkBatch+1)
		}
	}
	if len(logged) != 1 || !strings.Contains(logged[0], `"volume"="data"`) {
		t.Errorf("logged %q, want one line naming the volume", logged)
	}
}

// The measures after the first fall on whole seconds, so that the pods of
// a full node due within a second are measured at one wake.
func TestMeasuresFallOnWholeSeconds(t *testing.T) {
	dir := t.TempDir()
	// With its jitter, a second spreads the next measures over a whole
	// second.
	const period = time.Second
	c := &Calculator{NodeName: "node", Period: period, Volumes: fakeSource{{Name: "data", Path: dir, Metrics: KindDu}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); c.stopAll() }()
	pods := emptyDirPods(20)
	c.Sync(ctx, pods)
	first := map[types.UID]time.Time{}
	for _, p := range pods {
		waitMeasured(t, c, p.UID)
		s, _ := c.PodVolumeStats(p.UID)
		first[p.UID] = s.Volumes[0].Time.Time
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range pods {
		for {
			s, _ := c.PodVolumeStats(p.UID)
			if at := s.Volumes[0].Time.Time; at.After(first[p.UID]) {
				// Started at a whole second; by half a second the
				// measure has read its clock. Twenty random times would
				// all be so one time in a million.
				if ns := at.Nanosecond(); ns >= int(500*time.Millisecond) {
					t.Errorf("pod %s measured again at %s, %d ms after a whole second", p.Name, at.Format(time.StampMilli), ns/int(time.Millisecond))
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pod %s was not measured again", p.Name)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

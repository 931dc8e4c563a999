package eviction

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/kuberuntime/planner"
	"github.com/nodelet/nodelet/internal/nodeinfo"
	"github.com/nodelet/nodelet/internal/volumestats"
)

// scene is a node for one manager round.
type scene struct {
	fakeHost
	fs func() nodeinfo.Filesystem
}

func (s scene) Statfs(string) (nodeinfo.Filesystem, error) { return s.fs(), nil }

type fakeStats struct{ pods []statsapi.PodStats }

func (f fakeStats) Summary(context.Context, bool) (*statsapi.Summary, error) {
	return &statsapi.Summary{Pods: f.pods}, nil
}

// fakeEvictor records evictions and makes the pod Failed, as the pod's
// sync would once it stopped.
type fakeEvictor struct {
	c       client.Client
	evicted map[types.UID]planner.Eviction
}

func (f *fakeEvictor) Evict(pod *v1.Pod, ev planner.Eviction) bool {
	if _, ok := f.evicted[pod.UID]; ok {
		return false
	}
	f.evicted[pod.UID] = ev
	p := &v1.Pod{}
	if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(pod), p); err != nil {
		panic(err)
	}
	p.Status.Phase = v1.PodFailed
	if err := f.c.Status().Update(context.Background(), p); err != nil {
		panic(err)
	}
	return true
}

func (f *fakeEvictor) Evicted(uid types.UID) bool { _, ok := f.evicted[uid]; return ok }

type fakeReclaimer struct {
	calls int
	free  func()
}

func (f *fakeReclaimer) DeleteAllUnusedContainers(context.Context) error { f.calls++; return nil }
func (f *fakeReclaimer) DeleteUnusedImages(context.Context) (int64, error) {
	f.free()
	return 0, nil
}

// fakeVolumePaths puts a pod's emptyDir volumes under a directory named
// by its UID.
type fakeVolumePaths struct{}

func (fakeVolumePaths) EmptyDirPath(uid types.UID, name string) string {
	return filepath.Join("/pods", string(uid), name)
}

// volumeMeasure is what a walk of a volume returns.
type volumeMeasure struct {
	u   volumestats.Usage
	err error
}

func withSizeLimit(name, limit string) podOpt {
	return func(pod *v1.Pod) {
		pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: name, VolumeSource: v1.VolumeSource{
			EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse(limit))}}})
	}
}

func podStats(pod *v1.Pod, mem, ephemeral uint64) statsapi.PodStats {
	return statsapi.PodStats{
		PodRef:           statsapi.PodReference{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)},
		Memory:           &statsapi.MemoryStats{WorkingSetBytes: ptr.To(mem)},
		EphemeralStorage: &statsapi.FsStats{UsedBytes: ptr.To(ephemeral)},
		Containers: []statsapi.ContainerStats{{Name: "app",
			Memory: &statsapi.MemoryStats{WorkingSetBytes: ptr.To(mem)},
			Rootfs: &statsapi.FsStats{UsedBytes: ptr.To(ephemeral)}, Logs: &statsapi.FsStats{UsedBytes: ptr.To[uint64](0)}}},
	}
}

// withInodes gives the pod's writable layer n inodes, and its logs one.
func withInodes(ps statsapi.PodStats, n uint64) statsapi.PodStats {
	ps.EphemeralStorage.InodesUsed = ptr.To(n + 1)
	ps.Containers[0].Rootfs.InodesUsed = ptr.To(n)
	ps.Containers[0].Logs.InodesUsed = ptr.To[uint64](1)
	return ps
}

func TestManagerSynchronize(t *testing.T) {
	const gi = int64(1 << 30)
	meminfo := "MemTotal: 4194304 kB\nMemAvailable: 4194304 kB\n" // 4Gi
	memFiles := func(workingSet int64) map[string]string {
		return map[string]string{
			nodeinfo.MeminfoPath:  meminfo,
			MemoryCgroupUsagePath: resource.NewQuantity(workingSet, resource.BinarySI).AsDec().String(),
			MemoryCgroupStatPath:  "total_inactive_file 0",
		}
	}
	roomyDisk := func() nodeinfo.Filesystem {
		return nodeinfo.Filesystem{CapacityBytes: 100 * gi, AvailableBytes: 50 * gi, Inodes: 1000, InodesFree: 900}
	}
	hog := testPod("hog")
	small := testPod("small", withRequest(v1.ResourceMemory, "500Mi"))
	critical := testPod("critical", withPriority(2000001000))
	tests := []struct {
		name          string
		hard          map[string]string
		files         map[string]string
		fs            func() nodeinfo.Filesystem
		reclaimFrees  bool
		pods          []*v1.Pod
		stats         []statsapi.PodStats
		wantEvicted   []string
		wantGrace     int64
		wantMessage   string
		wantConds     []v1.NodeConditionType
		wantReclaimed bool
		// volumes is what a walk of each pod's emptyDir finds, by pod
		// UID.
		volumes map[string]volumeMeasure
	}{
		{name: "nothing met, nothing evicted",
			hard: map[string]string{"memory.available": "1Gi"}, files: memFiles(gi), fs: roomyDisk,
			pods: []*v1.Pod{hog, small}, stats: []statsapi.PodStats{podStats(hog, uint64(gi/2), 0), podStats(small, 100<<20, 0)}},
		{name: "memory: the pod most over its request goes, in one second",
			hard: map[string]string{"memory.available": "1Gi"}, files: memFiles(3*gi + gi/2), fs: roomyDisk,
			pods: []*v1.Pod{small, hog}, stats: []statsapi.PodStats{podStats(hog, uint64(3*gi), 0), podStats(small, 100<<20, 0)},
			wantEvicted: []string{"hog"}, wantGrace: 1, wantConds: []v1.NodeConditionType{v1.NodeMemoryPressure},
			wantMessage: "The node was low on resource: memory. Threshold quantity: 1Gi, available: 512Mi. Container app was using 3Gi, request is 0, has larger consumption of memory. "},
		{name: "a critical pod is never evicted for a node signal",
			hard: map[string]string{"memory.available": "1Gi"}, files: memFiles(3*gi + gi/2), fs: roomyDisk,
			pods: []*v1.Pod{critical, small}, stats: []statsapi.PodStats{podStats(critical, uint64(3*gi), 0), podStats(small, 100<<20, 0)},
			wantEvicted: []string{"small"}, wantGrace: 1, wantConds: []v1.NodeConditionType{v1.NodeMemoryPressure},
			wantMessage: "The node was low on resource: memory. Threshold quantity: 1Gi, available: 512Mi. "},
		{name: "disk: reclaim first, no eviction when it is enough",
			hard: map[string]string{"nodefs.available": "10%"}, files: memFiles(gi), reclaimFrees: true,
			pods: []*v1.Pod{hog}, stats: []statsapi.PodStats{podStats(hog, 0, uint64(gi))},
			wantConds: []v1.NodeConditionType{v1.NodeDiskPressure}, wantReclaimed: true},
		{name: "disk: evict when reclaim is not enough",
			hard: map[string]string{"nodefs.available": "10%"}, files: memFiles(gi),
			pods: []*v1.Pod{hog}, stats: []statsapi.PodStats{podStats(hog, 0, uint64(gi))},
			wantEvicted: []string{"hog"}, wantGrace: 1, wantConds: []v1.NodeConditionType{v1.NodeDiskPressure}, wantReclaimed: true,
			wantMessage: "The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 5Gi. Container app was using 1Gi, request is 0, has larger consumption of ephemeral-storage. "},
		{name: "inodes: the pod with the most inodes goes, not the one with the most bytes",
			hard: map[string]string{"nodefs.inodesFree": "950"}, files: memFiles(gi), fs: roomyDisk,
			pods: []*v1.Pod{testPod("bytes"), testPod("empty-files")},
			stats: []statsapi.PodStats{withInodes(podStats(testPod("bytes"), 0, uint64(gi)), 10),
				withInodes(podStats(testPod("empty-files"), 0, 4<<20), 500)},
			wantEvicted: []string{"empty-files"}, wantGrace: 1, wantConds: []v1.NodeConditionType{v1.NodeDiskPressure}, wantReclaimed: true,
			wantMessage: "The node was low on resource: inodes. Threshold quantity: 950, available: 900. "},
		{name: "inodes: an emptyDir full of empty files counts, measured fresh",
			hard: map[string]string{"nodefs.inodesFree": "950"}, files: memFiles(gi), fs: roomyDisk,
			pods: []*v1.Pod{testPod("bytes"), testPod("empty-files", withSizeLimit("scratch", "1Gi"))},
			stats: []statsapi.PodStats{withInodes(podStats(testPod("bytes"), 0, uint64(gi)), 10),
				withInodes(podStats(testPod("empty-files"), 0, 4<<20), 3)},
			volumes:     map[string]volumeMeasure{"uid-empty-files": {u: volumestats.Usage{Bytes: 4 << 20, Inodes: 1 << 20}}},
			wantEvicted: []string{"empty-files"}, wantGrace: 1, wantConds: []v1.NodeConditionType{v1.NodeDiskPressure}, wantReclaimed: true,
			wantMessage: "The node was low on resource: inodes. Threshold quantity: 950, available: 900. "},
		{name: "local storage: a pod past its limit goes at once, without pressure",
			hard: map[string]string{"memory.available": "100Mi"}, files: memFiles(gi), fs: roomyDisk,
			pods:        []*v1.Pod{testPod("limited", withLimit(v1.ResourceEphemeralStorage, "1Mi")), small},
			stats:       []statsapi.PodStats{podStats(testPod("limited"), 0, 2<<20), podStats(small, 0, 2<<20)},
			wantEvicted: []string{"limited"}, wantGrace: 1,
			wantMessage: "Pod ephemeral local storage usage exceeds the total limit of containers 1Mi. "},
		{name: "local storage: an emptyDir past its sizeLimit goes at once",
			hard: map[string]string{"memory.available": "100Mi"}, files: memFiles(gi), fs: roomyDisk,
			pods:        []*v1.Pod{testPod("writer", withSizeLimit("scratch", "1Mi")), testPod("quiet", withSizeLimit("scratch", "1Mi"))},
			volumes:     map[string]volumeMeasure{"uid-writer": {u: volumestats.Usage{Bytes: 2 * mi}}, "uid-quiet": {u: volumestats.Usage{Bytes: mi / 2}}},
			wantEvicted: []string{"writer"}, wantGrace: 1,
			wantMessage: `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `},
		{name: "local storage: an emptyDir the walk could not fully count is past its sizeLimit",
			hard: map[string]string{"memory.available": "100Mi"}, files: memFiles(gi), fs: roomyDisk,
			pods: []*v1.Pod{testPod("hider", withSizeLimit("scratch", "1Gi"))},
			volumes: map[string]volumeMeasure{"uid-hider": {u: volumestats.Usage{Bytes: mi, Inodes: 1 << 20},
				err: fmt.Errorf("%w: walk stopped", volumestats.ErrIncomplete)}},
			wantEvicted: []string{"hider"}, wantGrace: 1,
			wantMessage: `Usage of EmptyDir volume "scratch" exceeds the limit "1Gi". `},
		{name: "local storage: an emptyDir that cannot be measured at all is no violation",
			hard: map[string]string{"memory.available": "100Mi"}, files: memFiles(gi), fs: roomyDisk,
			pods:    []*v1.Pod{testPod("unmeasured", withSizeLimit("scratch", "1Mi"))},
			volumes: map[string]volumeMeasure{"uid-unmeasured": {err: errors.New("lstat: permission denied")}}},
		{name: "local storage: a critical pod past its emptyDir sizeLimit is never evicted",
			hard: map[string]string{"memory.available": "100Mi"}, files: memFiles(gi), fs: roomyDisk,
			pods:    []*v1.Pod{testPod("critical", withSizeLimit("scratch", "1Mi"), withPriority(2000001000))},
			volumes: map[string]volumeMeasure{"uid-critical": {u: volumestats.Usage{Bytes: 2 * mi}}}},
		{name: "local storage: a critical pod past its pod limit is never evicted",
			hard: map[string]string{"memory.available": "100Mi"}, files: memFiles(gi), fs: roomyDisk,
			pods:  []*v1.Pod{testPod("limited", withLimit(v1.ResourceEphemeralStorage, "1Mi"), withPriority(2000001000))},
			stats: []statsapi.PodStats{podStats(testPod("limited"), 0, 2<<20)}},
		{name: "local storage: a static pod past its limit is never evicted",
			hard: map[string]string{"memory.available": "100Mi"}, files: memFiles(gi), fs: roomyDisk,
			pods: []*v1.Pod{testPod("static", withLimit(v1.ResourceEphemeralStorage, "1Mi"),
				withAnnotation("kubernetes.io/config.source", "file"))},
			stats: []statsapi.PodStats{podStats(testPod("static"), 0, 2<<20)}},
		{name: "local storage: a mirror pod past its limit is never evicted",
			hard: map[string]string{"memory.available": "100Mi"}, files: memFiles(gi), fs: roomyDisk,
			pods: []*v1.Pod{testPod("mirror", withLimit(v1.ResourceEphemeralStorage, "1Mi"),
				withAnnotation(v1.MirrorPodAnnotationKey, "x"))},
			stats: []statsapi.PodStats{podStats(testPod("mirror"), 0, 2<<20)}},
		{name: "local storage: the critical pod stays, the ordinary one past its limit goes",
			hard: map[string]string{"memory.available": "100Mi"}, files: memFiles(gi), fs: roomyDisk,
			pods: []*v1.Pod{testPod("critical", withLimit(v1.ResourceEphemeralStorage, "1Mi"), withPriority(2000000000)),
				testPod("limited", withLimit(v1.ResourceEphemeralStorage, "1Mi"))},
			stats:       []statsapi.PodStats{podStats(testPod("critical"), 0, 2<<20), podStats(testPod("limited"), 0, 2<<20)},
			wantEvicted: []string{"limited"}, wantGrace: 1,
			wantMessage: "Pod ephemeral local storage usage exceeds the total limit of containers 1Mi. "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []client.Object
			for _, p := range tt.pods {
				p := p.DeepCopy()
				p.Spec.NodeName = "n1"
				objs = append(objs, p)
			}
			c := fake.NewClientBuilder().WithObjects(objs...).WithStatusSubresource(&v1.Pod{}).Build()
			freed := false
			fs := tt.fs
			if fs == nil {
				fs = func() nodeinfo.Filesystem {
					avail := 5 * gi
					if freed {
						avail = 20 * gi
					}
					return nodeinfo.Filesystem{CapacityBytes: 100 * gi, AvailableBytes: avail, Inodes: 1000, InodesFree: 900}
				}
			}
			rec := &fakeReclaimer{free: func() { freed = tt.reclaimFrees }}
			ev := &fakeEvictor{c: c, evicted: map[types.UID]planner.Eviction{}}
			cfg := &v1alpha1.NodeletConfiguration{NodeName: "n1", RootDir: "/", EvictionHard: tt.hard,
				EvictionPressureTransitionPeriod: metav1.Duration{Duration: time.Minute},
				EvictionMonitoringInterval:       metav1.Duration{Duration: time.Second}}
			m, err := New(Options{Config: cfg, Host: scene{fakeHost: fakeHost{files: tt.files}, fs: fs},
				Volumes: fakeVolumePaths{}, DiskUsage: func(dir string) (volumestats.Usage, error) {
					v := tt.volumes[filepath.Base(filepath.Dir(dir))]
					return v.u, v.err
				},
				Stats: fakeStats{pods: tt.stats}, Pods: c, Evictor: ev, Reclaimer: rec,
				Recorder: record.NewFakeRecorder(10), Clock: clocktesting.NewFakeClock(time.Now()), Log: logr.Discard()})
			if err != nil {
				t.Fatal(err)
			}
			m.Synchronize(context.Background())
			var got []string
			for _, p := range tt.pods {
				if e, ok := ev.evicted[p.UID]; ok {
					got = append(got, p.Name)
					if e.GracePeriodSeconds != tt.wantGrace || e.Message != tt.wantMessage {
						t.Errorf("eviction of %s = %+v, want grace %d, message %q", p.Name, e, tt.wantGrace, tt.wantMessage)
					}
				}
			}
			if len(got) != len(tt.wantEvicted) || (len(got) > 0 && got[0] != tt.wantEvicted[0]) {
				t.Errorf("evicted %v, want %v", got, tt.wantEvicted)
			}
			conds, _ := m.Conditions()
			if len(conds) != len(tt.wantConds) || (len(conds) > 0 && conds[0] != tt.wantConds[0]) {
				t.Errorf("conditions %v, want %v", conds, tt.wantConds)
			}
			if (rec.calls > 0) != tt.wantReclaimed {
				t.Errorf("reclaimed %d times, want some: %v", rec.calls, tt.wantReclaimed)
			}
		})
	}
}

package eviction

import (
	"os"
	"testing"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/nodeinfo"
	"github.com/nodelet/nodelet/internal/volumestats"
)

func TestParseWorkingSet(t *testing.T) {
	tests := []struct {
		name, usage, stat string
		want              int64
		wantErr           bool
	}{
		{name: "usage minus inactive file", usage: "4063023104\n", stat: "cache 1\ninactive_file 53248\ntotal_inactive_file 1121144832\n", want: 4063023104 - 1121144832},
		{name: "never below zero", usage: "10", stat: "total_inactive_file 20", want: 0},
		{name: "no total_inactive_file", usage: "10", stat: "inactive_file 5", wantErr: true},
		{name: "bad usage", usage: "x", stat: "total_inactive_file 5", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseWorkingSet([]byte(tt.usage), []byte(tt.stat))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("ParseWorkingSet = %d, %v; want %d, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

type fakeHost struct {
	nodeinfo.OSHost
	files map[string]string
}

func (h fakeHost) ReadFile(name string) ([]byte, error) {
	if s, ok := h.files[name]; ok {
		return []byte(s), nil
	}
	return nil, os.ErrNotExist
}

func TestObserveMemoryAndPIDs(t *testing.T) {
	meminfo := "MemTotal:       1048576 kB\nMemAvailable:    524288 kB\n"
	tests := []struct {
		name  string
		files map[string]string
		want  Observation
	}{
		{name: "capacity minus the root cgroup's working set",
			files: map[string]string{nodeinfo.MeminfoPath: meminfo, MemoryCgroupUsagePath: "400000000", MemoryCgroupStatPath: "total_inactive_file 100000000"},
			want:  Observation{Available: 1<<30 - 300000000, Capacity: 1 << 30}},
		{name: "cgroup v2: capacity minus anon and file pages less inactive file pages of the root",
			files: map[string]string{nodeinfo.MeminfoPath: meminfo, UnifiedMemoryStatPath: "anon 300000000\nfile 200000000\nkernel 90000000\nactive_file 50000000\ninactive_file 150000000\n"},
			want:  Observation{Available: 1<<30 - 350000000, Capacity: 1 << 30}},
		{name: "cgroup v1 wins over a v2 hierarchy beside it",
			files: map[string]string{nodeinfo.MeminfoPath: meminfo, MemoryCgroupUsagePath: "400000000", MemoryCgroupStatPath: "total_inactive_file 100000000",
				UnifiedMemoryStatPath: "anon 1\nfile 1\ninactive_file 0\n"},
			want: Observation{Available: 1<<30 - 300000000, Capacity: 1 << 30}},
		{name: "no memory cgroup: MemAvailable",
			files: map[string]string{nodeinfo.MeminfoPath: meminfo},
			want:  Observation{Available: 512 << 20, Capacity: 1 << 30}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := observeMemory(fakeHost{files: tt.files})
			if err != nil || got != tt.want {
				t.Errorf("observeMemory = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	if _, err := observeMemory(fakeHost{files: map[string]string{nodeinfo.MeminfoPath: meminfo, UnifiedMemoryStatPath: "anon 1\nfile 2\n"}}); err == nil {
		t.Error("observeMemory with a v2 memory.stat lacking inactive_file: want an error")
	}
	got, err := observePIDs(fakeHost{files: map[string]string{nodeinfo.PIDMaxPath: "4194304\n", nodeinfo.LoadavgPath: "0.01 0.14 0.22 2/300 1234\n"}})
	if err != nil || got != (Observation{Available: 4194304 - 300, Capacity: 4194304}) {
		t.Errorf("observePIDs = %+v, %v", got, err)
	}
}

func TestUsageFromStats(t *testing.T) {
	pod := testPod("p")
	ps := &statsapi.PodStats{
		Memory:           &statsapi.MemoryStats{WorkingSetBytes: ptr.To[uint64](300)},
		EphemeralStorage: &statsapi.FsStats{UsedBytes: ptr.To[uint64](1000)},
		ProcessStats:     &statsapi.ProcessStats{ProcessCount: ptr.To[uint64](7)},
		Containers: []statsapi.ContainerStats{{
			Name:   "app",
			Memory: &statsapi.MemoryStats{WorkingSetBytes: ptr.To[uint64](250)},
			Rootfs: &statsapi.FsStats{UsedBytes: ptr.To[uint64](600)},
			Logs:   &statsapi.FsStats{UsedBytes: ptr.To[uint64](400)},
		}},
	}
	pu := usageFromStats(pod, ps, map[string]VolumeUsage{"scratch": {Usage: volumestats.Usage{Bytes: 5000}}})
	if *pu.Memory != 300 || *pu.Ephemeral != 6000 || *pu.Processes != 7 ||
		*pu.Containers[0].Memory != 250 || *pu.Containers[0].Ephemeral != 1000 {
		t.Errorf("usage = %+v", pu)
	}
	// The summary counts the volumes it measured in its ephemeral storage:
	// the fresh measure replaces the summary's, not adds to it.
	ps.EphemeralStorage.UsedBytes = ptr.To[uint64](1000 + 3000 + 200)
	ps.VolumeStats = []statsapi.VolumeStats{
		{Name: "scratch", FsStats: statsapi.FsStats{UsedBytes: ptr.To[uint64](3000)}},
		{Name: "config", FsStats: statsapi.FsStats{UsedBytes: ptr.To[uint64](200)}},
	}
	if pu := usageFromStats(pod, ps, map[string]VolumeUsage{"scratch": {Usage: volumestats.Usage{Bytes: 5000}}}); *pu.Ephemeral != 1000+5000+200 {
		t.Errorf("ephemeral with the summary's volumes = %d, want %d", *pu.Ephemeral, 1000+5000+200)
	}
	none := usageFromStats(pod, nil, nil)
	if none.Memory != nil || none.Ephemeral != nil || none.Pod != pod {
		t.Errorf("usage without stats = %+v", none)
	}
}

func TestUsageFromStatsInodes(t *testing.T) {
	pod := testPod("p")
	ps := &statsapi.PodStats{
		// Writable layer 40, logs 2, scratch 30 as measured in the
		// background, config 5.
		EphemeralStorage: &statsapi.FsStats{UsedBytes: ptr.To[uint64](1000), InodesUsed: ptr.To[uint64](40 + 2 + 30 + 5)},
		Containers: []statsapi.ContainerStats{{
			Name:   "app",
			Rootfs: &statsapi.FsStats{UsedBytes: ptr.To[uint64](600), InodesUsed: ptr.To[uint64](40)},
			Logs:   &statsapi.FsStats{UsedBytes: ptr.To[uint64](400), InodesUsed: ptr.To[uint64](2)},
		}},
		VolumeStats: []statsapi.VolumeStats{
			{Name: "scratch", FsStats: statsapi.FsStats{UsedBytes: ptr.To[uint64](0), InodesUsed: ptr.To[uint64](30)}},
			{Name: "config", FsStats: statsapi.FsStats{UsedBytes: ptr.To[uint64](0), InodesUsed: ptr.To[uint64](5)}},
		},
	}
	// The fresh walk found a million empty files in scratch.
	pu := usageFromStats(pod, ps, map[string]VolumeUsage{"scratch": {Usage: volumestats.Usage{Bytes: 4096, Inodes: 1 << 20}}})
	if pu.Inodes == nil || *pu.Inodes != 40+2+5+1<<20 {
		t.Errorf("pod inodes = %v, want the writable layer's, the logs', config's and the fresh scratch count", ptr.Deref(pu.Inodes, -1))
	}
	if c := pu.Containers[0]; c.Inodes == nil || *c.Inodes != 42 {
		t.Errorf("container inodes = %v, want the writable layer's and the logs' 42", ptr.Deref(c.Inodes, -1))
	}
	// A runtime that does not report inodes: only the fresh walk is
	// known.
	ps.EphemeralStorage.InodesUsed, ps.Containers[0].Rootfs.InodesUsed = nil, nil
	pu = usageFromStats(pod, ps, map[string]VolumeUsage{"scratch": {Usage: volumestats.Usage{Inodes: 7}}})
	if pu.Inodes == nil || *pu.Inodes != 7 || pu.Containers[0].Inodes != nil {
		t.Errorf("inodes without the runtime's = pod %v, container %v; want 7 and unknown", ptr.Deref(pu.Inodes, -1), pu.Containers[0].Inodes)
	}
	if pu := usageFromStats(pod, ps, nil); pu.Inodes != nil {
		t.Errorf("inodes known from nothing: %d", *pu.Inodes)
	}
}

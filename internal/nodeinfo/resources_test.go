package nodeinfo

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func assertResources(t *testing.T, got, want corev1.ResourceList) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("got %d resources %v, want %d %v", len(got), got, len(want), want)
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok || g.Cmp(w) != 0 {
			t.Errorf("%s = %s, want %s", name, g.String(), w.String())
		}
	}
}

func TestCapacity(t *testing.T) {
	tests := []struct {
		name string
		mem  Memory
		fs   Filesystem
		want corev1.ResourceList
	}{
		{
			name: "everything known",
			mem:  Memory{TotalBytes: 8 << 30, HugePageSizeBytes: 2 << 20, HugePagesTotal: 10},
			fs:   Filesystem{CapacityBytes: 100 << 30},
			want: rl("cpu", "4", "memory", "8Gi", "pods", "110", "ephemeral-storage", "100Gi", "hugepages-2Mi", "20Mi"),
		},
		{
			name: "no filesystem, no huge pages",
			mem:  Memory{TotalBytes: 1 << 30},
			want: rl("cpu", "4", "memory", "1Gi", "pods", "110"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertResources(t, Capacity(4, tt.mem, tt.fs, 110), tt.want)
		})
	}
}

func TestAllocatable(t *testing.T) {
	hard := func(m map[string]string) Thresholds {
		th, err := ParseThresholds(m)
		if err != nil {
			t.Fatal(err)
		}
		return th
	}
	capacity := rl("cpu", "4", "memory", "8Gi", "pods", "110", "ephemeral-storage", "100Gi")
	tests := []struct {
		name     string
		capacity corev1.ResourceList
		sys      corev1.ResourceList
		kube     corev1.ResourceList
		hard     Thresholds
		want     corev1.ResourceList
	}{
		{
			name: "nothing reserved", capacity: capacity,
			want: capacity,
		},
		{
			name: "kubelet defaults", capacity: capacity,
			hard: hard(map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "imagefs.available": "15%"}),
			want: rl("cpu", "4", "memory", "8092Mi", "pods", "110", "ephemeral-storage", "92160Mi"),
		},
		{
			name: "system and kube reserved add up", capacity: capacity,
			sys:  rl("cpu", "500m", "memory", "1Gi"),
			kube: rl("cpu", "250m", "memory", "512Mi", "ephemeral-storage", "10Gi"),
			hard: hard(map[string]string{"memory.available": "512Mi"}),
			want: rl("cpu", "3250m", "memory", "6Gi", "pods", "110", "ephemeral-storage", "90Gi"),
		},
		{
			name: "never negative", capacity: capacity,
			sys:  rl("cpu", "8", "memory", "16Gi"),
			want: rl("cpu", "0", "memory", "0", "pods", "110", "ephemeral-storage", "100Gi"),
		},
		{
			name:     "huge pages come out of memory",
			capacity: rl("cpu", "4", "memory", "8Gi", "pods", "110", "hugepages-2Mi", "1Gi"),
			want:     rl("cpu", "4", "memory", "7Gi", "pods", "110", "hugepages-2Mi", "1Gi"),
		},
		{
			name:     "reservation of a resource without capacity is ignored",
			capacity: rl("cpu", "4", "memory", "8Gi", "pods", "110"),
			sys:      rl("ephemeral-storage", "1Gi"),
			hard:     hard(map[string]string{"nodefs.available": "10%"}),
			want:     rl("cpu", "4", "memory", "8Gi", "pods", "110"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertResources(t, Allocatable(tt.capacity, tt.sys, tt.kube, tt.hard), tt.want)
		})
	}
}

func TestParseThresholdsRejectsBadValues(t *testing.T) {
	for _, v := range []string{"101%", "x%", "lots"} {
		if _, err := ParseThresholds(map[string]string{"memory.available": v}); err == nil {
			t.Errorf("ParseThresholds(%q) succeeded, want an error", v)
		}
	}
}

func TestEvaluatePressure(t *testing.T) {
	hard, err := ParseThresholds(map[string]string{
		"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "pid.available": "1000",
	})
	if err != nil {
		t.Fatal(err)
	}
	healthy := Usage{
		Memory: Memory{TotalBytes: 8 << 30, AvailableBytes: 4 << 30},
		RootFS: Filesystem{CapacityBytes: 100 << 30, AvailableBytes: 50 << 30, Inodes: 1000, InodesFree: 500},
		PIDMax: 32768, Tasks: 300,
	}
	tests := []struct {
		name   string
		mutate func(*Usage)
		hard   Thresholds
		want   Pressure
	}{
		{name: "healthy", mutate: func(*Usage) {}, hard: hard},
		{name: "low memory", mutate: func(u *Usage) { u.Memory.AvailableBytes = 50 << 20 }, hard: hard, want: Pressure{Memory: true}},
		{name: "full disk", mutate: func(u *Usage) { u.RootFS.AvailableBytes = 5 << 30 }, hard: hard, want: Pressure{Disk: true}},
		{name: "no inodes", mutate: func(u *Usage) { u.RootFS.InodesFree = 10 }, hard: hard, want: Pressure{Disk: true}},
		{name: "pids exhausted", mutate: func(u *Usage) { u.Tasks = 32000 }, hard: hard, want: Pressure{PID: true}},
		{name: "unknown measures never press", mutate: func(u *Usage) { *u = Usage{} }, hard: hard},
		{name: "no thresholds never press", mutate: func(u *Usage) { u.Memory.AvailableBytes = 0 }, hard: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := healthy
			tt.mutate(&u)
			if got := EvaluatePressure(u, tt.hard); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

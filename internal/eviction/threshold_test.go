package eviction

import (
	"testing"
	"time"
)

func TestParseThresholds(t *testing.T) {
	tests := []struct {
		name                       string
		hard, soft, grace, reclaim map[string]string
		want                       []string
		wantErr                    bool
	}{
		{name: "the kubelet's defaults",
			hard: map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%"},
			want: []string{"hard/memory.available", "hard/nodefs.available", "hard/nodefs.inodesFree", "hard/imagefs.available"}},
		{name: "soft after hard of the same signal, memory first",
			hard:  map[string]string{"pid.available": "10%", "memory.available": "1Gi"},
			soft:  map[string]string{"memory.available": "2Gi"},
			grace: map[string]string{"memory.available": "30s"},
			want:  []string{"hard/memory.available", "soft/memory.available", "hard/pid.available"}},
		{name: "zero is no threshold", hard: map[string]string{"memory.available": "0", "nodefs.available": "0%"}},
		{name: "unknown signal", hard: map[string]string{"allocatableMemory.available": "1Gi"}, wantErr: true},
		{name: "bad percentage", hard: map[string]string{"nodefs.available": "110%"}, wantErr: true},
		{name: "bad quantity", hard: map[string]string{"memory.available": "lots"}, wantErr: true},
		{name: "negative quantity", hard: map[string]string{"memory.available": "-1Mi"}, wantErr: true},
		{name: "soft without grace", soft: map[string]string{"memory.available": "1Gi"}, wantErr: true},
		{name: "bad grace", soft: map[string]string{"memory.available": "1Gi"}, grace: map[string]string{"memory.available": "soon"}, wantErr: true},
		{name: "bad minimum reclaim", hard: map[string]string{"memory.available": "1Gi"}, reclaim: map[string]string{"memory.available": "x"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseThresholds(tt.hard, tt.soft, tt.grace, tt.reclaim)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tt.wantErr)
			}
			var keys []string
			for _, th := range got {
				keys = append(keys, th.Key())
			}
			if len(keys) != len(tt.want) {
				t.Fatalf("thresholds = %v, want %v", keys, tt.want)
			}
			for i := range keys {
				if keys[i] != tt.want[i] {
					t.Fatalf("thresholds = %v, want %v", keys, tt.want)
				}
			}
		})
	}
}

func TestParseThresholdsValues(t *testing.T) {
	got, err := ParseThresholds(map[string]string{"memory.available": "100Mi"},
		map[string]string{"nodefs.available": "10%"}, map[string]string{"nodefs.available": "1m30s"},
		map[string]string{"memory.available": "50Mi", "nodefs.available": "5%"})
	if err != nil {
		t.Fatal(err)
	}
	mem, disk := got[0], got[1]
	if mem.Soft || mem.Value.Of(1<<30) != 100<<20 || mem.MinReclaim.Of(1<<30) != 50<<20 {
		t.Errorf("memory threshold = %+v", mem)
	}
	if !disk.Soft || disk.GracePeriod != 90*time.Second || disk.Value.Of(1000) != 100 || disk.MinReclaim.Of(1000) != 50 {
		t.Errorf("disk threshold = %+v", disk)
	}
}

func TestMet(t *testing.T) {
	ts, err := ParseThresholds(map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"}, nil, nil,
		map[string]string{"memory.available": "50Mi"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		obs        Observations
		minReclaim bool
		want       int
	}{
		{name: "nothing measured meets nothing", obs: Observations{}},
		{name: "zero capacity is unknown", obs: Observations{SignalMemoryAvailable: {Available: 0, Capacity: 0}}},
		{name: "at the threshold is not below it", obs: Observations{SignalMemoryAvailable: {Available: 100 << 20, Capacity: 1 << 30}}},
		{name: "below", obs: Observations{SignalMemoryAvailable: {Available: 100<<20 - 1, Capacity: 1 << 30}}, want: 1},
		{name: "above the threshold but within the minimum reclaim, enforced",
			obs: Observations{SignalMemoryAvailable: {Available: 120 << 20, Capacity: 1 << 30}}, minReclaim: true, want: 1},
		{name: "above the threshold but within the minimum reclaim, not enforced",
			obs: Observations{SignalMemoryAvailable: {Available: 120 << 20, Capacity: 1 << 30}}},
		{name: "a percentage of the capacity",
			obs: Observations{SignalNodeFsAvailable: {Available: 99, Capacity: 1000}, SignalMemoryAvailable: {Available: 1 << 30, Capacity: 1 << 30}}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Met(ts, tt.obs, tt.minReclaim); len(got) != tt.want {
				t.Errorf("Met = %v, want %d thresholds", got, tt.want)
			}
		})
	}
}

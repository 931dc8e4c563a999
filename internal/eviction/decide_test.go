package eviction

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ts, err := ParseThresholds(
		map[string]string{"memory.available": "100", "pid.available": "10"},
		map[string]string{"nodefs.available": "50"}, map[string]string{"nodefs.available": "30s"},
		map[string]string{"memory.available": "20"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Thresholds: ts, TransitionPeriod: 60 * time.Second}
	mem := func(avail int64) Observations {
		return Observations{SignalMemoryAvailable: {Available: avail, Capacity: 1000}}
	}
	disk := func(avail int64) Observations {
		return Observations{SignalNodeFsAvailable: {Available: avail, Capacity: 1000}}
	}
	type round struct {
		at        int
		obs       Observations
		wantMet   []string
		wantConds []v1.NodeConditionType
	}
	tests := []struct {
		name   string
		rounds []round
	}{
		{name: "nothing met", rounds: []round{{at: 0, obs: mem(500)}}},
		{name: "hard threshold: met at once, condition at once", rounds: []round{
			{at: 0, obs: mem(99), wantMet: []string{"hard/memory.available"}, wantConds: []v1.NodeConditionType{v1.NodeMemoryPressure}},
		}},
		{name: "minimum reclaim keeps a met threshold until reclaimed", rounds: []round{
			{at: 0, obs: mem(99), wantMet: []string{"hard/memory.available"}, wantConds: []v1.NodeConditionType{v1.NodeMemoryPressure}},
			{at: 10, obs: mem(110), wantMet: []string{"hard/memory.available"}, wantConds: []v1.NodeConditionType{v1.NodeMemoryPressure}},
			{at: 20, obs: mem(120), wantConds: []v1.NodeConditionType{v1.NodeMemoryPressure}},
			{at: 30, obs: mem(110), wantConds: []v1.NodeConditionType{v1.NodeMemoryPressure}},
		}},
		{name: "the condition stays for the transition period after its last observation", rounds: []round{
			{at: 0, obs: mem(99), wantMet: []string{"hard/memory.available"}, wantConds: []v1.NodeConditionType{v1.NodeMemoryPressure}},
			{at: 10, obs: mem(500), wantConds: []v1.NodeConditionType{v1.NodeMemoryPressure}},
			{at: 59, obs: mem(500), wantConds: []v1.NodeConditionType{v1.NodeMemoryPressure}},
			{at: 60, obs: mem(500)},
			{at: 80, obs: mem(500)},
		}},
		{name: "soft threshold: condition at once, met only after its grace period", rounds: []round{
			{at: 0, obs: disk(40), wantConds: []v1.NodeConditionType{v1.NodeDiskPressure}},
			{at: 29, obs: disk(40), wantConds: []v1.NodeConditionType{v1.NodeDiskPressure}},
			{at: 30, obs: disk(40), wantMet: []string{"soft/nodefs.available"}, wantConds: []v1.NodeConditionType{v1.NodeDiskPressure}},
		}},
		{name: "a break restarts the grace period", rounds: []round{
			{at: 0, obs: disk(40), wantConds: []v1.NodeConditionType{v1.NodeDiskPressure}},
			{at: 20, obs: disk(60), wantConds: []v1.NodeConditionType{v1.NodeDiskPressure}},
			{at: 25, obs: disk(40), wantConds: []v1.NodeConditionType{v1.NodeDiskPressure}},
			{at: 50, obs: disk(40), wantConds: []v1.NodeConditionType{v1.NodeDiskPressure}},
			{at: 55, obs: disk(40), wantMet: []string{"soft/nodefs.available"}, wantConds: []v1.NodeConditionType{v1.NodeDiskPressure}},
		}},
		{name: "several signals: memory first, each its condition", rounds: []round{
			{at: 0, obs: Observations{
				SignalPIDAvailable:    {Available: 5, Capacity: 1000},
				SignalMemoryAvailable: {Available: 50, Capacity: 1000},
			}, wantMet: []string{"hard/memory.available", "hard/pid.available"},
				wantConds: []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodePIDPressure}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st State
			for _, r := range tt.rounds {
				var d Decision
				st, d = Decide(cfg, st, r.obs, at(r.at))
				var met []string
				for _, th := range d.Met {
					met = append(met, th.Key())
				}
				if !slices.Equal(met, r.wantMet) || !slices.Equal(d.Conditions, r.wantConds) {
					t.Fatalf("at %ds: met %v, conditions %v; want %v, %v", r.at, met, d.Conditions, r.wantMet, r.wantConds)
				}
			}
		})
	}
}

func TestGracePeriodSeconds(t *testing.T) {
	hard, soft := Threshold{}, Threshold{Soft: true}
	tests := []struct {
		name           string
		t              Threshold
		pod, max, want int64
	}{
		{name: "hard: one second", t: hard, pod: 30, max: 60, want: 1},
		{name: "soft: the pod's when shorter", t: soft, pod: 30, max: 60, want: 30},
		{name: "soft: capped", t: soft, pod: 30, max: 10, want: 10},
		{name: "soft: at least one second", t: soft, pod: 30, max: 0, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := GracePeriodSeconds(tt.t, tt.pod, tt.max); got != tt.want {
				t.Errorf("GracePeriodSeconds = %d, want %d", got, tt.want)
			}
		})
	}
}

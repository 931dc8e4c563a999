package shutdown

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/kuberuntime/planner"
)

func TestPeriods(t *testing.T) {
	d := func(s time.Duration) metav1.Duration { return metav1.Duration{Duration: s} }
	byPriority := []v1alpha1.ShutdownGracePeriodByPodPriority{
		{Priority: 100000, ShutdownGracePeriodSeconds: 20},
		{Priority: 0, ShutdownGracePeriodSeconds: 30},
		{Priority: 2000000000, ShutdownGracePeriodSeconds: 10},
	}
	cases := []struct {
		name            string
		total, critical time.Duration
		byPriority      []v1alpha1.ShutdownGracePeriodByPodPriority
		priorityGateOff bool
		want            []Period
		wantTotal       time.Duration
	}{
		{name: "unset: no graceful shutdown"},
		{name: "EKS: 2m30s, 30s for critical pods", total: 150 * time.Second, critical: 30 * time.Second,
			want: []Period{{0, 120}, {2000000000, 30}}, wantTotal: 150 * time.Second},
		{name: "no critical part", total: 30 * time.Second,
			want: []Period{{0, 30}, {2000000000, 0}}, wantTotal: 30 * time.Second},
		{name: "all for critical pods", total: 30 * time.Second, critical: 30 * time.Second,
			want: []Period{{0, 0}, {2000000000, 30}}, wantTotal: 30 * time.Second},
		{name: "critical part above the whole: none", total: 10 * time.Second, critical: 20 * time.Second},
		{name: "seconds are whole", total: 10*time.Second + 900*time.Millisecond, critical: 4*time.Second + 500*time.Millisecond,
			want: []Period{{0, 6}, {2000000000, 4}}, wantTotal: 10 * time.Second},
		{name: "by priority, sorted", byPriority: byPriority,
			want: []Period{{0, 30}, {100000, 20}, {2000000000, 10}}, wantTotal: time.Minute},
		{name: "by priority without its gate: the two periods", byPriority: byPriority, priorityGateOff: true,
			total: 20 * time.Second, critical: 5 * time.Second, want: []Period{{0, 15}, {2000000000, 5}}, wantTotal: 20 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1alpha1.NodeletConfiguration{ShutdownGracePeriod: d(tc.total), ShutdownGracePeriodCriticalPods: d(tc.critical),
				ShutdownGracePeriodByPodPriority: append([]v1alpha1.ShutdownGracePeriodByPodPriority(nil), tc.byPriority...)}
			got := Periods(c, !tc.priorityGateOff)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Periods (-want +got):\n%s", diff)
			}
			if total := Total(got); total != tc.wantTotal {
				t.Errorf("Total = %v, want %v", total, tc.wantTotal)
			}
		})
	}
}

func TestGroupPods(t *testing.T) {
	pod := func(name string, prio *int32) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{Priority: prio}}
	}
	two := []Period{{0, 20}, {2000000000, 10}}
	three := []Period{{-100, 30}, {1000, 20}, {2000000000, 10}}
	pods := []*v1.Pod{
		pod("no-priority", nil),
		pod("zero", ptr.To[int32](0)),
		pod("negative", ptr.To[int32](-1000)),
		pod("high", ptr.To[int32](1000)),
		pod("higher", ptr.To[int32](1500)),
		pod("cluster-critical", ptr.To[int32](2000000000)),
		pod("node-critical", ptr.To[int32](2000001000)),
	}
	cases := []struct {
		name    string
		periods []Period
		want    [][]string
	}{
		{name: "the two periods: critical pods last", periods: two,
			want: [][]string{{"no-priority", "zero", "negative", "high", "higher"}, {"cluster-critical", "node-critical"}}},
		{name: "by priority: a pod goes to the highest period at or below it, the lowest when below all", periods: three,
			want: [][]string{{"no-priority", "zero", "negative"}, {"high", "higher"}, {"cluster-critical", "node-critical"}}},
		{name: "one period takes every pod", periods: []Period{{5000, 10}},
			want: [][]string{{"no-priority", "zero", "negative", "high", "higher", "cluster-critical", "node-critical"}}},
		{name: "an empty group stays", periods: []Period{{0, 10}, {500, 5}, {1000, 5}},
			want: [][]string{{"no-priority", "zero", "negative"}, nil, {"high", "higher", "cluster-critical", "node-critical"}}},
		{name: "no periods, no groups", periods: nil, want: [][]string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			groups := GroupPods(tc.periods, pods)
			got := make([][]string, len(groups))
			for i, g := range groups {
				if g.Period != tc.periods[i] {
					t.Errorf("group %d has period %v, want %v", i, g.Period, tc.periods[i])
				}
				for _, p := range g.Pods {
					got[i] = append(got[i], p.Name)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("groups (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEviction(t *testing.T) {
	cases := []struct {
		name  string
		grace *int64
		group int64
		want  int64
	}{
		{name: "the group's period when the pod's is longer", grace: ptr.To[int64](60), group: 20, want: 20},
		{name: "the pod's when shorter", grace: ptr.To[int64](5), group: 20, want: 5},
		{name: "the pod's 0", grace: ptr.To[int64](0), group: 20, want: 0},
		{name: "no pod grace period: the group's", group: 20, want: 20},
		{name: "an empty period", grace: ptr.To[int64](30), group: 0, want: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{TerminationGracePeriodSeconds: tc.grace}}
			got := Eviction(pod, Period{GracePeriodSeconds: tc.group})
			want := planner.Eviction{Reason: "Terminated", Message: "Pod was terminated in response to imminent node shutdown.", GracePeriodSeconds: tc.want}
			if got != want {
				t.Errorf("Eviction = %+v, want %+v", got, want)
			}
		})
	}
}

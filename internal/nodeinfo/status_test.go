package nodeinfo

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	t0 = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	t1 = t0.Add(10 * time.Second)
)

func readyObservation() Observation {
	return Observation{
		Capacity:        rl("cpu", "4", "memory", "8Gi", "pods", "110"),
		Allocatable:     rl("cpu", "4", "memory", "7Gi", "pods", "110"),
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: "n1"}},
		NodeInfo:        corev1.NodeSystemInfo{MachineID: "m", KubeletVersion: "v0.1.0", ContainerRuntimeVersion: "containerd://1.6"},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
		Images:          []corev1.ContainerImage{{Names: []string{"pause:3"}, SizeBytes: 1}},
		ImagesKnown:     true,
	}
}

func condition(s corev1.NodeStatus, t corev1.NodeConditionType) corev1.NodeCondition {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c
		}
	}
	return corev1.NodeCondition{}
}

func TestComputeStatus(t *testing.T) {
	first, _ := ComputeStatus(corev1.NodeStatus{}, readyObservation(), t0)
	tests := []struct {
		name        string
		old         corev1.NodeStatus
		observe     func(*Observation)
		wantChanged bool
		check       func(t *testing.T, got corev1.NodeStatus)
	}{
		{
			name: "first status sets everything", old: corev1.NodeStatus{}, wantChanged: true,
			check: func(t *testing.T, got corev1.NodeStatus) {
				if len(got.Conditions) != 4 {
					t.Fatalf("got %d conditions, want 4", len(got.Conditions))
				}
				r := condition(got, corev1.NodeReady)
				if r.Status != corev1.ConditionTrue || r.Reason != ReasonReady || !r.LastTransitionTime.Time.Equal(t1) {
					t.Errorf("Ready = %+v", r)
				}
				if m := condition(got, corev1.NodeMemoryPressure); m.Status != corev1.ConditionFalse || m.Reason != ReasonSufficientMemory {
					t.Errorf("MemoryPressure = %+v", m)
				}
				if got.NodeInfo.ContainerRuntimeVersion != "containerd://1.6" || got.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
					t.Errorf("nodeInfo/daemonEndpoints not set: %+v", got)
				}
			},
		},
		{
			name: "volumes in use replace the old ones", old: withVolumesInUse(first, "kubernetes.io/csi/d^old"), wantChanged: true,
			observe: func(o *Observation) {
				o.VolumesInUse, o.VolumesInUseKnown = []corev1.UniqueVolumeName{"kubernetes.io/csi/d^a", "kubernetes.io/csi/d^b"}, true
			},
			check: func(t *testing.T, got corev1.NodeStatus) {
				if want := []corev1.UniqueVolumeName{"kubernetes.io/csi/d^a", "kubernetes.io/csi/d^b"}; !slices.Equal(got.VolumesInUse, want) {
					t.Errorf("volumesInUse = %v, want %v", got.VolumesInUse, want)
				}
			},
		},
		{
			name: "no volume in use clears the list", old: withVolumesInUse(first, "kubernetes.io/csi/d^old"), wantChanged: true,
			observe: func(o *Observation) { o.VolumesInUseKnown = true },
			check: func(t *testing.T, got corev1.NodeStatus) {
				if got.VolumesInUse != nil {
					t.Errorf("volumesInUse = %v, want none", got.VolumesInUse)
				}
			},
		},
		{
			name: "volumes in use not known: the old ones stay", old: withVolumesInUse(first, "kubernetes.io/csi/d^old"), wantChanged: false,
			check: func(t *testing.T, got corev1.NodeStatus) {
				if len(got.VolumesInUse) != 1 {
					t.Errorf("volumesInUse = %v, want the old one kept", got.VolumesInUse)
				}
			},
		},
		{
			name: "a removed device resource leaves capacity and allocatable", old: withExtended(first, "example.com/gpu", "example.com/nic"), wantChanged: true,
			observe: func(o *Observation) { o.RemovedResources = []corev1.ResourceName{"example.com/gpu"} },
			check: func(t *testing.T, got corev1.NodeStatus) {
				if _, ok := got.Capacity["example.com/gpu"]; ok {
					t.Errorf("capacity %v still has the removed resource", got.Capacity)
				}
				if _, ok := got.Allocatable["example.com/gpu"]; ok {
					t.Errorf("allocatable %v still has the removed resource", got.Allocatable)
				}
				if _, ok := got.Capacity["example.com/nic"]; !ok {
					t.Errorf("capacity %v lost another extended resource", got.Capacity)
				}
			},
		},
		{
			name: "nothing changed: only heartbeats move", old: first, wantChanged: false,
			check: func(t *testing.T, got corev1.NodeStatus) {
				for _, c := range got.Conditions {
					if !c.LastHeartbeatTime.Time.Equal(t1) || !c.LastTransitionTime.Time.Equal(t0) {
						t.Errorf("%s heartbeat %v transition %v, want %v and %v", c.Type, c.LastHeartbeatTime, c.LastTransitionTime, t1, t0)
					}
				}
			},
		},
		{
			name: "runtime down flips Ready", old: first, wantChanged: true,
			observe: func(o *Observation) {
				o.RuntimeProblems = []string{"container runtime is down: x"}
				o.NodeInfo.ContainerRuntimeVersion = ""
				o.ImagesKnown, o.Images = false, nil
			},
			check: func(t *testing.T, got corev1.NodeStatus) {
				r := condition(got, corev1.NodeReady)
				if r.Status != corev1.ConditionFalse || r.Reason != ReasonNotReady || r.Message != "container runtime is down: x" || !r.LastTransitionTime.Time.Equal(t1) {
					t.Errorf("Ready = %+v", r)
				}
				if got.NodeInfo.ContainerRuntimeVersion != "containerd://1.6" || len(got.Images) != 1 {
					t.Errorf("runtime version and images of an unreachable runtime must be kept: %+v", got)
				}
				if m := condition(got, corev1.NodeMemoryPressure); !m.LastTransitionTime.Time.Equal(t0) {
					t.Errorf("unchanged condition moved its transition time: %+v", m)
				}
			},
		},
		{
			name: "message change alone keeps the transition time", old: func() corev1.NodeStatus {
				o := readyObservation()
				o.RuntimeProblems = []string{"a"}
				s, _ := ComputeStatus(corev1.NodeStatus{}, o, t0)
				return s
			}(), wantChanged: true,
			observe: func(o *Observation) { o.RuntimeProblems = []string{"b"} },
			check: func(t *testing.T, got corev1.NodeStatus) {
				if r := condition(got, corev1.NodeReady); r.Message != "b" || !r.LastTransitionTime.Time.Equal(t0) {
					t.Errorf("Ready = %+v", r)
				}
			},
		},
		{
			name: "memory pressure", old: first, wantChanged: true,
			observe: func(o *Observation) { o.Pressure.Memory = true },
			check: func(t *testing.T, got corev1.NodeStatus) {
				if m := condition(got, corev1.NodeMemoryPressure); m.Status != corev1.ConditionTrue || m.Reason != ReasonInsufficientMemory {
					t.Errorf("MemoryPressure = %+v", m)
				}
			},
		},
		{
			name: "others' conditions, extended resources and volumes are kept",
			old: func() corev1.NodeStatus {
				s := first.DeepCopy()
				s.Conditions = append(s.Conditions, corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: "RouteCreated"})
				s.Capacity["example.com/dongle"] = rl("x", "3")["x"]
				s.Allocatable["example.com/dongle"] = rl("x", "2")["x"]
				s.VolumesAttached = []corev1.AttachedVolume{{Name: "v", DevicePath: "/dev/x"}}
				return *s
			}(),
			wantChanged: false,
			check: func(t *testing.T, got corev1.NodeStatus) {
				if c := condition(got, corev1.NodeNetworkUnavailable); c.Reason != "RouteCreated" || !c.LastHeartbeatTime.IsZero() {
					t.Errorf("NetworkUnavailable = %+v", c)
				}
				if q := got.Allocatable["example.com/dongle"]; q.Value() != 2 {
					t.Errorf("extended allocatable = %s, want 2", q.String())
				}
				if len(got.VolumesAttached) != 1 {
					t.Errorf("volumesAttached dropped")
				}
			},
		},
		{
			name: "image set change", old: first, wantChanged: true,
			observe: func(o *Observation) { o.Images = append(o.Images, corev1.ContainerImage{Names: []string{"busybox"}}) },
		},
		{
			name: "equal quantities in another format are no change",
			old: func() corev1.NodeStatus {
				s := first.DeepCopy()
				s.Capacity[corev1.ResourceMemory] = rl("x", "8589934592")["x"]
				return *s
			}(),
			wantChanged: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := readyObservation()
			if tt.observe != nil {
				tt.observe(&obs)
			}
			got, changed := ComputeStatus(tt.old, obs, t1)
			if changed != tt.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tt.wantChanged)
			}
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

func withVolumesInUse(s corev1.NodeStatus, names ...corev1.UniqueVolumeName) corev1.NodeStatus {
	s = *s.DeepCopy()
	s.VolumesInUse = names
	return s
}

func TestComputeStatusDoesNotModifyOld(t *testing.T) {
	old, _ := ComputeStatus(corev1.NodeStatus{}, readyObservation(), t0)
	before := old.DeepCopy()
	obs := readyObservation()
	obs.RuntimeProblems = []string{"down"}
	_, _ = ComputeStatus(old, obs, t1)
	if condition(old, corev1.NodeReady) != condition(*before, corev1.NodeReady) {
		t.Errorf("old status was modified")
	}
}

func TestReportDue(t *testing.T) {
	written, _ := ComputeStatus(corev1.NodeStatus{}, readyObservation(), t0)
	tests := []struct {
		name     string
		s        corev1.NodeStatus
		now      time.Time
		wantDue  bool
		wantWait time.Duration
	}{
		{name: "never written", s: corev1.NodeStatus{}, now: t0, wantDue: true},
		{name: "just written", s: written, now: t0.Add(10 * time.Second), wantWait: 4*time.Minute + 50*time.Second},
		{name: "exactly due", s: written, now: t0.Add(5 * time.Minute), wantDue: true},
		{name: "overdue", s: written, now: t0.Add(time.Hour), wantDue: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			due, wait := ReportDue(tt.s, 5*time.Minute, tt.now)
			if due != tt.wantDue || wait != tt.wantWait {
				t.Errorf("got due=%v wait=%v, want %v %v", due, wait, tt.wantDue, tt.wantWait)
			}
		})
	}
}

func TestHeartbeatsAreWholeSeconds(t *testing.T) {
	s, _ := ComputeStatus(corev1.NodeStatus{}, readyObservation(), t0.Add(700*time.Millisecond))
	if hb := condition(s, corev1.NodeReady).LastHeartbeatTime; !hb.Equal(&metav1.Time{Time: t0}) {
		t.Errorf("heartbeat %v, want %v: the API keeps whole seconds only", hb, t0)
	}
}

func TestComputeStatusMergesAddresses(t *testing.T) {
	internal := func(ip string) corev1.NodeAddress {
		return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip}
	}
	host := corev1.NodeAddress{Type: corev1.NodeHostName, Address: "n1"}
	external := corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.7"}
	dns := corev1.NodeAddress{Type: corev1.NodeExternalDNS, Address: "n1.example.com"}
	cases := []struct {
		name     string
		old, own []corev1.NodeAddress
		want     []corev1.NodeAddress
	}{
		{name: "first status", own: []corev1.NodeAddress{internal("10.0.0.1"), host},
			want: []corev1.NodeAddress{internal("10.0.0.1"), host}},
		{name: "others' types are kept", old: []corev1.NodeAddress{internal("10.0.0.1"), host, external, dns},
			own: []corev1.NodeAddress{internal("10.0.0.1"), host}, want: []corev1.NodeAddress{internal("10.0.0.1"), host, external, dns}},
		{name: "own type is replaced", old: []corev1.NodeAddress{external, internal("10.0.0.9"), internal("10.0.0.8"), host},
			own: []corev1.NodeAddress{internal("10.0.0.1"), host}, want: []corev1.NodeAddress{internal("10.0.0.1"), host, external}},
		{name: "nothing observed keeps all", old: []corev1.NodeAddress{internal("10.0.0.1"), external},
			want: []corev1.NodeAddress{internal("10.0.0.1"), external}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs := readyObservation()
			obs.Addresses = tc.own
			got, _ := ComputeStatus(corev1.NodeStatus{Addresses: tc.old}, obs, t0)
			if !equality.Semantic.DeepEqual(got.Addresses, tc.want) {
				t.Fatalf("addresses = %v, want %v", got.Addresses, tc.want)
			}
			again, changed := ComputeStatus(got, obs, t1)
			if changed || !equality.Semantic.DeepEqual(again.Addresses, tc.want) {
				t.Fatalf("second update changed the addresses to %v", again.Addresses)
			}
		})
	}
}

// withExtended returns s with one unit of each extended resource in its
// capacity and allocatable.
func withExtended(s corev1.NodeStatus, names ...corev1.ResourceName) corev1.NodeStatus {
	s = *s.DeepCopy()
	for _, n := range names {
		s.Capacity[n] = resource.MustParse("1")
		s.Allocatable[n] = resource.MustParse("1")
	}
	return s
}

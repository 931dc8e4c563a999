package controller

import (
	"slices"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/dra"
	"github.com/nodelet/nodelet/internal/podworkers"
)

func TestAllocatedResourcesStatusMerge(t *testing.T) {
	rs := func(name string) corev1.ResourceStatus {
		return corev1.ResourceStatus{Name: corev1.ResourceName(name), Resources: []corev1.ResourceHealth{{ResourceID: "x", Health: corev1.ResourceHealthStatusHealthy}}}
	}
	cases := []struct {
		name    string
		sources []map[string][]corev1.ResourceStatus
		want    map[string][]corev1.ResourceStatus
	}{
		{name: "none"},
		{name: "empty sources", sources: []map[string][]corev1.ResourceStatus{nil, {"c": nil}}},
		{name: "device plugins and claims of one container, sorted by name",
			sources: []map[string][]corev1.ResourceStatus{
				{"c": {rs("example.com/gpu")}, "d": {rs("example.com/nic")}},
				{"c": {rs("claim:net"), rs("claim:gpu/big")}},
			},
			want: map[string][]corev1.ResourceStatus{
				"c": {rs("claim:gpu/big"), rs("claim:net"), rs("example.com/gpu")},
				"d": {rs("example.com/nic")},
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, allocatedResourcesStatus(tc.sources...)); diff != "" {
				t.Errorf("merged (-want +got):\n%s", diff)
			}
		})
	}
}

// TestResourceUpdates: a health change names pods by UID; those with a
// worker become events for the pod controller, by name.
func TestResourceUpdates(t *testing.T) {
	u := resourceUpdatesFor(&Deps{}, logr.Discard())
	u.DevicesChanged("gpu.example.com", []dra.DeviceKey{{Pool: "node", Device: "gpu-0"}}) // nothing set up yet
	u.Pods([]types.UID{"a"})
	u.setKeys(func() []podworkers.Key {
		return []podworkers.Key{{Namespace: "ns", Name: "a", UID: "a"}, {Namespace: "ns", Name: "b", UID: "b"}, {Namespace: "ns", Name: "c", UID: "c"}}
	})
	u.setClaims(func(driver string, devices []dra.DeviceKey) []types.UID {
		if driver == "gpu.example.com" && slices.Contains(devices, dra.DeviceKey{Pool: "node", Device: "gpu-0"}) {
			return []types.UID{"b", "gone"}
		}
		return nil
	})
	u.Pods([]types.UID{"a", "c"})
	u.DevicesChanged("gpu.example.com", []dra.DeviceKey{{Pool: "node", Device: "gpu-0"}})
	u.DevicesChanged("other.example.com", []dra.DeviceKey{{Pool: "node", Device: "gpu-0"}})
	var got []string
	for len(u.events) > 0 {
		ev := <-u.Events()
		got = append(got, ev.Object.Namespace+"/"+ev.Object.Name+"/"+string(ev.Object.UID))
	}
	slices.Sort(got)
	if want := []string{"ns/a/a", "ns/b/b", "ns/c/c"}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}

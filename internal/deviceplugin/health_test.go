package deviceplugin

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

const (
	healthy   = corev1.ResourceHealthStatusHealthy
	unhealthy = corev1.ResourceHealthStatusUnhealthy
	unknown   = corev1.ResourceHealthStatusUnknown
)

func TestDeviceHealth(t *testing.T) {
	devices := map[string]bool{"dev-0": true, "dev-1": false}
	cases := []struct {
		name            string
		running, listed bool
		id              string
		want            corev1.ResourceHealthStatus
	}{
		{name: "healthy", running: true, listed: true, id: "dev-0", want: healthy},
		{name: "unhealthy", running: true, listed: true, id: "dev-1", want: unhealthy},
		{name: "no longer listed", running: true, listed: true, id: "dev-2", want: unknown},
		{name: "plugin gone", listed: true, id: "dev-0", want: unknown},
		{name: "registered again, not listed yet", running: true, id: "dev-0", want: unknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := DeviceHealth(tc.running, tc.listed, devices, tc.id); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestResourceStatus(t *testing.T) {
	health := func(resource, id string) corev1.ResourceHealthStatus {
		switch resource + "/" + id {
		case "example.com/gpu/gpu-1":
			return unhealthy
		case "example.com/nic/nic-0":
			return unknown
		}
		return healthy
	}
	cases := []struct {
		name     string
		assigned map[string][]string
		want     []corev1.ResourceStatus
	}{
		{name: "no devices"},
		{name: "a resource without devices", assigned: map[string][]string{"example.com/gpu": nil}},
		{name: "one device", assigned: map[string][]string{"example.com/gpu": {"gpu-0"}},
			want: []corev1.ResourceStatus{{Name: "example.com/gpu", Resources: []corev1.ResourceHealth{{ResourceID: "gpu-0", Health: healthy}}}}},
		{name: "sorted by resource and device",
			assigned: map[string][]string{"example.com/nic": {"nic-0"}, "example.com/gpu": {"gpu-2", "gpu-1", "gpu-2"}},
			want: []corev1.ResourceStatus{
				{Name: "example.com/gpu", Resources: []corev1.ResourceHealth{{ResourceID: "gpu-1", Health: unhealthy}, {ResourceID: "gpu-2", Health: healthy}}},
				{Name: "example.com/nic", Resources: []corev1.ResourceHealth{{ResourceID: "nic-0", Health: unknown}}},
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ResourceStatus(tc.assigned, health)); diff != "" {
				t.Errorf("allocatedResourcesStatus (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChangedDevices(t *testing.T) {
	type view = map[string]corev1.ResourceHealthStatus
	cases := []struct {
		name          string
		before, after view
		want          []string
	}{
		{name: "nothing"},
		{name: "the same", before: view{"a": healthy, "b": unhealthy}, after: view{"a": healthy, "b": unhealthy}},
		{name: "turning unhealthy and back", before: view{"a": healthy, "b": unhealthy}, after: view{"a": unhealthy, "b": healthy}, want: []string{"a", "b"}},
		{name: "the plugin gone", before: view{"a": healthy, "b": unknown}, after: view{"a": unknown, "b": unknown}, want: []string{"a"}},
		{name: "a device dropped", before: view{"a": healthy, "b": unknown}, after: view{}, want: []string{"a"}},
		{name: "a device listed", before: view{"a": healthy}, after: view{"a": healthy, "b": healthy, "c": unknown}, want: []string{"b"}},
		{name: "the resource first known", after: view{"b": unhealthy, "a": healthy}, want: []string{"a", "b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := changedDevices(tc.before, tc.after); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

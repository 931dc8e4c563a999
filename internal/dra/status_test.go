package dra

import (
	"slices"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestContainerResourceStatus(t *testing.T) {
	// The pod's claim "gpus" is the ResourceClaim "pod-gpus" (from a
	// template), "net" is "shared-net"; the scheduler's claim for its
	// extended resources is "pod-ext".
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod", Namespace: "ns", UID: "pod-uid"},
		Spec: v1.PodSpec{ResourceClaims: []v1.PodResourceClaim{
			{Name: "gpus", ResourceClaimTemplateName: ptr.To("gpu-template")},
			{Name: "net", ResourceClaimName: ptr.To("shared-net")},
			{Name: "none", ResourceClaimTemplateName: ptr.To("empty")},
		}},
		Status: v1.PodStatus{
			ResourceClaimStatuses: []v1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: ptr.To("pod-gpus")}, {Name: "none"}},
			ExtendedResourceClaimStatus: &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "pod-ext", RequestMappings: []v1.ContainerExtendedResourceRequest{
				{ContainerName: "c", ResourceName: "example.com/gpu", RequestName: "container-0-request-0"},
				{ContainerName: "other", ResourceName: "example.com/gpu", RequestName: "container-1-request-0"},
			}},
		},
	}
	prepared := map[string]ClaimState{
		"pod-gpus": {Name: "pod-gpus", Namespace: "ns", Prepared: true, Drivers: []DriverState{{Name: "gpu.example.com", Devices: []Device{
			{RequestNames: []string{"big"}, Pool: "node", Device: "gpu-1"},
			{RequestNames: []string{"small/mig"}, Pool: "node", Device: "gpu-0-mig-3"},
			{RequestNames: []string{"big"}, Pool: "node", Device: "gpu-0"},
		}}}},
		"shared-net": {Name: "shared-net", Namespace: "ns", Prepared: true, Drivers: []DriverState{
			{Name: "sriov.example.com", Devices: []Device{{Pool: "node", Device: "vf-0"}, {Pool: "node", Device: "vf-0"}}},
			{Name: "ib.example.com", Devices: []Device{{Pool: "fabric", Device: "port-1", CDIDeviceIDs: []string{"ib.example.com/port=port-1", "ib.example.com/port=all"}}}},
		}},
		"pod-ext": {Name: "pod-ext", Namespace: "ns", Prepared: true, Drivers: []DriverState{{Name: "gpu.example.com", Devices: []Device{
			{RequestNames: []string{"container-0-request-0"}, Pool: "node", Device: "gpu-7"},
			{RequestNames: []string{"container-1-request-0"}, Pool: "node", Device: "gpu-8"},
		}}}},
	}
	health := func(driver string, d DeviceKey) (v1.ResourceHealthStatus, string) {
		switch driver + "/" + d.Pool + "/" + d.Device {
		case "gpu.example.com/node/gpu-0":
			return v1.ResourceHealthStatusUnhealthy, "ECC errors"
		case "gpu.example.com/node/gpu-1", "gpu.example.com/node/gpu-7":
			return v1.ResourceHealthStatusHealthy, "ok"
		}
		return v1.ResourceHealthStatusUnknown, ""
	}
	rh := func(id string, h v1.ResourceHealthStatus, msg ...string) v1.ResourceHealth {
		out := v1.ResourceHealth{ResourceID: v1.ResourceID(id), Health: h}
		if len(msg) > 0 {
			out.Message = ptr.To(msg[0])
		}
		return out
	}
	gpus := func(q int64) v1.ResourceList {
		return v1.ResourceList{"example.com/gpu": *resource.NewQuantity(q, resource.DecimalSI)}
	}
	cases := []struct {
		name              string
		container         v1.Container
		messages          bool
		extendedResources bool
		prepared          map[string]ClaimState
		want              []v1.ResourceStatus
	}{
		{name: "no claims", container: v1.Container{Name: "c"}},
		{name: "a whole claim from a template, with messages",
			container: v1.Container{Name: "c", Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpus"}}}},
			messages:  true,
			want: []v1.ResourceStatus{{Name: "claim:gpus", Resources: []v1.ResourceHealth{
				rh("gpu.example.com/node/gpu-0", v1.ResourceHealthStatusUnhealthy, "ECC errors"),
				rh("gpu.example.com/node/gpu-0-mig-3", v1.ResourceHealthStatusUnknown),
				rh("gpu.example.com/node/gpu-1", v1.ResourceHealthStatusHealthy, "ok"),
			}}}},
		{name: "messages off",
			container: v1.Container{Name: "c", Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpus", Request: "big"}}}},
			want: []v1.ResourceStatus{{Name: "claim:gpus/big", Resources: []v1.ResourceHealth{
				rh("gpu.example.com/node/gpu-0", v1.ResourceHealthStatusUnhealthy),
				rh("gpu.example.com/node/gpu-1", v1.ResourceHealthStatusHealthy),
			}}}},
		{name: "requests, a subrequest's device under its request, sorted by name",
			container: v1.Container{Name: "c", Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "net"}, {Name: "gpus", Request: "small"}, {Name: "gpus", Request: "big"}}}},
			messages:  true,
			want: []v1.ResourceStatus{
				{Name: "claim:gpus/big", Resources: []v1.ResourceHealth{
					rh("gpu.example.com/node/gpu-0", v1.ResourceHealthStatusUnhealthy, "ECC errors"),
					rh("gpu.example.com/node/gpu-1", v1.ResourceHealthStatusHealthy, "ok"),
				}},
				{Name: "claim:gpus/small", Resources: []v1.ResourceHealth{rh("gpu.example.com/node/gpu-0-mig-3", v1.ResourceHealthStatusUnknown)}},
				// Devices of two drivers, one device twice: once; a
				// device with CDI devices by its first.
				{Name: "claim:net", Resources: []v1.ResourceHealth{
					rh("ib.example.com/port=port-1", v1.ResourceHealthStatusUnknown),
					rh("sriov.example.com/node/vf-0", v1.ResourceHealthStatusUnknown),
				}},
			}},
		{name: "a request with no device is left out",
			container: v1.Container{Name: "c", Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpus", Request: "other"}}}}},
		{name: "a claim not prepared, or a template that made none, is left out",
			container: v1.Container{Name: "c", Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpus"}, {Name: "none"}, {Name: "unlisted"}}}},
			prepared:  map[string]ClaimState{}},
		{name: "DRA-backed extended resources",
			container:         v1.Container{Name: "c", Resources: v1.ResourceRequirements{Requests: gpus(1), Limits: gpus(1)}},
			extendedResources: true,
			want: []v1.ResourceStatus{{Name: "claim:pod-ext/container-0-request-0", Resources: []v1.ResourceHealth{
				rh("gpu.example.com/node/gpu-7", v1.ResourceHealthStatusHealthy),
			}}}},
		{name: "DRA-backed extended resources with the gate off",
			container: v1.Container{Name: "c", Resources: v1.ResourceRequirements{Requests: gpus(1), Limits: gpus(1)}}},
		{name: "extended resources the container does not request",
			container:         v1.Container{Name: "c"},
			extendedResources: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := prepared
			if tc.prepared != nil {
				p = tc.prepared
			}
			got := ContainerResourceStatus(pod, &tc.container, p, health, tc.messages, tc.extendedResources)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("allocatedResourcesStatus (-want +got):\n%s", diff)
			}
		})
	}
}

func TestManagerResourceStatus(t *testing.T) {
	health := NewHealth(logr.Discard(), nil)
	defer health.Close()
	m := NewManager(Options{Health: health, HealthMessages: true})
	m.claims = map[types.UID]*ClaimState{
		"a": {UID: "a", Name: "gpu", Namespace: "ns", PodUIDs: []types.UID{"p", "q"}, Prepared: true, Drivers: []DriverState{
			{Name: "gpu.example.com", Devices: []Device{{Pool: "node", Device: "gpu-0"}}},
		}},
		"b": {UID: "b", Name: "preparing", Namespace: "ns", PodUIDs: []types.UID{"p"}, Drivers: []DriverState{
			{Name: "gpu.example.com", Devices: []Device{{Pool: "node", Device: "gpu-1"}}},
		}},
		"c": {UID: "c", Name: "other", Namespace: "ns", PodUIDs: []types.UID{"r"}, Drivers: []DriverState{
			{Name: "net.example.com", Devices: []Device{{Pool: "node", Device: "gpu-0"}}},
		}},
	}
	pod := podUsing("p", "gpu", "preparing")
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}}}}
	want := map[string][]v1.ResourceStatus{"c": {{Name: "claim:gpu", Resources: []v1.ResourceHealth{
		{ResourceID: "gpu.example.com/node/gpu-0", Health: v1.ResourceHealthStatusUnknown},
	}}}}
	if diff := cmp.Diff(want, m.ResourceStatus(pod)); diff != "" {
		t.Errorf("before any report (-want +got):\n%s", diff)
	}
	reportOne(health, "gpu.example.com", "gpu-0", true, "fine")
	want["c"][0].Resources[0] = v1.ResourceHealth{ResourceID: "gpu.example.com/node/gpu-0", Health: v1.ResourceHealthStatusHealthy, Message: ptr.To("fine")}
	if diff := cmp.Diff(want, m.ResourceStatus(pod)); diff != "" {
		t.Errorf("after a report (-want +got):\n%s", diff)
	}
	if got := m.PodsUsing("gpu.example.com", []DeviceKey{{Pool: "node", Device: "gpu-0"}, {Pool: "node", Device: "gpu-1"}}); !slices.Equal(got, []types.UID{"p", "q"}) {
		t.Errorf("PodsUsing = %v, want p and q", got)
	}
	if got := m.PodsUsing("gpu.example.com", []DeviceKey{{Pool: "node", Device: "gpu-9"}}); len(got) != 0 {
		t.Errorf("PodsUsing of a device nobody holds = %v", got)
	}
	if got := NewManager(Options{}).ResourceStatus(pod); got != nil {
		t.Errorf("without health: %v", got)
	}
}

package dra

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func claimPod(claims []v1.PodResourceClaim, statuses []v1.PodResourceClaimStatus) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "pod-uid"},
		Spec:       v1.PodSpec{ResourceClaims: claims},
		Status:     v1.PodStatus{ResourceClaimStatuses: statuses},
	}
}

func TestPodClaims(t *testing.T) {
	byName := v1.PodResourceClaim{Name: "a", ResourceClaimName: ptr.To("shared")}
	byTemplate := v1.PodResourceClaim{Name: "b", ResourceClaimTemplateName: ptr.To("tmpl")}
	extended := func(p *v1.Pod) *v1.Pod {
		p.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "p-extended"}
		return p
	}
	cases := []struct {
		name     string
		pod      *v1.Pod
		extended bool
		want     []ClaimRef
		wantErr  string
	}{
		{name: "no claims", pod: claimPod(nil, nil)},
		{name: "by name", pod: claimPod([]v1.PodResourceClaim{byName}, nil), want: []ClaimRef{{Name: "shared"}}},
		{name: "template made a claim", pod: claimPod([]v1.PodResourceClaim{byName, byTemplate},
			[]v1.PodResourceClaimStatus{{Name: "b", ResourceClaimName: ptr.To("p-b-x")}}),
			want: []ClaimRef{{Name: "shared"}, {Name: "p-b-x", Generated: true}}},
		{name: "template needs no claim", pod: claimPod([]v1.PodResourceClaim{byTemplate},
			[]v1.PodResourceClaimStatus{{Name: "b"}})},
		{name: "template claim not made yet", pod: claimPod([]v1.PodResourceClaim{byTemplate}, nil),
			wantErr: `pod "ns/p": ResourceClaim not created yet`},
		{name: "neither name nor template", pod: claimPod([]v1.PodResourceClaim{{Name: "c"}}, nil),
			wantErr: "none of the supported fields are set"},
		{name: "extended resource claim", pod: extended(claimPod(nil, nil)), extended: true,
			want: []ClaimRef{{Name: "p-extended", Generated: true}}},
		{name: "extended resource claim with the gate off", pod: extended(claimPod(nil, nil))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PodClaims(tc.pod, tc.extended)
			if !errorAsWanted(t, err, tc.wantErr) {
				return
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
	if _, err := PodClaims(claimPod([]v1.PodResourceClaim{byTemplate}, nil), false); !errors.Is(err, ErrClaimNotCreated) {
		t.Fatalf("a claim not made yet is %v, not ErrClaimNotCreated", err)
	}
}

func TestCheckClaim(t *testing.T) {
	pod := claimPod(nil, nil)
	owned := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "p", UID: pod.UID, Controller: ptr.To(true)}
	claim := func(opts ...func(*resourceapi.ResourceClaim)) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "claim-uid"},
			Status: resourceapi.ResourceClaimStatus{
				ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: pod.UID}},
				Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
					{Request: "r1", Driver: "gpu.example.com", Pool: "n", Device: "gpu-0"},
					{Request: "r2", Driver: "dra.example.com", Pool: "n", Device: "d-0"},
					{Request: "r3", Driver: "gpu.example.com", Pool: "n", Device: "gpu-1"},
				}}},
			},
		}
		for _, o := range opts {
			o(c)
		}
		return c
	}
	cases := []struct {
		name        string
		ref         ClaimRef
		claim       *resourceapi.ResourceClaim
		wantDrivers []string
		wantErr     string
	}{
		{name: "allocated and reserved", ref: ClaimRef{Name: "c"}, claim: claim(),
			wantDrivers: []string{"dra.example.com", "gpu.example.com"}},
		{name: "generated and owned", ref: ClaimRef{Name: "c", Generated: true},
			claim:       claim(func(c *resourceapi.ResourceClaim) { c.OwnerReferences = []metav1.OwnerReference{owned} }),
			wantDrivers: []string{"dra.example.com", "gpu.example.com"}},
		{name: "generated for another pod", ref: ClaimRef{Name: "c", Generated: true},
			claim: claim(func(c *resourceapi.ResourceClaim) {
				o := owned
				o.UID = types.UID("other")
				c.OwnerReferences = []metav1.OwnerReference{o}
			}),
			wantErr: "ResourceClaim ns/c was not created for Pod ns/p (Pod is not owner)"},
		{name: "reserved for another pod", ref: ClaimRef{Name: "c"},
			claim: claim(func(c *resourceapi.ResourceClaim) {
				c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "q", UID: "q-uid"}}
			}),
			wantErr: "pod p (pod-uid) is not allowed to use ResourceClaim c (claim-uid)"},
		{name: "not reserved", ref: ClaimRef{Name: "c"},
			claim:   claim(func(c *resourceapi.ResourceClaim) { c.Status.ReservedFor = nil }),
			wantErr: "is not allowed to use ResourceClaim c"},
		{name: "reserved but not allocated", ref: ClaimRef{Name: "c"},
			claim:   claim(func(c *resourceapi.ResourceClaim) { c.Status.Allocation = nil }),
			wantErr: "ResourceClaim c: not allocated"},
		{name: "another namespace", ref: ClaimRef{Name: "c"},
			claim:   claim(func(c *resourceapi.ResourceClaim) { c.Namespace = "other" }),
			wantErr: "is not in the same namespace"},
		{name: "allocated with no devices", ref: ClaimRef{Name: "c"},
			claim: claim(func(c *resourceapi.ResourceClaim) { c.Status.Allocation.Devices.Results = nil })},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CheckClaim(pod, tc.ref, tc.claim)
			if !errorAsWanted(t, err, tc.wantErr) {
				return
			}
			var names []string
			for _, d := range got {
				names = append(names, d.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.wantDrivers, ",") {
				t.Fatalf("drivers %v, want %v", got, tc.wantDrivers)
			}
		})
	}
}

func TestDriverStates(t *testing.T) {
	result := func(driver string, skip ...resourceapi.SkipNodeOperation) resourceapi.DeviceRequestAllocationResult {
		return resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: driver, Pool: "p", Device: "d", SkipNodeOperations: skip}
	}
	cases := []struct {
		name    string
		results []resourceapi.DeviceRequestAllocationResult
		want    []DriverState
	}{
		{name: "none"},
		{name: "one per driver, sorted", results: []resourceapi.DeviceRequestAllocationResult{result("b"), result("a"), result("b")},
			want: []DriverState{{Name: "a"}, {Name: "b"}}},
		{name: "every device skips preparing", results: []resourceapi.DeviceRequestAllocationResult{
			result("a", resourceapi.SkipNodeOperationNodePrepareResources), result("a", resourceapi.SkipNodeOperationNodePrepareResources)},
			want: []DriverState{{Name: "a", SkipPrepare: true}}},
		{name: "one device that does not skip makes the call", results: []resourceapi.DeviceRequestAllocationResult{
			result("a", resourceapi.SkipNodeOperationAll), result("a")},
			want: []DriverState{{Name: "a"}}},
		{name: "all operations", results: []resourceapi.DeviceRequestAllocationResult{result("a", resourceapi.SkipNodeOperationAll)},
			want: []DriverState{{Name: "a", SkipPrepare: true, SkipUnprepare: true}}},
		{name: "unprepare only", results: []resourceapi.DeviceRequestAllocationResult{result("a", resourceapi.SkipNodeOperationNodeUnprepareResources)},
			want: []DriverState{{Name: "a", SkipUnprepare: true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, DriverStates(tc.results), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("drivers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestContainerClaims(t *testing.T) {
	gpu := v1.ResourceName("example.com/gpu")
	pod := claimPod([]v1.PodResourceClaim{
		{Name: "a", ResourceClaimName: ptr.To("shared")},
		{Name: "b", ResourceClaimTemplateName: ptr.To("tmpl")},
		{Name: "none", ResourceClaimTemplateName: ptr.To("tmpl")},
	}, []v1.PodResourceClaimStatus{{Name: "b", ResourceClaimName: ptr.To("p-b")}, {Name: "none"}})
	pod.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "p-ext", RequestMappings: []v1.ContainerExtendedResourceRequest{
		{ContainerName: "c", ResourceName: string(gpu), RequestName: "container-0-request-0"},
		{ContainerName: "other", ResourceName: string(gpu), RequestName: "container-1-request-0"},
	}}
	container := func(claims ...v1.ResourceClaim) *v1.Container {
		return &v1.Container{Name: "c", Resources: v1.ResourceRequirements{Claims: claims}}
	}
	withGPU := container()
	withGPU.Resources.Requests = v1.ResourceList{gpu: resource.MustParse("1")}
	cases := []struct {
		name     string
		c        *v1.Container
		extended bool
		want     map[string][]string
		wantErr  string
	}{
		{name: "none", c: container(), want: map[string][]string{}},
		{name: "whole claims and requests", c: container(v1.ResourceClaim{Name: "a"}, v1.ResourceClaim{Name: "b", Request: "r1"}, v1.ResourceClaim{Name: "b", Request: "r2"}),
			want: map[string][]string{"shared": {""}, "p-b": {"r1", "r2"}}},
		{name: "a template that made no claim", c: container(v1.ResourceClaim{Name: "none"}), want: map[string][]string{}},
		{name: "a claim the pod does not list", c: container(v1.ResourceClaim{Name: "x"}), wantErr: `container c uses claim "x", which the pod does not list`},
		{name: "extended resources", c: withGPU, extended: true, want: map[string][]string{"p-ext": {"container-0-request-0"}}},
		{name: "extended resources with the gate off", c: withGPU, want: map[string][]string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ContainerClaims(pod, tc.c, tc.extended)
			if !errorAsWanted(t, err, tc.wantErr) {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("claims (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCDIDeviceIDs(t *testing.T) {
	claim := ClaimState{Drivers: []DriverState{
		{Name: "a", Devices: []Device{
			{RequestNames: []string{"r1"}, CDIDeviceIDs: []string{"a.example.com/x=1"}},
			{RequestNames: []string{"r2/small"}, CDIDeviceIDs: []string{"a.example.com/x=2", "a.example.com/y=2"}},
		}},
		{Name: "b", Devices: []Device{{CDIDeviceIDs: []string{"b.example.com/z=0"}}, {RequestNames: []string{"r1"}}}},
	}}
	cases := []struct {
		request string
		want    []string
	}{
		{request: "", want: []string{"a.example.com/x=1", "a.example.com/x=2", "a.example.com/y=2", "b.example.com/z=0"}},
		{request: "r1", want: []string{"a.example.com/x=1", "b.example.com/z=0"}},
		{request: "r2", want: []string{"a.example.com/x=2", "a.example.com/y=2", "b.example.com/z=0"}},
		{request: "r3", want: []string{"b.example.com/z=0"}},
	}
	for _, tc := range cases {
		if diff := cmp.Diff(tc.want, CDIDeviceIDs(claim, tc.request)); diff != "" {
			t.Errorf("request %q (-want +got):\n%s", tc.request, diff)
		}
	}
}

// errorAsWanted fails t unless err contains want (or is nil for an empty
// want), and says whether the case goes on to check its result.
func errorAsWanted(t *testing.T, err error, want string) bool {
	t.Helper()
	if want != "" {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("want error %q, got %v", want, err)
		}
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

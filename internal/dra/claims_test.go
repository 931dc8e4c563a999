package dra

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
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
			if strings.Join(got, ",") != strings.Join(tc.wantDrivers, ",") {
				t.Fatalf("drivers %v, want %v", got, tc.wantDrivers)
			}
		})
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

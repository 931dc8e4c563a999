package dra

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestPrepare(t *testing.T) {
	reserved := func(name string, drivers ...string) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Status: resourceapi.ResourceClaimStatus{
				ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "pod-uid"}},
				Allocation:  &resourceapi.AllocationResult{},
			},
		}
		for _, d := range drivers {
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
				resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: d, Pool: "n", Device: "d"})
		}
		return c
	}
	named := func(names ...string) *v1.Pod {
		var claims []v1.PodResourceClaim
		for _, n := range names {
			claims = append(claims, v1.PodResourceClaim{Name: n, ResourceClaimName: ptr.To(n)})
		}
		return claimPod(claims, nil)
	}
	reader := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).
		WithObjects(reserved("gpu", "gpu.example.com"), reserved("empty")).Build()
	p := &Preparer{Reader: reader, ExtendedResources: true}
	cases := []struct {
		name    string
		pod     *v1.Pod
		wantErr string
	}{
		{name: "no claims", pod: named()},
		{name: "a claim needing no driver", pod: named("empty")},
		{name: "a driver that is not registered", pod: named("empty", "gpu"),
			wantErr: "prepare dynamic resources: DRA driver gpu.example.com is not registered"},
		{name: "a claim that does not exist", pod: named("missing"),
			wantErr: "prepare dynamic resources: fetch ResourceClaim missing:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errorAsWanted(t, p.Prepare(context.Background(), tc.pod), tc.wantErr)
		})
	}
}

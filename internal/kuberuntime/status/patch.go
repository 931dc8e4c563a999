package status

import (
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// Patch is the strategic merge patch, for a pod's status subresource, that
// takes the status from was to want and names the pod's UID, so that the API
// server refuses it (422, metadata.uid is immutable) for another pod that took the name.
//
// It is built from the statuses alone: diffing whole pods (spec, managed
// fields) would serialise and parse several times as much for the same
// patch, on every status write of every pod.
func Patch(uid types.UID, was, want v1.PodStatus) ([]byte, error) {
	before, err := json.Marshal(v1.Pod{Status: was})
	if err != nil {
		return nil, fmt.Errorf("encoding the pod's status: %w", err)
	}
	after, err := json.Marshal(v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: want})
	if err != nil {
		return nil, fmt.Errorf("encoding the pod's status: %w", err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(before, after, v1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("diffing the pod's status: %w", err)
	}
	return patch, nil
}

// KeepOthers returns want with the fields of the pod's status that other
// components write as they are in was: the ResourceClaim controller's
// resourceClaimStatuses and the scheduler's extendedResourceClaimStatus and
// nodeAllocatableResourceClaimStatuses. The node agent computes a status
// without them, and a patch that dropped them would be refused by the
// NodeRestriction admission plugin ("cannot update resource claim
// statues"): every status write of a pod with claims would fail.
func KeepOthers(was, want v1.PodStatus) v1.PodStatus {
	want.ResourceClaimStatuses = was.ResourceClaimStatuses
	want.ExtendedResourceClaimStatus = was.ExtendedResourceClaimStatus
	want.NodeAllocatableResourceClaimStatuses = was.NodeAllocatableResourceClaimStatuses
	return want
}

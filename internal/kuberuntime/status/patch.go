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

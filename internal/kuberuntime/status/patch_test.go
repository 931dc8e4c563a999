package status

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

func TestPatchTakesTheStoredStatusToTheNewOne(t *testing.T) {
	const uid = types.UID("6a1f3c2e-0000-4000-8000-000000000001")
	started := metav1.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	running := v1.PodStatus{
		Phase:  v1.PodRunning,
		PodIP:  "10.0.0.5",
		PodIPs: []v1.PodIP{{IP: "10.0.0.5"}},
		Conditions: []v1.PodCondition{
			{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: started},
			{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: started},
			{Type: "example.com/gate", Status: v1.ConditionTrue},
		},
		ContainerStatuses: []v1.ContainerStatus{
			{Name: "a", Ready: true, State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}}},
			{Name: "b", Ready: true, State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}}},
		},
	}
	failed := *running.DeepCopy()
	failed.Phase = v1.PodFailed
	failed.PodIP, failed.PodIPs = "", nil
	failed.Conditions = failed.Conditions[:2]
	failed.Conditions[0].Status = v1.ConditionFalse
	failed.ContainerStatuses = []v1.ContainerStatus{
		{Name: "a", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}}},
	}

	for _, tc := range []struct {
		name     string
		old, new v1.PodStatus
	}{
		{name: "pending to running", old: v1.PodStatus{Phase: v1.PodPending}, new: running},
		{name: "running to failed: conditions, IPs and container statuses removed", old: running, new: failed},
		{name: "unchanged", old: running, new: running},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stored := &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: uid, Labels: map[string]string{"app": "x"}},
				Spec:       v1.PodSpec{NodeName: "n", Containers: []v1.Container{{Name: "a", Image: "busybox"}}},
				Status:     tc.old,
			}
			doc, err := json.Marshal(stored)
			if err != nil {
				t.Fatal(err)
			}
			patch, err := Patch(uid, tc.old, tc.new)
			if err != nil {
				t.Fatal(err)
			}
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(patch, &fields); err != nil {
				t.Fatalf("patch %s: %v", patch, err)
			}
			for k := range fields {
				if k != "metadata" && k != "status" {
					t.Errorf("patch %s touches %q", patch, k)
				}
			}
			var meta metav1.ObjectMeta
			if err := json.Unmarshal(fields["metadata"], &meta); err != nil || meta.UID != uid {
				t.Errorf("patch %s does not name the pod's UID", patch)
			}
			patched, err := strategicpatch.StrategicMergePatch(doc, patch, v1.Pod{})
			if err != nil {
				t.Fatalf("applying %s: %v", patch, err)
			}
			var got v1.Pod
			if err := json.Unmarshal(patched, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.new, got.Status); diff != "" {
				t.Errorf("status after the patch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(stored.Spec, got.Spec); diff != "" {
				t.Errorf("spec changed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(stored.ObjectMeta, got.ObjectMeta); diff != "" {
				t.Errorf("metadata changed (-want +got):\n%s", diff)
			}
		})
	}
}

// TestKeepOthersLeavesTheClaimStatusesAlone checks that a status the node
// computes keeps what the ResourceClaim controller and the scheduler wrote,
// so that the patch does not touch it (NodeRestriction refuses one that
// does).
func TestKeepOthersLeavesTheClaimStatusesAlone(t *testing.T) {
	claim := "pod-claim-x7"
	was := v1.PodStatus{
		Phase:                 v1.PodPending,
		ResourceClaimStatuses: []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &claim}},
		ExtendedResourceClaimStatus: &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "pod-extended-resources-2",
			RequestMappings: []v1.ContainerExtendedResourceRequest{{ContainerName: "c", ResourceName: "example.com/gpu", RequestName: "container-0-request-0"}}},
		NodeAllocatableResourceClaimStatuses: []v1.NodeAllocatableResourceClaimStatus{{ResourceClaimName: "pod-claim-x7"}},
	}
	want := KeepOthers(was, v1.PodStatus{Phase: v1.PodRunning})
	patch, err := Patch("uid-1", was, want)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(patch, &got); err != nil {
		t.Fatal(err)
	}
	status, _ := got["status"].(map[string]any)
	for _, field := range []string{"resourceClaimStatuses", "extendedResourceClaimStatus", "nodeAllocatableResourceClaimStatuses"} {
		if _, ok := status[field]; ok {
			t.Errorf("the patch changes %s: %s", field, patch)
		}
	}
	if status["phase"] != string(v1.PodRunning) {
		t.Errorf("the patch does not set the phase: %s", patch)
	}
}

package state_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/nodelet/nodelet/internal/kuberuntime/podtest"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/kuberuntime/statetest"
)

func TestResizeRequestedAndAllocatedPod(t *testing.T) {
	small, big := podtest.Res("100m", "200m", "64Mi", "128Mi"), podtest.Res("200m", "400m", "64Mi", "128Mi")
	pod := podtest.NewPod(podtest.Resources("app", big), podtest.Generation(2))
	tests := []struct {
		name          string
		st            state.PodState
		generation    int64
		wantRequested bool
		want          v1.ResourceRequirements
	}{
		{name: "nothing allocated yet", st: state.PodState{}, generation: 2, want: big},
		{name: "allocation equals the spec", st: statetest.Allocated(map[string]v1.ResourceRequirements{"app": big}, nil), generation: 2, want: big},
		{name: "equal quantities written differently",
			st:   statetest.Allocated(map[string]v1.ResourceRequirements{"app": podtest.Res("0.2", "0.4", "67108864", "134217728")}, nil),
			want: podtest.Res("0.2", "0.4", "67108864", "134217728"), generation: 2},
		{name: "spec asks for more", st: statetest.Allocated(map[string]v1.ResourceRequirements{"app": small}, nil), generation: 2,
			wantRequested: true, want: small},
		{name: "a copy older than the allocation asks for nothing and runs with the allocation",
			st: func() state.PodState {
				st := statetest.Allocated(map[string]v1.ResourceRequirements{"app": small}, nil)
				st.AllocatedGeneration = 3
				return st
			}(), generation: 2, want: small},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pod.DeepCopy()
			p.Generation = tt.generation
			if got := state.ResizeRequested(p, tt.st); got != tt.wantRequested {
				t.Errorf("ResizeRequested = %v, want %v", got, tt.wantRequested)
			}
			got := state.AllocatedPod(p, tt.st)
			if !equality.Semantic.DeepEqual(got.Spec.Containers[0].Resources, tt.want) {
				t.Errorf("allocated resources = %v, want %v", got.Spec.Containers[0].Resources, tt.want)
			}
			if !equality.Semantic.DeepEqual(p.Spec.Containers[0].Resources, big) {
				t.Errorf("AllocatedPod modified the pod")
			}
		})
	}
}

func TestInitAllocationAndAcceptResize(t *testing.T) {
	pod := podtest.NewPod(podtest.Sidecars("proxy"), podtest.Resources("app", podtest.Res("100m", "", "64Mi", "")))
	st := state.NewPodState(pod.UID)
	if !st.InitAllocation(pod) {
		t.Fatal("InitAllocation did not allocate a new pod")
	}
	if st.InitAllocation(pod) {
		t.Error("InitAllocation allocated twice")
	}
	if _, ok := st.Allocated["proxy"]; !ok {
		t.Error("init containers are not allocated")
	}

	resized := podtest.NewPod(podtest.Sidecars("proxy"), podtest.Resources("app", podtest.Res("200m", "", "64Mi", "")), podtest.Generation(2))
	if !state.ResizeRequested(resized, st) {
		t.Fatal("resize not seen")
	}
	if !st.DeferResize(v1.PodReasonDeferred, "no room", 2, podtest.At(0)) {
		t.Error("a first pending resize is not news")
	}
	if st.DeferResize(v1.PodReasonDeferred, "still no room", 2, podtest.At(time.Second)) {
		t.Error("the same reason for the same generation is news")
	}
	if st.ResizePending.Since != podtest.At(0) {
		t.Error("the transition time moved without a new reason")
	}
	if !st.DeferResize(v1.PodReasonInfeasible, "never", 2, podtest.At(2*time.Second)) || st.ResizePending.Since != podtest.At(2*time.Second) {
		t.Error("a new reason is not news, or keeps the old transition time")
	}
	if st.ClearPendingResize(1) || st.ResizePending == nil {
		t.Error("a copy of the pod older than the request cleared it")
	}
	st.RecordResizeError("an old error", 1, podtest.At(0))
	st.AcceptResize(resized, podtest.At(3*time.Second))
	if state.ResizeRequested(resized, st) || st.ResizePending != nil {
		t.Error("the accepted resize is still requested or pending")
	}
	want := &state.ResizeCondition{Generation: 2, Since: podtest.At(3 * time.Second)}
	if diff := cmp.Diff(want, st.ResizeInProgress); diff != "" {
		t.Errorf("in progress (-want +got):\n%s", diff)
	}
	if !st.RecordResizeError("boom", 2, podtest.At(4*time.Second)) || st.RecordResizeError("boom", 2, podtest.At(5*time.Second)) {
		t.Error("RecordResizeError news is wrong")
	}
	if c := st.ResizeInProgress; c.Reason != v1.PodReasonError || c.Message != "boom" || c.Generation != 2 || c.Since != podtest.At(4*time.Second) {
		t.Errorf("in progress after an error = %+v", c)
	}

	// The state goes through the checkpoint as JSON.
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back state.PodState
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if state.ResizeRequested(resized, back) || !equality.Semantic.DeepEqual(back.Allocated, st.Allocated) {
		t.Errorf("the allocation did not survive a checkpoint: %s", data)
	}
}

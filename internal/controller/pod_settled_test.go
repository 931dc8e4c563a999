package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/executor"
	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/pleg"
	"github.com/nodelet/nodelet/internal/podworkers"
)

func podRecord(objects map[string]pleg.ObjectState) *pleg.PodRecord {
	return &pleg.PodRecord{Ref: pleg.PodRef{UID: "u"}, Objects: objects}
}

func TestSameObjects(t *testing.T) {
	running := state.PodRuntime{
		Sandboxes:  []state.Sandbox{{ID: "s1", Ready: true}},
		Containers: []state.Container{{ID: "c1", State: state.ContainerRunning}},
	}
	sb := pleg.ObjectState{Kind: pleg.KindSandbox, State: "SANDBOX_READY"}
	for _, tt := range []struct {
		name string
		rec  *pleg.PodRecord
		rt   state.PodRuntime
		want bool
	}{
		{"nothing seen, nothing relisted", nil, state.PodRuntime{}, true},
		{"same objects and states", podRecord(map[string]pleg.ObjectState{"s1": sb, "c1": {Kind: pleg.KindContainer, State: "CONTAINER_RUNNING"}}), running, true},
		{"the container exited since", podRecord(map[string]pleg.ObjectState{"s1": sb, "c1": {Kind: pleg.KindContainer, State: "CONTAINER_EXITED"}}), running, false},
		{"a container the sync did not see", podRecord(map[string]pleg.ObjectState{"s1": sb, "c1": {Kind: pleg.KindContainer, State: "CONTAINER_RUNNING"}, "c2": {Kind: pleg.KindContainer, State: "CONTAINER_CREATED"}}), running, false},
		{"the container is gone", podRecord(map[string]pleg.ObjectState{"s1": sb}), running, false},
		{"the relist has nothing of the pod", nil, running, false},
		{"the sandbox stopped", podRecord(map[string]pleg.ObjectState{"s1": {Kind: pleg.KindSandbox, State: "SANDBOX_NOTREADY"}, "c1": {Kind: pleg.KindContainer, State: "CONTAINER_RUNNING"}}), running, false},
		{"created and unknown containers", podRecord(map[string]pleg.ObjectState{"c1": {Kind: pleg.KindContainer, State: "CONTAINER_CREATED"}, "c2": {Kind: pleg.KindContainer, State: "CONTAINER_UNKNOWN"}}),
			state.PodRuntime{Containers: []state.Container{{ID: "c1", State: state.ContainerCreated}, {ID: "c2", State: state.ContainerUnknown}}}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := sameObjects(tt.rec, runtimeObjects(tt.rt)); got != tt.want {
				t.Fatalf("sameObjects = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSettled(t *testing.T) {
	seen := state.PodRuntime{Sandboxes: []state.Sandbox{{ID: "s1", Ready: true}}}
	same := podRecord(map[string]pleg.ObjectState{"s1": {Kind: pleg.KindSandbox, State: "SANDBOX_READY"}})
	changed := podRecord(map[string]pleg.ObjectState{"s1": {Kind: pleg.KindSandbox, State: "SANDBOX_NOTREADY"}})
	work := podworkers.Work{Key: podworkers.Key{UID: "u"}}
	for _, tt := range []struct {
		name     string
		recorded bool
		syncMark uint64
		rec      *pleg.PodRecord
		mark     uint64
		want     bool
	}{
		{"no settled sync", false, 0, same, 1, false},
		{"relisted before the sync looked", true, 5, changed, 5, true},
		{"relisted after, the same", true, 5, same, 6, true},
		{"relisted after, changed", true, 5, changed, 6, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &PodReconciler{Relisted: &fakeRelisted{records: map[types.UID]*pleg.PodRecord{"u": tt.rec}}}
			if tt.recorded {
				r.settledSyncs.Store(types.UID("u"), settledSync{mark: tt.syncMark, objects: runtimeObjects(seen)})
			}
			if got := r.settled(work, tt.mark); got != tt.want {
				t.Fatalf("settled = %v, want %v", got, tt.want)
			}
		})
	}
	if (&PodReconciler{}).settled(work, 0) {
		t.Fatal("settled without a relister")
	}
}

func TestUnchangedReusesTheLastLookOnlyWhenARelistConfirmsIt(t *testing.T) {
	seen := state.PodRuntime{Sandboxes: []state.Sandbox{{ID: "s1", Ready: true}}}
	same := podRecord(map[string]pleg.ObjectState{"s1": {Kind: pleg.KindSandbox, State: "SANDBOX_READY"}})
	changed := podRecord(map[string]pleg.ObjectState{"s1": {Kind: pleg.KindSandbox, State: "SANDBOX_NOTREADY"}})
	obs := &executor.Observed{Runtime: seen}
	withStale := &executor.Observed{Runtime: seen, StaleContainers: []*runtimeapi.Container{{Id: "old"}}}
	for _, tt := range []struct {
		name   string
		last   *settledSync
		listed uint64
		rec    *pleg.PodRecord
		want   bool
	}{
		{"no settled sync", nil, 9, same, false},
		{"relisted since, the same", &settledSync{mark: 5, objects: runtimeObjects(seen), obs: obs}, 6, same, true},
		{"relisted since, changed", &settledSync{mark: 5, objects: runtimeObjects(seen), obs: obs}, 6, changed, false},
		{"not relisted since", &settledSync{mark: 5, objects: runtimeObjects(seen), obs: obs}, 5, same, false},
		{"other pods of the name were seen", &settledSync{mark: 5, objects: runtimeObjects(seen), obs: withStale}, 6, same, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &PodReconciler{Relisted: &fakeRelisted{n: tt.listed, records: map[types.UID]*pleg.PodRecord{"u": tt.rec}}}
			got, mark, ok := r.unchanged("u", tt.last)
			if ok != tt.want {
				t.Fatalf("unchanged = %v, want %v", ok, tt.want)
			}
			if ok && (got != obs || mark != 5) {
				t.Fatalf("unchanged returned %p at mark %d, want the last look at mark 5", got, mark)
			}
		})
	}
}

func TestQuiet(t *testing.T) {
	for _, tt := range []struct {
		name string
		a    plan.PodActions
		want bool
	}{
		{"nothing to do", plan.PodActions{}, true},
		{"a container to start", plan.PodActions{ContainersToStart: []plan.ContainerStart{{Name: "app"}}}, false},
		{"a container backing off", plan.PodActions{BackingOff: map[string]plan.BackingOff{"app": {Reason: state.ReasonImagePullBackOff}}}, false},
		{"a requeue due", plan.PodActions{RequeueAfter: time.Second}, false},
		{"a sandbox to make", plan.PodActions{CreateSandbox: true}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := quiet(tt.a); got != tt.want {
				t.Fatalf("quiet = %v, want %v", got, tt.want)
			}
		})
	}
}

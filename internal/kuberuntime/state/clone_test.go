package state

import (
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/internal/kuberuntime/podtest"
)

// fullState is a PodState with every field of its own types set.
func fullState() PodState {
	at := podtest.At(time.Second)
	res := v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")},
		Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")},
		Claims:   []v1.ResourceClaim{{Name: "gpu", Request: "one"}},
	}
	waiting := WaitingReason{Reason: ReasonErrImagePull, Message: "m", At: at, Image: "img"}
	cond := ResizeCondition{Reason: "Deferred", Message: "m", Generation: 2, Since: at}
	started := metav1.NewTime(at)
	return PodState{
		UID: "uid", SandboxID: "sb", SandboxAttempt: 1,
		SandboxFailure: &WaitingReason{Reason: ReasonFailedMount, Message: "m", At: at, Image: "img"},
		Containers: map[string]ContainerRecord{"app": {
			RestartCount: 1, Created: true, LastStart: at,
			CrashBackOff: BackOff{Delay: time.Second, Updated: at},
			ImageBackOff: BackOff{Delay: time.Second, Updated: at},
			Waiting:      &waiting,
			Actuated:     &Actuated{ContainerID: "c", Resources: res},
		}},
		Terminating:         &Termination{StartedAt: at, GracePeriodSeconds: 30, Deadline: at, PreStopDone: []string{"c"}},
		Allocated:           map[string]v1.ResourceRequirements{"app": res},
		AllocatedGeneration: 1,
		ResizePending:       &cond,
		ResizeInProgress:    &ResizeCondition{Reason: "Error", Message: "m", Generation: 2, Since: at},
		LastStatus: &v1.PodStatus{Phase: v1.PodRunning, StartTime: &started,
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}},
	}
}

// ownTypes are the package's types whose every field fullState sets.
var ownTypes = map[reflect.Type]bool{
	reflect.TypeFor[PodState](): true, reflect.TypeFor[ContainerRecord](): true,
	reflect.TypeFor[WaitingReason](): true, reflect.TypeFor[Termination](): true,
	reflect.TypeFor[ResizeCondition](): true, reflect.TypeFor[Actuated](): true,
	reflect.TypeFor[BackOff](): true,
}

// allSet reports, through t, every field of the package's types that v
// leaves zero: a field added to PodState must be added to fullState, and
// so to what Clone is tested on.
func allSet(t *testing.T, path string, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			allSet(t, path, v.Elem())
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			allSet(t, path+"["+k.String()+"]", v.MapIndex(k))
		}
	case reflect.Struct:
		if !ownTypes[v.Type()] {
			return
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if v.Field(i).IsZero() {
				t.Errorf("%s.%s is not set in fullState", path, f.Name)
			}
			allSet(t, path+"."+f.Name, v.Field(i))
		}
	}
}

func TestCloneCopiesEverything(t *testing.T) {
	s := fullState()
	allSet(t, "PodState", reflect.ValueOf(s))
	c := s.Clone()
	if !reflect.DeepEqual(s, c) {
		t.Fatalf("the clone differs:\n%+v\n%+v", s, c)
	}
	// The last status, which nobody changes in place, is shared; nothing
	// else is.
	if c.LastStatus != s.LastStatus {
		t.Error("the clone has a last status of its own")
	}
	ownS, ownC := s, c
	ownS.LastStatus, ownC.LastStatus = nil, nil
	if p := podtest.SharedPath("PodState", ownS, ownC); p != "" {
		t.Errorf("the clone shares %s with the state", p)
	}
	// A change to the clone leaves the state as it was.
	c.Containers["app"].Waiting.Reason = "other"
	c.Terminating.PreStopDone[0] = "other"
	c.RecordStatus(v1.PodStatus{Phase: v1.PodFailed})
	if !reflect.DeepEqual(s, fullState()) {
		t.Error("a change to the clone changed the state")
	}
}

func TestCloneOfEmpty(t *testing.T) {
	for name, s := range map[string]PodState{
		"zero": {},
		"new":  NewPodState("uid"),
	} {
		if c := s.Clone(); !reflect.DeepEqual(s, c) {
			t.Errorf("%s: the clone differs: %+v", name, c)
		}
	}
}

// TestSharedPathFinds checks the checker: a shallow copy shares.
func TestSharedPathFinds(t *testing.T) {
	s := fullState()
	shallow := s
	if p := podtest.SharedPath("PodState", s, shallow); p == "" {
		t.Error("a shallow copy was found to share nothing")
	}
	c := s.Clone()
	c.LastStatus = s.LastStatus.DeepCopy()
	c.Allocated = s.Allocated
	if p := podtest.SharedPath("PodState", s, c); p != "PodState.Allocated" {
		t.Errorf("a shared map was reported as %q", p)
	}
}

func TestRecordStatusKeepsACopy(t *testing.T) {
	var s PodState
	st := v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}}
	s.RecordStatus(st)
	st.Conditions[0].Status = v1.ConditionFalse
	if got := s.LastStatus.Conditions[0].Status; got != v1.ConditionTrue {
		t.Errorf("a change to the recorded status reached the state: Ready %s", got)
	}
}

package kuberuntime

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
)

// res builds container resources from cpu request, cpu limit, memory
// request and memory limit; "" leaves one out.
func res(cpuReq, cpuLim, memReq, memLim string) v1.ResourceRequirements {
	var r v1.ResourceRequirements
	set := func(l *v1.ResourceList, name v1.ResourceName, q string) {
		if q == "" {
			return
		}
		if *l == nil {
			*l = v1.ResourceList{}
		}
		(*l)[name] = resource.MustParse(q)
	}
	set(&r.Requests, v1.ResourceCPU, cpuReq)
	set(&r.Limits, v1.ResourceCPU, cpuLim)
	set(&r.Requests, v1.ResourceMemory, memReq)
	set(&r.Limits, v1.ResourceMemory, memLim)
	return r
}

func resources(name string, r v1.ResourceRequirements) podOpt {
	return modify(name, func(c *v1.Container) { c.Resources = r })
}

func resizePolicy(name string, cpu, memory v1.ResourceResizeRestartPolicy) podOpt {
	return modify(name, func(c *v1.Container) {
		c.ResizePolicy = []v1.ContainerResizePolicy{
			{ResourceName: v1.ResourceCPU, RestartPolicy: cpu},
			{ResourceName: v1.ResourceMemory, RestartPolicy: memory},
		}
	})
}

// allocated is the state of a pod whose containers were allocated allocs
// (by name) and whose running instances (named <name>-<attempt>, as inst
// names them) run with what actuated gives.
func allocated(allocs map[string]v1.ResourceRequirements, actuated map[string]v1.ResourceRequirements) PodState {
	st := PodState{Allocated: allocs, AllocatedGeneration: 1, Containers: map[string]ContainerRecord{}}
	for name, r := range actuated {
		st.RecordActuated(name, name+"-0", r)
	}
	return st
}

func TestResizeRequestedAndAllocatedPod(t *testing.T) {
	small, big := res("100m", "200m", "64Mi", "128Mi"), res("200m", "400m", "64Mi", "128Mi")
	pod := newPod(resources("app", big))
	pod.Generation = 2
	tests := []struct {
		name          string
		st            PodState
		generation    int64
		wantRequested bool
		want          v1.ResourceRequirements
	}{
		{name: "nothing allocated yet", st: PodState{}, generation: 2, want: big},
		{name: "allocation equals the spec", st: allocated(map[string]v1.ResourceRequirements{"app": big}, nil), generation: 2, want: big},
		{name: "equal quantities written differently",
			st:   allocated(map[string]v1.ResourceRequirements{"app": res("0.2", "0.4", "67108864", "134217728")}, nil),
			want: res("0.2", "0.4", "67108864", "134217728"), generation: 2},
		{name: "spec asks for more", st: allocated(map[string]v1.ResourceRequirements{"app": small}, nil), generation: 2,
			wantRequested: true, want: small},
		{name: "a copy older than the allocation asks for nothing and runs with the allocation",
			st: func() PodState {
				st := allocated(map[string]v1.ResourceRequirements{"app": small}, nil)
				st.AllocatedGeneration = 3
				return st
			}(), generation: 2, want: small},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pod.DeepCopy()
			p.Generation = tt.generation
			if got := ResizeRequested(p, tt.st); got != tt.wantRequested {
				t.Errorf("ResizeRequested = %v, want %v", got, tt.wantRequested)
			}
			got := AllocatedPod(p, tt.st)
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
	pod := newPod(sidecars("proxy"), resources("app", res("100m", "", "64Mi", "")))
	st := NewPodState(pod.UID)
	if !st.InitAllocation(pod) {
		t.Fatal("InitAllocation did not allocate a new pod")
	}
	if st.InitAllocation(pod) {
		t.Error("InitAllocation allocated twice")
	}
	if _, ok := st.Allocated["proxy"]; !ok {
		t.Error("init containers are not allocated")
	}

	resized := newPod(sidecars("proxy"), resources("app", res("200m", "", "64Mi", "")))
	resized.Generation = 2
	if !ResizeRequested(resized, st) {
		t.Fatal("resize not seen")
	}
	if !st.DeferResize(v1.PodReasonDeferred, "no room", 2, at(0)) {
		t.Error("a first pending resize is not news")
	}
	if st.DeferResize(v1.PodReasonDeferred, "still no room", 2, at(time.Second)) {
		t.Error("the same reason for the same generation is news")
	}
	if st.ResizePending.Since != at(0) {
		t.Error("the transition time moved without a new reason")
	}
	if !st.DeferResize(v1.PodReasonInfeasible, "never", 2, at(2*time.Second)) || st.ResizePending.Since != at(2*time.Second) {
		t.Error("a new reason is not news, or keeps the old transition time")
	}
	if st.ClearPendingResize(1) || st.ResizePending == nil {
		t.Error("a copy of the pod older than the request cleared it")
	}
	st.RecordResizeError("an old error", 1, at(0))
	st.AcceptResize(resized, at(3*time.Second))
	if ResizeRequested(resized, st) || st.ResizePending != nil {
		t.Error("the accepted resize is still requested or pending")
	}
	want := &ResizeCondition{Generation: 2, Since: at(3 * time.Second)}
	if diff := cmp.Diff(want, st.ResizeInProgress); diff != "" {
		t.Errorf("in progress (-want +got):\n%s", diff)
	}
	if !st.RecordResizeError("boom", 2, at(4*time.Second)) || st.RecordResizeError("boom", 2, at(5*time.Second)) {
		t.Error("RecordResizeError news is wrong")
	}
	if c := st.ResizeInProgress; c.Reason != v1.PodReasonError || c.Message != "boom" || c.Generation != 2 || c.Since != at(4*time.Second) {
		t.Errorf("in progress after an error = %+v", c)
	}

	// The state goes through the checkpoint as JSON.
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back PodState
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if ResizeRequested(resized, back) || !equality.Semantic.DeepEqual(back.Allocated, st.Allocated) {
		t.Errorf("the allocation did not survive a checkpoint: %s", data)
	}
}

func TestComputePodActionsResize(t *testing.T) {
	ready := []Sandbox{sb("s1", 0)}
	old, cpuUp, memDown := res("100m", "200m", "64Mi", "128Mi"), res("150m", "300m", "64Mi", "128Mi"), res("100m", "200m", "32Mi", "64Mi")
	memUp := res("100m", "200m", "64Mi", "256Mi")
	noLimit := res("100m", "", "64Mi", "")
	restartMemory := resizePolicy("app", v1.NotRequired, v1.RestartContainer)

	type want struct {
		resize        []string
		memDecrease   []string
		kill, start   []string
		restartCounts []uint32
	}
	tests := []struct {
		name string
		pod  *v1.Pod
		rt   func(*v1.Pod) PodRuntime
		st   PodState
		want want
	}{
		{name: "running with its allocation",
			pod: newPod(resources("app", old)),
			st:  allocated(map[string]v1.ResourceRequirements{"app": old}, map[string]v1.ResourceRequirements{"app": old})},
		{name: "equal values written differently need nothing",
			pod: newPod(resources("app", res("0.1", "0.2", "67108864", "134217728"))),
			st:  allocated(nil, map[string]v1.ResourceRequirements{"app": old})},
		{name: "cpu change without a policy is done in place",
			pod:  newPod(resources("app", cpuUp)),
			st:   allocated(nil, map[string]v1.ResourceRequirements{"app": old}),
			want: want{resize: []string{"app"}}},
		{name: "memory limit decrease is checked against usage",
			pod:  newPod(resources("app", memDown)),
			st:   allocated(nil, map[string]v1.ResourceRequirements{"app": old}),
			want: want{resize: []string{"app"}, memDecrease: []string{"app"}}},
		{name: "memory limit increase is not",
			pod:  newPod(resources("app", memUp)),
			st:   allocated(nil, map[string]v1.ResourceRequirements{"app": old}),
			want: want{resize: []string{"app"}}},
		{name: "a memory limit set where there was none is",
			pod:  newPod(resources("app", old)),
			st:   allocated(nil, map[string]v1.ResourceRequirements{"app": noLimit}),
			want: want{resize: []string{"app"}, memDecrease: []string{"app"}}},
		{name: "memory change with RestartContainer restarts the container",
			pod:  newPod(resources("app", memDown), restartMemory),
			st:   allocated(nil, map[string]v1.ResourceRequirements{"app": old}),
			want: want{kill: []string{"app"}, start: []string{"app"}, restartCounts: []uint32{1}}},
		{name: "cpu change when only memory restarts is done in place",
			pod:  newPod(resources("app", cpuUp), restartMemory),
			st:   allocated(nil, map[string]v1.ResourceRequirements{"app": old}),
			want: want{resize: []string{"app"}}},
		{name: "restart policy Never does not keep a resize restart from restarting",
			pod:  newPod(policy(v1.RestartPolicyNever), resources("app", cpuUp), resizePolicy("app", v1.RestartContainer, v1.NotRequired)),
			st:   allocated(nil, map[string]v1.ResourceRequirements{"app": old}),
			want: want{kill: []string{"app"}, start: []string{"app"}, restartCounts: []uint32{1}}},
		{name: "unrecorded resources are applied in place, never by a restart",
			pod:  newPod(resources("app", memDown), restartMemory),
			st:   allocated(nil, nil),
			want: want{resize: []string{"app"}, memDecrease: []string{"app"}}},
		{name: "an older instance's record does not count",
			pod: newPod(resources("app", old), restartMemory),
			rt:  func(p *v1.Pod) PodRuntime { return rtOf(ready, runningC(p, "app", "s1", 1)) },
			st:  allocated(nil, map[string]v1.ResourceRequirements{"app": old}),
			// app-0 is recorded, app-1 runs.
			want: want{resize: []string{"app"}, memDecrease: []string{"app"}}},
		{name: "an exited container starts with its allocation",
			pod: newPod(resources("app", cpuUp)),
			rt: func(p *v1.Pod) PodRuntime {
				return rtOf(ready, exitedC(p, "app", "s1", 0, 1, at(0)))
			},
			st:   allocated(nil, map[string]v1.ResourceRequirements{"app": old}),
			want: want{start: []string{"app"}, restartCounts: []uint32{1}}},
		{name: "a sidecar restarts by its policy",
			pod: newPod(sidecars("proxy"), resources("proxy", memDown), resizePolicy("proxy", v1.NotRequired, v1.RestartContainer)),
			rt: func(p *v1.Pod) PodRuntime {
				return rtOf(ready, runningC(p, "proxy", "s1", 0), runningC(p, "app", "s1", 0))
			},
			st:   allocated(nil, map[string]v1.ResourceRequirements{"proxy": old, "app": {}}),
			want: want{kill: []string{"proxy"}, start: []string{"proxy"}, restartCounts: []uint32{1}}},
		{name: "a running init container is resized in place whatever its policy",
			pod: newPod(inits("setup"), resources("setup", cpuUp), resizePolicy("setup", v1.RestartContainer, v1.RestartContainer)),
			rt: func(p *v1.Pod) PodRuntime {
				return rtOf(ready, runningC(p, "setup", "s1", 0))
			},
			st:   allocated(nil, map[string]v1.ResourceRequirements{"setup": old}),
			want: want{resize: []string{"setup"}}},
		{name: "a pod being deleted resizes nothing",
			pod: newPod(resources("app", cpuUp), deleted(30)),
			st:  allocated(nil, map[string]v1.ResourceRequirements{"app": old})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := rtOf(ready, runningC(tt.pod, "app", "s1", 0))
			if tt.rt != nil {
				rt = tt.rt(tt.pod)
			}
			a := ComputePodActions(tt.pod, rt, tt.st, at(time.Minute), ProbeResults{})
			var got want
			for _, r := range a.ContainersToResize {
				got.resize = append(got.resize, r.Name)
				if r.MemoryLimitDecrease {
					got.memDecrease = append(got.memDecrease, r.Name)
				}
			}
			for _, k := range a.ContainersToKill {
				got.kill = append(got.kill, k.Name)
				if k.Reason != KillResize || !strings.Contains(k.Message, "resize requires restart") {
					t.Errorf("kill %+v is not a resize restart", k)
				}
			}
			for _, s := range append(a.InitContainersToStart, a.ContainersToStart...) {
				got.start = append(got.start, s.Name)
				got.restartCounts = append(got.restartCounts, s.RestartCount)
			}
			if tt.pod.DeletionTimestamp != nil {
				got.kill, got.start, got.restartCounts = nil, nil, nil
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResizeProgress(t *testing.T) {
	old, bigger := res("100m", "200m", "64Mi", "128Mi"), res("150m", "300m", "64Mi", "128Mi")
	pod := newPod(resources("app", bigger))
	pod.Generation = 2
	ready := []Sandbox{sb("s1", 0)}
	tests := []struct {
		name           string
		rt             PodRuntime
		actuated       v1.ResourceRequirements
		inProgress     *ResizeCondition
		wantInProgress bool
		wantDone       bool
	}{
		{name: "running with the old resources", rt: rtOf(ready, runningC(pod, "app", "s1", 0)), actuated: old,
			inProgress: &ResizeCondition{Generation: 2}, wantInProgress: true},
		{name: "running with the new resources", rt: rtOf(ready, runningC(pod, "app", "s1", 0)), actuated: bigger,
			inProgress: &ResizeCondition{Generation: 2}, wantDone: true},
		{name: "not running: it starts with them", rt: rtOf(ready, exitedC(pod, "app", "s1", 0, 0, at(0))), actuated: old,
			inProgress: &ResizeCondition{Generation: 2}, wantDone: true},
		{name: "a difference found without a resize starts one", rt: rtOf(ready, runningC(pod, "app", "s1", 0)), actuated: old,
			wantInProgress: true},
		{name: "nothing to do", rt: rtOf(ready, runningC(pod, "app", "s1", 0)), actuated: bigger},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := allocated(map[string]v1.ResourceRequirements{"app": bigger}, map[string]v1.ResourceRequirements{"app": tt.actuated})
			st.ResizeInProgress = tt.inProgress
			gen, done := st.FinishResize(pod, tt.rt, at(time.Minute))
			if done != tt.wantDone || (done && gen != 2) {
				t.Errorf("FinishResize = %d, %v, want done %v", gen, done, tt.wantDone)
			}
			if (st.ResizeInProgress != nil) != tt.wantInProgress {
				t.Errorf("in progress = %+v, want %v", st.ResizeInProgress, tt.wantInProgress)
			}
			if tt.inProgress == nil && tt.wantInProgress && st.ResizeInProgress.Generation != 2 {
				t.Errorf("a resize found started for generation %d", st.ResizeInProgress.Generation)
			}
		})
	}
}

func TestResizeStatus(t *testing.T) {
	old, bigger := res("100m", "200m", "64Mi", "128Mi"), res("150m", "300m", "64Mi", "128Mi")
	pod := newPod(resources("app", bigger))
	pod.Generation = 2
	ready := []Sandbox{sb("s1", 0)}
	running := rtOf(ready, runningC(pod, "app", "s1", 0))
	pending := &ResizeCondition{Reason: v1.PodReasonInfeasible, Message: "Node didn't have enough capacity", Generation: 2, Since: at(0)}
	inProgress := &ResizeCondition{Generation: 2, Since: at(time.Second)}

	tests := []struct {
		name          string
		pod           *v1.Pod
		rt            PodRuntime
		st            PodState
		wantResources v1.ResourceRequirements
		wantAllocated v1.ResourceList
		wantConds     []v1.PodCondition
	}{
		{name: "running: what it runs with", pod: pod, rt: running,
			st: func() PodState {
				st := allocated(map[string]v1.ResourceRequirements{"app": bigger}, map[string]v1.ResourceRequirements{"app": old})
				st.ResizeInProgress = inProgress
				return st
			}(),
			wantResources: old, wantAllocated: bigger.Requests,
			wantConds: []v1.PodCondition{{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue, ObservedGeneration: 2,
				LastProbeTime: apiTime(at(time.Second)), LastTransitionTime: apiTime(at(time.Second))}}},
		{name: "pending: the allocation, with the reason", pod: pod, rt: running,
			st: func() PodState {
				st := allocated(map[string]v1.ResourceRequirements{"app": old}, map[string]v1.ResourceRequirements{"app": old})
				st.ResizePending = pending
				return st
			}(),
			wantResources: old, wantAllocated: old.Requests,
			wantConds: []v1.PodCondition{{Type: v1.PodResizePending, Status: v1.ConditionTrue, ObservedGeneration: 2,
				Reason: v1.PodReasonInfeasible, Message: "Node didn't have enough capacity",
				LastProbeTime: apiTime(at(0)), LastTransitionTime: apiTime(at(0))}}},
		{name: "exited: the allocation", pod: pod, rt: rtOf(ready, exitedC(pod, "app", "s1", 0, 1, at(0))),
			st:            allocated(map[string]v1.ResourceRequirements{"app": bigger}, map[string]v1.ResourceRequirements{"app": old}),
			wantResources: bigger, wantAllocated: bigger.Requests},
		{name: "nothing recorded: the spec", pod: pod, rt: running, st: PodState{},
			wantResources: bigger, wantAllocated: bigger.Requests},
		{name: "no resources: empty, not nil", pod: newPod(), rt: running, st: PodState{},
			wantResources: v1.ResourceRequirements{}},
		{name: "stopped for good: no resize conditions", pod: newPod(resources("app", bigger), phase(v1.PodFailed)),
			rt: rtOf(nil, exitedC(pod, "app", "s1", 0, 1, at(0))),
			st: func() PodState {
				st := allocated(map[string]v1.ResourceRequirements{"app": bigger}, nil)
				st.ResizePending, st.ResizeInProgress = pending, inProgress
				return st
			}(),
			wantResources: bigger, wantAllocated: bigger.Requests},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ComputePodStatus(tt.pod, tt.rt, tt.st, StatusInputs{Now: at(time.Minute)})
			cs := s.ContainerStatuses[0]
			if cs.Resources == nil || !equality.Semantic.DeepEqual(*cs.Resources, tt.wantResources) {
				t.Errorf("resources = %v, want %v", cs.Resources, tt.wantResources)
			}
			if !equality.Semantic.DeepEqual(cs.AllocatedResources, tt.wantAllocated) {
				t.Errorf("allocatedResources = %v, want %v", cs.AllocatedResources, tt.wantAllocated)
			}
			var conds []v1.PodCondition
			for _, c := range s.Conditions {
				if c.Type == v1.PodResizePending || c.Type == v1.PodResizeInProgress {
					conds = append(conds, c)
				}
			}
			if diff := cmp.Diff(tt.wantConds, conds); diff != "" {
				t.Errorf("resize conditions (-want +got):\n%s", diff)
			}
			if s.ObservedGeneration != tt.pod.Generation {
				t.Errorf("observedGeneration = %d, want %d", s.ObservedGeneration, tt.pod.Generation)
			}
		})
	}
}

func TestResizeMessage(t *testing.T) {
	pod := newPod(inits("setup"), resources("app", res("100m", "", "", "")))
	got := ResizeMessage("Pod resize Deferred", pod, 3, "no room")
	want := `Pod resize Deferred: {"initContainers":[{"name":"setup","resources":{}}],"containers":[{"name":"app","resources":{"requests":{"cpu":"100m"}}}],"generation":3,"error":"no room"}`
	if got != want {
		t.Errorf("message:\n got %s\nwant %s", got, want)
	}
}

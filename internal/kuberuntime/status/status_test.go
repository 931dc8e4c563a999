package status

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/kuberuntime/planner"
	"github.com/nodelet/nodelet/internal/kuberuntime/podtest"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/kuberuntime/statetest"
)

// kubectlStatus is the STATUS column `kubectl get pods` derives from a pod
// status (a reduced copy of the printer's rules).
func kubectlStatus(pod *v1.Pod, s v1.PodStatus) string {
	reason := string(s.Phase)
	if s.Reason != "" {
		reason = s.Reason
	}
	initializing := false
	for i, cs := range s.InitContainerStatuses {
		switch {
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
			continue
		case planner.IsSidecar(&pod.Spec.InitContainers[i]) && cs.Started != nil && *cs.Started:
			continue
		case cs.State.Terminated != nil:
			reason = "Init:" + cs.State.Terminated.Reason
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != state.ReasonPodInitializing:
			reason = "Init:" + cs.State.Waiting.Reason
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		initializing = true
		break
	}
	if !initializing {
		hasRunning := false
		for i := len(s.ContainerStatuses) - 1; i >= 0; i-- {
			cs := s.ContainerStatuses[i]
			switch {
			case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
				reason = cs.State.Waiting.Reason
			case cs.State.Terminated != nil && cs.State.Terminated.Reason != "":
				reason = cs.State.Terminated.Reason
			case cs.Ready && cs.State.Running != nil:
				hasRunning = true
			}
		}
		if reason == ReasonCompleted && hasRunning {
			reason = "Running"
		}
	}
	if pod.DeletionTimestamp != nil {
		reason = "Terminating"
	}
	return reason
}

func condition(s v1.PodStatus, t v1.PodConditionType) v1.PodCondition {
	if c := findCondition(s.Conditions, t); c != nil {
		return *c
	}
	return v1.PodCondition{}
}

func TestComputePodStatus(t *testing.T) {
	pod := podtest.NewPod()
	never := podtest.NewPod(podtest.Policy(v1.RestartPolicyNever))
	withInits := podtest.NewPod(podtest.Inits("init1", "init2"))
	neverInit := podtest.NewPod(podtest.Inits("init1"), podtest.Policy(v1.RestartPolicyNever))
	withSidecar := podtest.NewPod(podtest.Sidecars("proxy"))
	readiness := podtest.NewPod(podtest.Modify("app", func(c *v1.Container) { c.ReadinessProbe = &v1.Probe{} }))
	gated := podtest.NewPod(func(p *v1.Pod) { p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}} })
	gateTrue := gated.DeepCopy()
	gateTrue.Status.Conditions = []v1.PodCondition{{Type: "example.com/lb", Status: v1.ConditionTrue}}
	ready := []state.Sandbox{statetest.Sandbox("s1", 0)}
	stopped := []state.Sandbox{statetest.NotReady(statetest.Sandbox("s1", 0))}
	failure := func(name, reason, msg string, when time.Time, imageBackOff bool) state.PodState {
		r := state.ContainerRecord{Waiting: &state.WaitingReason{Reason: reason, Message: msg, At: when}}
		if imageBackOff {
			r.ImageBackOff = state.BackOff{Delay: 10 * time.Second, Updated: when}
		}
		return state.PodState{Containers: map[string]state.ContainerRecord{name: r}}
	}
	crashing := state.PodState{Containers: map[string]state.ContainerRecord{
		"app": {RestartCount: 1, Created: true, CrashBackOff: state.BackOff{Delay: 10 * time.Second, Updated: podtest.At(0)}},
	}}
	crashingInit := state.PodState{Containers: map[string]state.ContainerRecord{
		"init1": {RestartCount: 1, Created: true, CrashBackOff: state.BackOff{Delay: 10 * time.Second, Updated: podtest.At(0)}},
	}}

	tests := []struct {
		name        string
		in          statetest.Scene
		wantPhase   v1.PodPhase
		wantKubectl string
		wantReady   v1.ConditionStatus
		wantMessage string // of the Ready condition
	}{
		{name: "no sandbox yet", in: statetest.Scene{Pod: pod},
			wantPhase: v1.PodPending, wantKubectl: "ContainerCreating", wantReady: v1.ConditionFalse,
			wantMessage: "containers with unready status: [app]"},
		{name: "running", in: statetest.Scene{Pod: pod, RT: statetest.Runtime(ready, statetest.Running(pod, "app", "s1", 0))},
			wantPhase: v1.PodRunning, wantKubectl: "Running", wantReady: v1.ConditionTrue},
		{name: "readiness probe not passed", in: statetest.Scene{Pod: readiness, RT: statetest.Runtime(ready, statetest.Running(readiness, "app", "s1", 0))},
			wantPhase: v1.PodRunning, wantKubectl: "Running", wantReady: v1.ConditionFalse,
			wantMessage: "containers with unready status: [app]"},
		{name: "readiness probe passed", in: statetest.Scene{Pod: readiness, RT: statetest.Runtime(ready, statetest.Running(readiness, "app", "s1", 0)),
			Probes: state.ProbeResults{Readiness: map[string]bool{"app-0": true}}},
			wantPhase: v1.PodRunning, wantKubectl: "Running", wantReady: v1.ConditionTrue},
		{name: "completed under Never", in: statetest.Scene{Pod: never, RT: statetest.Runtime(stopped, statetest.Exited(never, "app", "s1", 0, 0, podtest.At(time.Second))), Now: podtest.At(time.Minute)},
			wantPhase: v1.PodSucceeded, wantKubectl: "Completed", wantReady: v1.ConditionFalse},
		{name: "failed under Never", in: statetest.Scene{Pod: never, RT: statetest.Runtime(stopped, statetest.Exited(never, "app", "s1", 0, 1, podtest.At(time.Second))), Now: podtest.At(time.Minute)},
			wantPhase: v1.PodFailed, wantKubectl: "Error", wantReady: v1.ConditionFalse},
		{name: "crash loop", in: statetest.Scene{Pod: pod, RT: statetest.Runtime(ready, statetest.Exited(pod, "app", "s1", 1, 1, podtest.At(5*time.Second)), statetest.Exited(pod, "app", "s1", 0, 1, podtest.At(0))),
			St: crashing, Now: podtest.At(8 * time.Second)},
			wantPhase: v1.PodRunning, wantKubectl: "CrashLoopBackOff", wantReady: v1.ConditionFalse,
			wantMessage: "containers with unready status: [app]"},
		{name: "image pull failed just now", in: statetest.Scene{Pod: pod, RT: statetest.Runtime(ready),
			St: failure("app", state.ReasonErrImagePull, "not found", podtest.At(0), true), Now: podtest.At(0)},
			wantPhase: v1.PodPending, wantKubectl: "ErrImagePull", wantReady: v1.ConditionFalse,
			wantMessage: "containers with unready status: [app]"},
		{name: "image pull backing off", in: statetest.Scene{Pod: pod, RT: statetest.Runtime(ready),
			St: failure("app", state.ReasonErrImagePull, "not found", podtest.At(0), true), Now: podtest.At(time.Second)},
			wantPhase: v1.PodPending, wantKubectl: "ImagePullBackOff", wantReady: v1.ConditionFalse,
			wantMessage: "containers with unready status: [app]"},
		{name: "config error", in: statetest.Scene{Pod: pod, RT: statetest.Runtime(ready),
			St: failure("app", state.ReasonCreateContainerConfigError, `configmap "cfg" not found`, podtest.At(0), false), Now: podtest.At(time.Minute)},
			wantPhase: v1.PodPending, wantKubectl: "CreateContainerConfigError", wantReady: v1.ConditionFalse,
			wantMessage: "containers with unready status: [app]"},
		{name: "first init container running", in: statetest.Scene{Pod: withInits, RT: statetest.Runtime(ready, statetest.Running(withInits, "init1", "s1", 0))},
			wantPhase: v1.PodPending, wantKubectl: "Init:0/2", wantReady: v1.ConditionFalse,
			wantMessage: "containers with unready status: [app]"},
		{name: "second init container running", in: statetest.Scene{Pod: withInits,
			RT: statetest.Runtime(ready, statetest.Exited(withInits, "init1", "s1", 0, 0, podtest.At(0)), statetest.Running(withInits, "init2", "s1", 0))},
			wantPhase: v1.PodPending, wantKubectl: "Init:1/2", wantReady: v1.ConditionFalse,
			wantMessage: "containers with unready status: [app]"},
		{name: "init failed under Never", in: statetest.Scene{Pod: neverInit, RT: statetest.Runtime(stopped, statetest.Exited(neverInit, "init1", "s1", 0, 1, podtest.At(0))), Now: podtest.At(time.Minute)},
			wantPhase: v1.PodFailed, wantKubectl: "Init:Error", wantReady: v1.ConditionFalse},
		{name: "init crash loop", in: statetest.Scene{Pod: withInits, RT: statetest.Runtime(ready, statetest.Exited(withInits, "init1", "s1", 1, 1, podtest.At(5*time.Second))),
			St: crashingInit, Now: podtest.At(6 * time.Second)},
			wantPhase: v1.PodPending, wantKubectl: "Init:CrashLoopBackOff", wantReady: v1.ConditionFalse,
			wantMessage: "containers with unready status: [app]"},
		{name: "initialized, containers not yet created", in: statetest.Scene{Pod: withInits,
			RT: statetest.Runtime(ready, statetest.Exited(withInits, "init1", "s1", 0, 0, podtest.At(0)), statetest.Exited(withInits, "init2", "s1", 0, 0, podtest.At(0)))},
			wantPhase: v1.PodPending, wantKubectl: "PodInitializing", wantReady: v1.ConditionFalse,
			wantMessage: "containers with unready status: [app]"},
		{name: "sidecar and container running", in: statetest.Scene{Pod: withSidecar,
			RT: statetest.Runtime(ready, statetest.Running(withSidecar, "proxy", "s1", 0), statetest.Running(withSidecar, "app", "s1", 0))},
			wantPhase: v1.PodRunning, wantKubectl: "Running", wantReady: v1.ConditionTrue},
		{name: "deleted and stopped", in: statetest.Scene{Pod: podtest.NewPod(podtest.Deleted(30)), RT: statetest.Runtime(stopped, statetest.Exited(pod, "app", "s1", 0, 137, podtest.At(time.Second)))},
			wantPhase: v1.PodFailed, wantKubectl: "Terminating", wantReady: v1.ConditionFalse},
		{name: "readiness gate missing", in: statetest.Scene{Pod: gated, RT: statetest.Runtime(ready, statetest.Running(gated, "app", "s1", 0))},
			wantPhase: v1.PodRunning, wantKubectl: "Running", wantReady: v1.ConditionFalse,
			wantMessage: `corresponding condition of pod readiness gate "example.com/lb" does not exist.`},
		{name: "readiness gate true", in: statetest.Scene{Pod: gateTrue, RT: statetest.Runtime(ready, statetest.Running(gated, "app", "s1", 0))},
			wantPhase: v1.PodRunning, wantKubectl: "Running", wantReady: v1.ConditionTrue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ComputePodStatus(tt.in.Pod, tt.in.RT, tt.in.St, Inputs{Now: tt.in.Now, HostIPs: []string{"192.168.1.2"}, Probes: tt.in.Probes})
			if s.Phase != tt.wantPhase {
				t.Errorf("phase = %s, want %s", s.Phase, tt.wantPhase)
			}
			if got := kubectlStatus(tt.in.Pod, s); got != tt.wantKubectl {
				t.Errorf("kubectl shows %q, want %q", got, tt.wantKubectl)
			}
			r := condition(s, v1.PodReady)
			if r.Status != tt.wantReady || r.Message != tt.wantMessage {
				t.Errorf("Ready = %s %q, want %s %q", r.Status, r.Message, tt.wantReady, tt.wantMessage)
			}
		})
	}
}

func TestComputePodStatusDetails(t *testing.T) {
	pod := podtest.NewPod(podtest.Inits("setup"))
	rt := statetest.Runtime([]state.Sandbox{{ID: "s1", Ready: true, IPs: []string{"fd00::5", "10.0.0.5", "10.0.0.6"}, CreatedAt: podtest.T0}},
		statetest.Exited(pod, "setup", "s1", 0, 0, podtest.At(time.Second)),
		statetest.Exited(pod, "app", "s1", 0, 2, podtest.At(3*time.Second)),
		statetest.Running(pod, "app", "s1", 1))
	rt.Containers[1].Reason, rt.Containers[1].Message = "OOMKilled", "killed"
	rt.Containers[2].User = &state.LinuxUser{UID: 1000, GID: 3000, SupplementalGroups: []int64{3000, 4000}}
	in := Inputs{Now: podtest.At(10 * time.Second), HostIPs: []string{"192.168.1.2"}}
	s := ComputePodStatus(pod, rt, state.PodState{}, in)

	started := true
	wantApp := v1.ContainerStatus{
		Name:  "app",
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(podtest.At(time.Second))}},
		LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			ExitCode: 2, Reason: "OOMKilled", Message: "killed", StartedAt: metav1.NewTime(podtest.T0), FinishedAt: metav1.NewTime(podtest.At(3 * time.Second)),
			ContainerID: "containerd://app-0",
		}},
		Ready:        true,
		RestartCount: 1,
		Image:        "busybox:1",
		ImageID:      "sha256:abc",
		ContainerID:  "containerd://app-1",
		Started:      &started,
		Resources:    &v1.ResourceRequirements{},
		User:         &v1.ContainerUser{Linux: &v1.LinuxContainerUser{UID: 1000, GID: 3000, SupplementalGroups: []int64{3000, 4000}}},
	}
	if diff := cmp.Diff([]v1.ContainerStatus{wantApp}, s.ContainerStatuses); diff != "" {
		t.Errorf("container statuses (-want +got):\n%s", diff)
	}
	if cs := s.InitContainerStatuses[0]; !cs.Ready || cs.State.Terminated == nil || cs.State.Terminated.Reason != ReasonCompleted {
		t.Errorf("init container status = %+v", cs)
	}
	if diff := cmp.Diff([]v1.PodIP{{IP: "10.0.0.5"}, {IP: "fd00::5"}}, s.PodIPs); diff != "" || s.PodIP != "10.0.0.5" {
		t.Errorf("pod IPs %q %v (-want +got):\n%s", s.PodIP, s.PodIPs, diff)
	}
	if s.HostIP != "192.168.1.2" || s.QOSClass != v1.PodQOSBestEffort || s.ObservedGeneration != 1 {
		t.Errorf("hostIP %q qos %s generation %d", s.HostIP, s.QOSClass, s.ObservedGeneration)
	}
	if s.StartTime == nil || !s.StartTime.Time.Equal(podtest.At(10*time.Second)) {
		t.Errorf("startTime = %v, want now", s.StartTime)
	}
	var types []v1.PodConditionType
	for _, c := range s.Conditions {
		types = append(types, c.Type)
		if c.Status != v1.ConditionTrue {
			t.Errorf("condition %s is %s: %s", c.Type, c.Status, c.Message)
		}
	}
	wantTypes := []v1.PodConditionType{v1.PodReadyToStartContainers, v1.PodInitialized, v1.PodReady, v1.ContainersReady, v1.PodScheduled}
	if diff := cmp.Diff(wantTypes, types); diff != "" {
		t.Errorf("condition order (-want +got):\n%s", diff)
	}

	t.Run("unchanged status keeps its times and compares equal", func(t *testing.T) {
		st := state.PodState{}
		st.RecordStatus(s)
		later := in
		later.Now = podtest.At(time.Hour)
		again := ComputePodStatus(pod, rt, st, later)
		if !Equal(s, again) {
			t.Errorf("statuses differ: %s", cmp.Diff(s, again))
		}
	})
	t.Run("a change moves only the changed conditions' times", func(t *testing.T) {
		st := state.PodState{}
		st.RecordStatus(s)
		rt2 := statetest.Runtime(rt.Sandboxes, rt.Containers[0], rt.Containers[1], statetest.Exited(pod, "app", "s1", 1, 1, podtest.At(time.Minute)))
		later := in
		later.Now = podtest.At(time.Hour)
		again := ComputePodStatus(pod, rt2, st, later)
		if Equal(s, again) {
			t.Fatal("statuses compare equal after the container exited")
		}
		if got := condition(again, v1.PodReady); got.Status != v1.ConditionFalse || !got.LastTransitionTime.Time.Equal(podtest.At(time.Hour)) {
			t.Errorf("Ready = %s at %v", got.Status, got.LastTransitionTime)
		}
		if got := condition(again, v1.PodScheduled); !got.LastTransitionTime.Time.Equal(podtest.At(10 * time.Second)) {
			t.Errorf("PodScheduled moved to %v", got.LastTransitionTime)
		}
		if !again.StartTime.Equal(s.StartTime) {
			t.Errorf("startTime moved to %v", again.StartTime)
		}
	})
	t.Run("a terminal phase stays terminal", func(t *testing.T) {
		done := podtest.NewPod(podtest.Phase(v1.PodSucceeded))
		got := ComputePodStatus(done, statetest.Runtime([]state.Sandbox{statetest.Sandbox("s1", 0)}, statetest.Running(done, "app", "s1", 0)), state.PodState{}, in)
		if got.Phase != v1.PodSucceeded {
			t.Errorf("phase = %s", got.Phase)
		}
	})
	t.Run("conditions owned by others are kept", func(t *testing.T) {
		p := podtest.NewPod(func(p *v1.Pod) {
			p.Status.Conditions = []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue}, {Type: v1.PodReady, Status: v1.ConditionTrue}}
		})
		got := ComputePodStatus(p, state.PodRuntime{}, state.PodState{}, in)
		if got.Conditions[0].Type != v1.DisruptionTarget || condition(got, v1.PodReady).Status != v1.ConditionFalse {
			t.Errorf("conditions = %+v", got.Conditions)
		}
		if c := condition(got, v1.PodReadyToStartContainers); c.Reason != ReasonPodSandboxNotReady || c.Message != planner.SandboxMsgNoSandbox {
			t.Errorf("PodReadyToStartContainers = %+v", c)
		}
	})
	t.Run("a running container that vanished is reported terminated", func(t *testing.T) {
		p := podtest.NewPod(func(p *v1.Pod) {
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", RestartCount: 2, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}
		})
		got := ComputePodStatus(p, statetest.Runtime([]state.Sandbox{statetest.Sandbox("s1", 0)}), state.PodState{}, in).ContainerStatuses[0]
		if got.RestartCount != 3 || got.LastTerminationState.Terminated == nil || got.LastTerminationState.Terminated.Reason != ReasonContainerStatusUnknown {
			t.Errorf("status = %+v", got)
		}
	})
	t.Run("host network pods get the host IPs", func(t *testing.T) {
		p := podtest.NewPod(func(p *v1.Pod) { p.Spec.HostNetwork = true })
		got := ComputePodStatus(p, statetest.Runtime([]state.Sandbox{{ID: "s1", Ready: true, HostNetwork: true}}), state.PodState{}, in)
		if got.PodIP != "192.168.1.2" {
			t.Errorf("podIP = %q", got.PodIP)
		}
	})
	t.Run("pod IPs are kept when the sandbox is gone", func(t *testing.T) {
		p := podtest.NewPod(func(p *v1.Pod) { p.Status.PodIP, p.Status.PodIPs = "10.0.0.9", []v1.PodIP{{IP: "10.0.0.9"}} })
		got := ComputePodStatus(p, statetest.Runtime([]state.Sandbox{statetest.NotReady(statetest.Sandbox("s1", 0))}), state.PodState{}, in)
		if got.PodIP != "10.0.0.9" {
			t.Errorf("podIP = %q", got.PodIP)
		}
	})
	t.Run("image pull back-off message carries the pull error", func(t *testing.T) {
		st := state.PodState{Containers: map[string]state.ContainerRecord{"app": {
			Waiting:      &state.WaitingReason{Reason: state.ReasonErrImagePull, Message: "manifest unknown", At: podtest.At(0)},
			ImageBackOff: state.BackOff{Delay: 10 * time.Second, Updated: podtest.At(0)},
		}}}
		p := podtest.NewPod()
		got := ComputePodStatus(p, statetest.Runtime([]state.Sandbox{statetest.Sandbox("s1", 0)}), st, Inputs{Now: podtest.At(time.Second)}).ContainerStatuses[0]
		if w := got.State.Waiting; w == nil || w.Message != `Back-off pulling image "busybox:1": manifest unknown` {
			t.Errorf("waiting = %+v", got.State.Waiting)
		}
	})
}

func TestEqualIgnoresSubSecondTimes(t *testing.T) {
	a := v1.PodStatus{
		StartTime:  &metav1.Time{Time: podtest.T0.Add(300 * time.Millisecond)},
		Conditions: []v1.PodCondition{{Type: v1.PodReady, LastTransitionTime: metav1.NewTime(podtest.T0.Add(time.Millisecond)), LastProbeTime: metav1.NewTime(podtest.T0)}},
		ContainerStatuses: []v1.ContainerStatus{{Name: "app", State: v1.ContainerState{
			Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(podtest.T0.Add(5 * time.Millisecond))},
		}}},
	}
	b := *a.DeepCopy()
	b.StartTime = &metav1.Time{Time: podtest.T0}
	b.Conditions[0].LastTransitionTime = metav1.NewTime(podtest.T0)
	b.Conditions[0].LastProbeTime = metav1.Time{}
	b.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(podtest.T0)
	if !Equal(a, b) {
		t.Error("sub-second differences made statuses unequal")
	}
	b.ContainerStatuses[0].Ready = true
	if Equal(a, b) {
		t.Error("a readiness change compared equal")
	}
	b.ContainerStatuses[0].Ready = false
	for name, change := range map[string]func(s *v1.PodStatus){
		"a condition's message": func(s *v1.PodStatus) { s.Conditions[0].Message = "m" },
		"a condition's transition time": func(s *v1.PodStatus) {
			s.Conditions[0].LastTransitionTime = metav1.NewTime(podtest.T0.Add(time.Second))
		},
		"a container's start, by 1 s": func(s *v1.PodStatus) {
			s.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(podtest.T0.Add(time.Second))
		},
		"the pod's start, by 1 s": func(s *v1.PodStatus) { s.StartTime = &metav1.Time{Time: podtest.T0.Add(time.Second)} },
		"no start time":           func(s *v1.PodStatus) { s.StartTime = nil },
		"a condition's type":      func(s *v1.PodStatus) { s.Conditions[0].Type = v1.ContainersReady },
		"a container's allocated memory": func(s *v1.PodStatus) {
			s.ContainerStatuses[0].AllocatedResources = v1.ResourceList{v1.ResourceMemory: resource.MustParse("2Mi")}
		},
		"another condition": func(s *v1.PodStatus) { s.Conditions = append(s.Conditions, v1.PodCondition{Type: v1.PodScheduled}) },
	} {
		c := *b.DeepCopy()
		change(&c)
		if Equal(a, c) || Equal(c, a) {
			t.Errorf("%s changed, the statuses compared equal", name)
		}
	}
	same := *b.DeepCopy()
	same.ContainerStatuses[0].AllocatedResources = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
	withMilli := *b.DeepCopy()
	withMilli.ContainerStatuses[0].AllocatedResources = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1000m")}
	if !Equal(same, withMilli) {
		t.Error("1 and 1000m CPUs compared unequal")
	}
	if !Equal(a, b) {
		t.Error("the statuses changed under the comparisons")
	}
}

// TestEqualEncodingsCoverEveryField: Equal takes two statuses of the same
// protobuf encoding for equal, which holds only while every field of a
// status, at every depth, is encoded. A field the encoding leaves out
// (protobuf:"-", or none) would make two different statuses equal.
func TestEqualEncodingsCoverEveryField(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(typ reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			if typ.Kind() == reflect.Map {
				walk(typ.Key(), path+"[key]")
			}
			typ = typ.Elem()
		}
		// Types of other packages (times, quantities, UIDs) encode
		// themselves whole.
		if typ.Kind() != reflect.Struct || typ.PkgPath() != reflect.TypeFor[v1.PodStatus]().PkgPath() || seen[typ] {
			return
		}
		seen[typ] = true
		for f := range typ.Fields() {
			tag, ok := f.Tag.Lookup("protobuf")
			if !ok || tag == "-" {
				t.Errorf("%s.%s is not in the protobuf encoding", path, f.Name)
				continue
			}
			walk(f.Type, path+"."+f.Name)
		}
	}
	walk(reflect.TypeFor[v1.PodStatus](), "PodStatus")
	if !seen[reflect.TypeFor[v1.ContainerStatus]()] {
		t.Error("the walk did not reach ContainerStatus")
	}
}

func BenchmarkEqual(b *testing.B) {
	now := metav1.NewTime(podtest.T0)
	s := v1.PodStatus{
		Phase: v1.PodRunning, QOSClass: v1.PodQOSBestEffort, HostIP: "10.0.0.1", PodIP: "10.1.0.5", PodIPs: []v1.PodIP{{IP: "10.1.0.5"}}, StartTime: &now,
		Conditions: []v1.PodCondition{
			{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: now},
			{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: now},
			{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: now},
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now},
		},
		ContainerStatuses: []v1.ContainerStatus{{
			Name: "c", Ready: true, Image: "busybox:1.36", ImageID: "sha256:abc", ContainerID: "containerd://0123456789abcdef",
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}},
		}},
	}
	same := *s.DeepCopy()
	b.ReportAllocs()
	for b.Loop() {
		if !Equal(s, same) {
			b.Fatal("a copy compared unequal")
		}
	}
}

func TestEphemeralContainerStatus(t *testing.T) {
	pod := podtest.NewPod(podtest.Ephemerals("debugger"))
	withInits := podtest.NewPod(podtest.Inits("init1"), podtest.Ephemerals("debugger"))
	ready := []state.Sandbox{statetest.Sandbox("s1", 0)}
	app := statetest.Running(pod, "app", "s1", 0)
	record := func(r state.ContainerRecord) state.PodState {
		return state.PodState{Containers: map[string]state.ContainerRecord{"debugger": r}}
	}
	oldStatus := func(state v1.ContainerState) podtest.Option {
		return func(p *v1.Pod) {
			p.Status.EphemeralContainerStatuses = []v1.ContainerStatus{{
				Name: "debugger", Image: "busybox:1", ImageID: "sha256:abc", ContainerID: "containerd://debugger-0", State: state,
			}}
		}
	}
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(podtest.T0)}}
	exited := statetest.Exited(pod, "debugger", "s1", 0, 3, podtest.At(time.Second))
	exited.Message = "bye"
	finished := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
		ExitCode: 3, Reason: ReasonError, Message: "bye", StartedAt: metav1.NewTime(podtest.T0), FinishedAt: metav1.NewTime(podtest.At(time.Second)),
		ContainerID: "containerd://debugger-0",
	}}
	lost := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: ReasonContainerStatusUnknown, Message: msgEphemeralLost, ExitCode: 137}}
	waiting := func(reason, msg string) v1.ContainerState {
		return v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason, Message: msg}}
	}
	// observed is the status of the instance debugger-0.
	observed := func(state v1.ContainerState) v1.ContainerStatus {
		return v1.ContainerStatus{Name: "debugger", Image: "busybox:1", ImageID: "sha256:abc", ContainerID: "containerd://debugger-0", State: state}
	}
	notCreated := func(state v1.ContainerState) v1.ContainerStatus {
		return v1.ContainerStatus{Name: "debugger", Image: "busybox:1", State: state}
	}

	tests := []struct {
		name string
		in   statetest.Scene
		want v1.ContainerStatus
	}{
		{name: "not started yet", in: statetest.Scene{Pod: pod, RT: statetest.Runtime(ready, app)},
			want: notCreated(waiting(state.ReasonContainerCreating, ""))},
		{name: "not started yet in a pod with init containers", in: statetest.Scene{Pod: withInits, RT: statetest.Runtime(ready, statetest.Running(withInits, "init1", "s1", 0))},
			want: notCreated(waiting(state.ReasonPodInitializing, ""))},
		{name: "running", in: statetest.Scene{Pod: pod, RT: statetest.Runtime(ready, app, statetest.Running(pod, "debugger", "s1", 0))},
			want: observed(running)},
		{name: "exited, under restart policy Always", in: statetest.Scene{Pod: pod, RT: statetest.Runtime(ready, app, exited), Now: podtest.At(time.Hour)},
			want: observed(finished)},
		{name: "created but not started", in: statetest.Scene{Pod: pod, RT: statetest.Runtime(ready, app, statetest.Instance(pod, "debugger", "s1", 0, state.ContainerCreated)),
			St:  record(state.ContainerRecord{Created: true, Waiting: &state.WaitingReason{Reason: state.ReasonRunContainerError, Message: "exec failed", At: podtest.At(0)}}),
			Now: podtest.At(time.Second)},
			want: observed(waiting(state.ReasonRunContainerError, "exec failed"))},
		{name: "image pull failed just now", in: statetest.Scene{Pod: pod, RT: statetest.Runtime(ready, app),
			St: record(state.ContainerRecord{
				Waiting:      &state.WaitingReason{Reason: state.ReasonErrImagePull, Message: "not found", At: podtest.At(0)},
				ImageBackOff: state.BackOff{Delay: 10 * time.Second, Updated: podtest.At(0)},
			})},
			want: notCreated(waiting(state.ReasonErrImagePull, "not found"))},
		{name: "image pull backing off", in: statetest.Scene{Pod: pod, RT: statetest.Runtime(ready, app),
			St: record(state.ContainerRecord{
				Waiting:      &state.WaitingReason{Reason: state.ReasonErrImagePull, Message: "not found", At: podtest.At(0)},
				ImageBackOff: state.BackOff{Delay: 10 * time.Second, Updated: podtest.At(0)},
			}),
			Now: podtest.At(time.Second)},
			want: notCreated(waiting(state.ReasonImagePullBackOff, `Back-off pulling image "busybox:1": not found`))},
		{name: "target container not found", in: statetest.Scene{Pod: pod, RT: statetest.Runtime(ready, app),
			St:  record(state.ContainerRecord{Waiting: &state.WaitingReason{Reason: state.ReasonCreateContainerConfigError, Message: "unable to find target container web", At: podtest.At(0)}}),
			Now: podtest.At(time.Minute)},
			want: notCreated(waiting(state.ReasonCreateContainerConfigError, "unable to find target container web"))},
		{name: "lost by the runtime while running", in: statetest.Scene{Pod: podtest.NewPod(podtest.Ephemerals("debugger"), oldStatus(running)), RT: statetest.Runtime(ready, app),
			St: record(state.ContainerRecord{Created: true})},
			want: observed(lost)},
		{name: "lost by the runtime after it was created", in: statetest.Scene{Pod: pod, RT: statetest.Runtime(ready, app),
			St: record(state.ContainerRecord{Created: true})},
			want: notCreated(lost)},
		{name: "removed after it exited keeps its last status", in: statetest.Scene{Pod: podtest.NewPod(podtest.Ephemerals("debugger"), oldStatus(finished)), RT: statetest.Runtime(ready, app),
			St: record(state.ContainerRecord{Created: true})},
			want: observed(finished)},
		{name: "a deleted pod shows no start failure", in: statetest.Scene{Pod: podtest.NewPod(podtest.Deleted(30), podtest.Ephemerals("debugger")), RT: statetest.Runtime(ready, app),
			St: record(state.ContainerRecord{Waiting: &state.WaitingReason{Reason: state.ReasonErrImagePull, At: podtest.At(0)}})},
			want: notCreated(waiting(state.ReasonContainerCreating, ""))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ComputePodStatus(tt.in.Pod, tt.in.RT, tt.in.St, Inputs{Now: tt.in.Now})
			if diff := cmp.Diff([]v1.ContainerStatus{tt.want}, s.EphemeralContainerStatuses); diff != "" {
				t.Errorf("ephemeral container statuses (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("phase and readiness do not depend on ephemeral containers", func(t *testing.T) {
		p := podtest.NewPod(podtest.Ephemerals("debugger", "crashed"))
		rt := statetest.Runtime(ready, app, statetest.Exited(p, "crashed", "s1", 0, 1, podtest.At(time.Second)))
		st := record(state.ContainerRecord{Waiting: &state.WaitingReason{Reason: state.ReasonErrImagePull, At: podtest.At(0)}})
		with := ComputePodStatus(p, rt, st, Inputs{Now: podtest.At(0)})
		without := ComputePodStatus(podtest.NewPod(), statetest.Runtime(ready, app), state.PodState{}, Inputs{Now: podtest.At(0)})
		if with.Phase != v1.PodRunning || condition(with, v1.PodReady).Status != v1.ConditionTrue || kubectlStatus(p, with) != "Running" {
			t.Errorf("phase %s, Ready %s, kubectl %q", with.Phase, condition(with, v1.PodReady).Status, kubectlStatus(p, with))
		}
		with.EphemeralContainerStatuses = nil
		if !Equal(with, without) {
			t.Errorf("statuses differ beyond the ephemeral containers: %s", cmp.Diff(without, with))
		}
	})
	t.Run("statuses are sorted by name", func(t *testing.T) {
		p := podtest.NewPod(podtest.Ephemerals("zed", "alpha", "mid"))
		var names []string
		for _, cs := range ComputePodStatus(p, statetest.Runtime(ready, app), state.PodState{}, Inputs{}).EphemeralContainerStatuses {
			names = append(names, cs.Name)
		}
		if diff := cmp.Diff([]string{"alpha", "mid", "zed"}, names); diff != "" {
			t.Errorf("order (-want +got):\n%s", diff)
		}
	})
	t.Run("an unchanged ephemeral status compares equal", func(t *testing.T) {
		rt := statetest.Runtime(ready, app, statetest.Running(pod, "debugger", "s1", 0))
		first := ComputePodStatus(pod, rt, state.PodState{}, Inputs{Now: podtest.At(0)})
		st := state.PodState{}
		st.RecordStatus(first)
		if again := ComputePodStatus(pod, rt, st, Inputs{Now: podtest.At(time.Hour)}); !Equal(first, again) {
			t.Errorf("statuses differ: %s", cmp.Diff(first, again))
		}
	})
}

func TestVolumeMountStatus(t *testing.T) {
	mounts := []v1.VolumeMount{
		{Name: "data", MountPath: "/data"},
		{Name: "cfg", MountPath: "/cfg", ReadOnly: true},
		{Name: "rro", MountPath: "/rro", ReadOnly: true, RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyIfPossible)},
		{Name: "on", MountPath: "/on", ReadOnly: true, RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyEnabled)},
		{Name: "bad", MountPath: "/bad", ReadOnly: true, RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyEnabled),
			MountPropagation: ptr.To(v1.MountPropagationBidirectional)},
	}
	pod := podtest.NewPod(podtest.Modify("app", func(c *v1.Container) { c.VolumeMounts = mounts }))
	ready := []state.Sandbox{statetest.Sandbox("s1", 0)}
	disabled, enabled := ptr.To(v1.RecursiveReadOnlyDisabled), ptr.To(v1.RecursiveReadOnlyEnabled)
	for _, tc := range []struct {
		name      string
		rt        state.PodRuntime
		supported bool
		want      []v1.VolumeMountStatus
	}{
		{name: "running, runtime with recursive read-only mounts", rt: statetest.Runtime(ready, statetest.Running(pod, "app", "s1", 0)), supported: true,
			want: []v1.VolumeMountStatus{{Name: "data", MountPath: "/data"},
				{Name: "cfg", MountPath: "/cfg", ReadOnly: true, RecursiveReadOnly: disabled},
				{Name: "rro", MountPath: "/rro", ReadOnly: true, RecursiveReadOnly: enabled},
				{Name: "on", MountPath: "/on", ReadOnly: true, RecursiveReadOnly: enabled},
				{Name: "bad", MountPath: "/bad", ReadOnly: true, RecursiveReadOnly: disabled}}},
		{name: "waiting, runtime without", rt: statetest.Runtime(ready),
			want: []v1.VolumeMountStatus{{Name: "data", MountPath: "/data"},
				{Name: "cfg", MountPath: "/cfg", ReadOnly: true, RecursiveReadOnly: disabled},
				{Name: "rro", MountPath: "/rro", ReadOnly: true, RecursiveReadOnly: disabled},
				{Name: "on", MountPath: "/on", ReadOnly: true, RecursiveReadOnly: disabled},
				{Name: "bad", MountPath: "/bad", ReadOnly: true, RecursiveReadOnly: disabled}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ComputePodStatus(pod, tc.rt, state.PodState{}, Inputs{Now: podtest.At(1), RecursiveReadOnly: tc.supported})
			if len(s.ContainerStatuses) != 1 {
				t.Fatalf("container statuses: %v", s.ContainerStatuses)
			}
			if got := s.ContainerStatuses[0].VolumeMounts; !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("volume mounts:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
	plain := ComputePodStatus(podtest.NewPod(), statetest.Runtime(ready), state.PodState{}, Inputs{Now: podtest.At(1)})
	if vm := plain.ContainerStatuses[0].VolumeMounts; vm != nil {
		t.Errorf("a container without volume mounts reports %v", vm)
	}
}

func TestAllocatedResourcesStatus(t *testing.T) {
	pod := podtest.NewPod(podtest.Inits("init"), podtest.Containers("app", "waiting"))
	ready := []state.Sandbox{statetest.Sandbox("s1", 0)}
	rt := statetest.Runtime(ready, statetest.Running(pod, "app", "s1", 0))
	gpu := []v1.ResourceStatus{{Name: "example.com/gpu", Resources: []v1.ResourceHealth{{ResourceID: "dev-0", Health: v1.ResourceHealthStatusUnhealthy}}}}
	claim := []v1.ResourceStatus{{Name: "claim:gpu", Resources: []v1.ResourceHealth{{ResourceID: "gpu.example.com/node/gpu-0", Health: v1.ResourceHealthStatusHealthy}}}}
	s := ComputePodStatus(pod, rt, state.PodState{}, Inputs{Now: podtest.At(1), AllocatedResourcesStatus: map[string][]v1.ResourceStatus{
		"app": gpu, "waiting": claim, "init": gpu,
	}})
	got := map[string][]v1.ResourceStatus{}
	for _, cs := range append(s.InitContainerStatuses, s.ContainerStatuses...) {
		if cs.AllocatedResourcesStatus != nil {
			got[cs.Name] = cs.AllocatedResourcesStatus
		}
	}
	// A container not started yet reports its devices too; an init
	// container does not, as with the kubelet.
	want := map[string][]v1.ResourceStatus{"app": gpu, "waiting": claim}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("allocatedResourcesStatus (-want +got):\n%s", diff)
	}
	if s := ComputePodStatus(pod, rt, state.PodState{}, Inputs{Now: podtest.At(1)}); s.ContainerStatuses[0].AllocatedResourcesStatus != nil {
		t.Errorf("without devices: %v", s.ContainerStatuses[0].AllocatedResourcesStatus)
	}
}

// TestComputeLeavesTheLastStatusAlone: the last status is shared by every
// copy of a pod's state (state.PodState.Clone), so the status built on it
// must neither change it nor share memory with it, which the caller may
// change.
func TestComputeLeavesTheLastStatusAlone(t *testing.T) {
	pod := podtest.NewPod(podtest.Inits("setup"), podtest.Containers("app", "side"), podtest.Ephemerals("debug"))
	started := metav1.NewTime(podtest.T0)
	terminated := func(code int32) *v1.ContainerStateTerminated {
		return &v1.ContainerStateTerminated{ExitCode: code, Reason: "Error", StartedAt: started, FinishedAt: started}
	}
	last := &v1.PodStatus{
		Phase: v1.PodRunning, StartTime: &started, Reason: "r", Message: "m",
		PodIP: "10.0.0.5", PodIPs: []v1.PodIP{{IP: "10.0.0.5"}},
		HostIP: "192.168.1.2", HostIPs: []v1.HostIP{{IP: "192.168.1.2"}},
		Conditions: []v1.PodCondition{
			{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: started},
			{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: started},
			{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: started},
		},
		InitContainerStatuses: []v1.ContainerStatus{{Name: "setup", State: v1.ContainerState{Terminated: terminated(0)},
			VolumeMounts: []v1.VolumeMountStatus{{Name: "v", MountPath: "/v"}}}},
		ContainerStatuses: []v1.ContainerStatus{
			{Name: "app", RestartCount: 1, Ready: true, Started: ptr.To(true),
				State:                v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}},
				LastTerminationState: v1.ContainerState{Terminated: terminated(1)},
				User:                 &v1.ContainerUser{Linux: &v1.LinuxContainerUser{UID: 1, GID: 1, SupplementalGroups: []int64{1}}}},
			{Name: "side", State: v1.ContainerState{Terminated: terminated(2)}, LastTerminationState: v1.ContainerState{Terminated: terminated(3)}},
		},
		EphemeralContainerStatuses: []v1.ContainerStatus{{Name: "debug", State: v1.ContainerState{Terminated: terminated(4)}}},
	}
	ready := []state.Sandbox{statetest.Sandbox("s1", 0)}
	stopped := []state.Sandbox{statetest.NotReady(statetest.Sandbox("s1", 0))}
	deleted := podtest.NewPod(podtest.Inits("setup"), podtest.Containers("app", "side"), podtest.Ephemerals("debug"), podtest.Deleted(30))
	for name, in := range map[string]statetest.Scene{
		"nothing in the runtime": {Pod: pod},
		"running":                {Pod: pod, RT: statetest.Runtime(ready, statetest.Running(pod, "app", "s1", 2), statetest.Running(pod, "debug", "s1", 0))},
		"app state unknown":      {Pod: pod, RT: statetest.Runtime(ready, statetest.Instance(pod, "app", "s1", 2, state.ContainerUnknown))},
		"deleted and stopped":    {Pod: deleted, RT: statetest.Runtime(stopped, statetest.Exited(deleted, "app", "s1", 2, 137, podtest.At(time.Second)))},
	} {
		t.Run(name, func(t *testing.T) {
			want := last.DeepCopy()
			s := ComputePodStatus(in.Pod, in.RT, state.PodState{LastStatus: last}, Inputs{Now: podtest.At(time.Minute), HostIPs: []string{"192.168.1.2"}})
			if !equality.Semantic.DeepEqual(last, want) {
				t.Fatalf("the last status changed: %s", cmp.Diff(want, last))
			}
			if p := podtest.SharedPath("PodStatus", *last, s); p != "" {
				t.Errorf("the new status shares %s with the last", p)
			}
		})
	}
}

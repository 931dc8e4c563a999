package plan

import "testing"

func TestPodActionsStarts(t *testing.T) {
	tests := []struct {
		name string
		a    PodActions
		want bool
	}{
		{"a running pod", PodActions{SandboxID: "s1"}, true},
		{"a new sandbox after the old one is killed", PodActions{KillPod: true, CreateSandbox: true}, true},
		{"a pod stopped for good", PodActions{KillPod: true}, false},
		{"a pod done", PodActions{Done: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Starts(); got != tt.want {
				t.Errorf("Starts = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTerminationPlanStopsAnything(t *testing.T) {
	tests := []struct {
		name string
		p    TerminationPlan
		want bool
	}{
		{"containers", TerminationPlan{Stop: []ContainerStop{{ContainerID: "c1"}}}, true},
		{"sandboxes", TerminationPlan{StopSandboxes: []string{"s1"}}, true},
		{"hooks only wait for their containers' turn", TerminationPlan{PreStop: []PreStopHook{{ContainerID: "c1"}}, RequeueAfter: 1}, false},
		{"done", TerminationPlan{Done: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.StopsAnything(); got != tt.want {
				t.Errorf("StopsAnything = %v, want %v", got, tt.want)
			}
		})
	}
}

package conformance

import (
	"reflect"
	"testing"
)

func TestReadJUnit(t *testing.T) {
	r, err := ReadJUnit("testdata/junit_01.xml")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Names(Passed); !reflect.DeepEqual(got, []string{"[sig-node] Pods should get a host IP [Conformance] [NodeConformance]"}) {
		t.Errorf("passed = %q", got)
	}
	failed := "[sig-storage] ConfigMap optional updates should be reflected in volume [Conformance] [NodeConformance]"
	if got := r.Names(Failed); !reflect.DeepEqual(got, []string{failed}) {
		t.Errorf("failed = %q", got)
	}
	if got := r.Specs[failed].Message; got != "Timed out after 240.001s.\nExpected\n    content\n[FAILED] Timed out after 240.001s." {
		t.Errorf("message = %q", got)
	}
	if got := r.Count(Skipped); got != 2 {
		t.Errorf("skipped = %d, want 2", got)
	}
	selfSkipped := "[sig-node] [DRA] kubelet uses all resources"
	if got := r.SkippedAtRunTime(); !reflect.DeepEqual(got, []string{selfSkipped}) {
		t.Errorf("skipped at run time = %q", got)
	}
	if got := r.Specs[selfSkipped].Message; got != "2 ready nodes required, only have 1" {
		t.Errorf("skip message = %q", got)
	}
}

func TestAgentEvents(t *testing.T) {
	ev, err := AgentEvents("testdata/e2e.log")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"[sig-storage] ConfigMap optional updates should be reflected in volume [Conformance] [NodeConformance]": {
			`FailedMount: MountVolume.SetUp failed for volume "delete" : configmap "x" not found`,
		},
	}
	if !reflect.DeepEqual(ev, want) {
		t.Errorf("events = %q, want %q", ev, want)
	}
}

func TestSkipList(t *testing.T) {
	if _, err := SkipList(); err != nil {
		t.Fatal(err)
	}
}

func TestSpecTable(t *testing.T) {
	reports := map[Agent]*Report{
		AgentNodelet: {Specs: map[string]SpecResult{
			"b spec": {Name: "b spec", Outcome: Failed},
			"a spec": {Name: "a spec", Outcome: Passed},
		}},
		AgentKubelet: {Specs: map[string]SpecResult{
			"a spec": {Name: "a spec", Outcome: Passed},
			"b spec": {Name: "b spec", Outcome: Passed},
			"c|spec": {Name: "c|spec", Outcome: Skipped},
		}},
	}
	want := `
| spec | nodelet | kubelet |
|---|---|---|
| a spec | passed | passed |
| b spec | failed | passed |
| c\|spec |  | skipped |
| **total** (passed / failed / skipped) | 1 / 1 / 0 | 2 / 0 / 1 |
`
	if got := SpecTable([]Agent{AgentNodelet, AgentKubelet}, reports); got != want {
		t.Errorf("SpecTable =\n%s\nwant\n%s", got, want)
	}
}

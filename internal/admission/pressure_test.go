package admission

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestAdmitUnderPressure(t *testing.T) {
	bestEffort := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app"}}}}
	burstable := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("10Mi")}}}}}}
	tolerating := bestEffort.DeepCopy()
	tolerating.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	critical := bestEffort.DeepCopy()
	critical.Spec.Priority = ptr.To[int32](2000001000)
	mem := []v1.NodeConditionType{v1.NodeMemoryPressure}
	disk := []v1.NodeConditionType{v1.NodeDiskPressure}
	tests := []struct {
		name    string
		pod     *v1.Pod
		conds   []v1.NodeConditionType
		wantMsg string
	}{
		{name: "no pressure", pod: bestEffort},
		{name: "PID pressure refuses nothing", pod: bestEffort, conds: []v1.NodeConditionType{v1.NodePIDPressure}},
		{name: "memory pressure refuses BestEffort", pod: bestEffort, conds: mem, wantMsg: "The node had condition: [MemoryPressure]. "},
		{name: "memory pressure admits Burstable", pod: burstable, conds: mem},
		{name: "memory pressure admits a BestEffort pod tolerating its taint", pod: tolerating, conds: mem},
		{name: "memory pressure admits a critical pod", pod: critical, conds: mem},
		{name: "disk pressure refuses every pod", pod: burstable, conds: disk, wantMsg: "The node had condition: [DiskPressure]. "},
		{name: "both refuse even Burstable", pod: burstable, conds: []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure},
			wantMsg: "The node had condition: [MemoryPressure DiskPressure]. "},
		{name: "disk pressure admits a critical pod", pod: critical, conds: disk},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := AdmitUnderPressure(tt.pod, tt.conds)
			if r.Admit != (tt.wantMsg == "") || r.Message != tt.wantMsg {
				t.Errorf("AdmitUnderPressure = %+v, want message %q", r, tt.wantMsg)
			}
			if !r.Admit && r.Reason != ReasonEvicted {
				t.Errorf("reason = %q", r.Reason)
			}
		})
	}
}

package metrics

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

func TestRegisteredOnControllerRuntimeRegistry(t *testing.T) {
	NodeName.WithLabelValues("n1").Set(1)
	RuntimeOperations.WithLabelValues("version").Inc()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range families {
		seen[f.GetName()] = true
	}
	for _, want := range []string{"kubelet_node_name", "kubelet_runtime_operations_total"} {
		if !seen[want] {
			t.Errorf("%s is not served by controller-runtime's registry", want)
		}
	}
}

func TestStateCollector(t *testing.T) {
	two := 2
	SetStateSource(func(context.Context) State {
		return State{
			PodsByPhase:       map[string]int{"Running": 3},
			RunningPods:       &two,
			ContainersByState: map[string]int{"running": 4, "exited": 1},
		}
	})
	defer SetStateSource(nil)
	if got := testutil.CollectAndCount(runtimeState); got != 4 {
		t.Errorf("collected %d series, want 4", got)
	}
	if got := testutil.CollectAndCount(runtimeState, "kubelet_running_pods"); got != 1 {
		t.Errorf("kubelet_running_pods series = %d, want 1", got)
	}
	SetStateSource(func(context.Context) State { return State{} })
	if got := testutil.CollectAndCount(runtimeState); got != 0 {
		t.Errorf("an unreadable source gave %d series, want 0", got)
	}
}

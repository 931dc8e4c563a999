package metrics

import (
	"context"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/utils/ptr"
)

func TestPriorityBucket(t *testing.T) {
	for _, tc := range []struct {
		priority *int32
		want     string
	}{
		{nil, "normal"},
		{ptr.To[int32](0), "normal"},
		{ptr.To[int32](1), "medium"},
		{ptr.To[int32](99999), "medium"},
		{ptr.To[int32](100000), "high"},
		{ptr.To[int32](1999999999), "high"},
		{ptr.To[int32](2000000000), "system-critical"},
		{ptr.To[int32](2000001000), "system-critical"},
		{ptr.To[int32](math.MaxInt32), "system-critical"},
		{ptr.To[int32](-1), "low"},
		{ptr.To[int32](-999), "low"},
		{ptr.To[int32](-1000), "very-low"},
		{ptr.To[int32](math.MinInt32), "very-low"},
	} {
		name := "nil"
		if tc.priority != nil {
			name = strconv.Itoa(int(*tc.priority))
		}
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(PriorityBucket(tc.priority)).To(Equal(tc.want))
		})
	}
}

// setState makes scrapes read s, until the test ends.
func setState(t *testing.T, s State) {
	t.Helper()
	SetStateSource(func(context.Context) State { return s })
	t.Cleanup(func() { SetStateSource(nil) })
}

const stateHelp = `# HELP kubelet_running_pods Number of pods that have a running pod sandbox.
# TYPE kubelet_running_pods gauge
`

func TestStateScrape(t *testing.T) {
	g := NewWithT(t)
	two, zero := 2, 0
	setState(t, State{
		PodsByPhase:       map[string]int{"Pending": 1, "Running": 3, "Succeeded": 0, "Failed": 0},
		RunningPods:       &two,
		ContainersByState: map[string]int{"created": 0, "running": 4, "exited": 1, "unknown": 0},
		PendingResizes: map[PendingResize]int{
			{Reason: "deferred", PriorityBucket: "normal"}:            2,
			{Reason: "infeasible", PriorityBucket: "system-critical"}: 1,
		},
		InProgressResizes: &zero,
	})
	expected := stateHelp + `kubelet_running_pods 2
# HELP kubelet_running_containers Number of containers currently running, by state.
# TYPE kubelet_running_containers gauge
kubelet_running_containers{container_state="created"} 0
kubelet_running_containers{container_state="exited"} 1
kubelet_running_containers{container_state="running"} 4
kubelet_running_containers{container_state="unknown"} 0
# HELP nodelet_pods Pods bound to this node, by phase.
# TYPE nodelet_pods gauge
nodelet_pods{phase="Failed"} 0
nodelet_pods{phase="Pending"} 1
nodelet_pods{phase="Running"} 3
nodelet_pods{phase="Succeeded"} 0
# HELP kubelet_pod_in_progress_resizes Number of in-progress resizes for pods.
# TYPE kubelet_pod_in_progress_resizes gauge
kubelet_pod_in_progress_resizes 0
`
	g.Expect(testutil.CollectAndCompare(runtimeState, strings.NewReader(expected),
		"kubelet_running_pods", "kubelet_running_containers", "nodelet_pods", "kubelet_pod_in_progress_resizes")).To(Succeed())

	pending := collect(g, "kubelet_pod_pending_resizes")
	g.Expect(pending).To(Equal(map[string]float64{
		`priority_bucket="normal",reason="deferred"`:            2,
		`priority_bucket="system-critical",reason="infeasible"`: 1,
	}))
	g.Expect(testutil.CollectAndCount(runtimeState)).To(Equal(1 + 4 + 4 + 2 + 1))
}

// collect returns the values of the state collector's family name by
// their labels.
func collect(g Gomega, name string) map[string]float64 {
	reg := prometheus.NewPedanticRegistry()
	g.Expect(reg.Register(runtimeState)).To(Succeed())
	families, err := reg.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			out[strings.Join(labels, ",")] = m.GetGauge().GetValue()
		}
	}
	return out
}

func TestStateLeavesOutWhatIsUnknown(t *testing.T) {
	g := NewWithT(t)
	// Counts that are zero are reported; sources that could not be read
	// (nil) are not.
	zero := 0
	setState(t, State{RunningPods: &zero})
	g.Expect(testutil.CollectAndCompare(runtimeState, strings.NewReader(stateHelp+"kubelet_running_pods 0\n"))).To(Succeed())

	setState(t, State{ContainersByState: map[string]int{}, PodsByPhase: map[string]int{}, PendingResizes: map[PendingResize]int{}})
	g.Expect(testutil.CollectAndCount(runtimeState)).To(BeZero())

	SetStateSource(nil)
	g.Expect(testutil.CollectAndCount(runtimeState)).To(BeZero(), "no source: nothing, and no panic")
}

func TestStateSourceIsAskedWithADeadlineAndTheLastOneWins(t *testing.T) {
	g := NewWithT(t)
	var deadline time.Duration
	first, second := 1, 2
	SetStateSource(func(context.Context) State { return State{RunningPods: &first} })
	SetStateSource(func(ctx context.Context) State {
		d, ok := ctx.Deadline()
		g.Expect(ok).To(BeTrue())
		deadline = time.Until(d)
		return State{RunningPods: &second}
	})
	t.Cleanup(func() { SetStateSource(nil) })
	g.Expect(testutil.CollectAndCompare(runtimeState, strings.NewReader(stateHelp+"kubelet_running_pods 2\n"))).To(Succeed())
	g.Expect(deadline).To(BeNumerically("~", 5*time.Second, time.Second))
}

func TestStateCollectorIsConsistentWithItsDescriptions(t *testing.T) {
	g := NewWithT(t)
	one := 1
	setState(t, State{
		PodsByPhase: map[string]int{"Running": 1}, RunningPods: &one, ContainersByState: map[string]int{"running": 1},
		PendingResizes: map[PendingResize]int{{Reason: "deferred", PriorityBucket: "low"}: 1}, InProgressResizes: &one,
	})
	// A pedantic registry checks every collected metric against the
	// described ones.
	reg := prometheus.NewPedanticRegistry()
	g.Expect(reg.Register(runtimeState)).To(Succeed())
	families, err := reg.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(families).To(HaveLen(5))
	problems, err := testutil.CollectAndLint(runtimeState)
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range problems {
		// The kubelet's names are kept even where the linter would
		// have others.
		g.Expect(p.Metric).To(HavePrefix("kubelet_"), "%s: %s", p.Metric, p.Text)
	}
}

func TestSetStateSourceWhileScraping(t *testing.T) {
	n := 3
	t.Cleanup(func() { SetStateSource(nil) })
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if i%2 == 0 {
					SetStateSource(func(context.Context) State { return State{RunningPods: &n} })
				} else {
					_ = testutil.CollectAndCount(runtimeState)
				}
			}
		}()
	}
	wg.Wait()
}

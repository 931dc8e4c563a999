package prober

import (
	"context"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/metrics"
)

// fakeProbes answers probes by container ID and probe type and counts them.
type fakeProbes struct {
	mu      sync.Mutex
	answers map[workerKey]outcome
	calls   map[workerKey]int
}

func (f *fakeProbes) set(id string, t ProbeType, o outcome) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[workerKey{id, t}] = o
}

func (f *fakeProbes) count(id string, t ProbeType) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[workerKey{id, t}]
}

func (f *fakeProbes) probe(_ context.Context, tg target) (outcome, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var t ProbeType
	switch tg.probe {
	case tg.container.ReadinessProbe:
		t = Readiness
	case tg.container.LivenessProbe:
		t = Liveness
	default:
		t = Startup
	}
	k := workerKey{tg.containerID, t}
	f.calls[k]++
	return f.answers[k], "", nil
}

// waitFor polls cond for up to 5 s of real time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func receivePod(t *testing.T, m *Manager) string {
	t.Helper()
	select {
	case e := <-m.Events():
		return e.Object.GetNamespace() + "/" + e.Object.GetName()
	case <-time.After(5 * time.Second):
		t.Fatal("no pod event")
		return ""
	}
}

func TestManagerRunsWorkersOfRunningContainers(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	m, err := New(noRunner{}, record.NewFakeRecorder(100), Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	fp := &fakeProbes{answers: map[workerKey]outcome{}, calls: map[workerKey]int{}}
	m.probe = fp.probe

	pod := testPod(corev1.Container{
		Name:           "app",
		ReadinessProbe: execProbe(func(p *corev1.Probe) { p.InitialDelaySeconds = 5 }),
		LivenessProbe:  execProbe(func(p *corev1.Probe) { p.FailureThreshold = 1; p.PeriodSeconds = 2 }),
	})
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "plain"})
	rt := state.PodRuntime{
		Sandboxes: []state.Sandbox{{ID: "sb", IPs: []string{"10.0.0.9"}}},
		Containers: []state.Container{
			running("c1", epoch),
			{ID: "p1", Name: "plain", State: state.ContainerRunning},
		},
	}
	m.Sync(pod, rt)
	res := m.Results(pod.UID)
	if ready, ok := res.Readiness["c1"]; !ok || ready {
		t.Fatalf("initial readiness = %v, %v; want false", ready, ok)
	}
	if live, ok := res.Liveness["c1"]; !ok || !live {
		t.Fatalf("initial liveness = %v, %v; want true", live, ok)
	}
	if len(res.Startup) != 0 {
		t.Fatalf("startup results %v, want none", res.Startup)
	}

	// Liveness probes at once and then every 2 s; readiness waits 5 s.
	waitFor(t, "the first liveness probe", func() bool { return fp.count("c1", Liveness) == 1 })
	waitFor(t, "both workers waiting", func() bool { return clk.Waiters() == 2 })
	if n := fp.count("c1", Readiness); n != 0 {
		t.Fatalf("readiness probed %d times within its initial delay", n)
	}
	fp.set("c1", Readiness, success)
	for n := 2; n <= 3; n++ {
		clk.Step(2 * time.Second)
		waitFor(t, "liveness probes every period", func() bool { return fp.count("c1", Liveness) == n })
		waitFor(t, "both workers waiting", func() bool { return clk.Waiters() == 2 })
	}
	clk.Step(time.Second)
	if got := receivePod(t, m); got != "ns/web" {
		t.Fatalf("pod event for %s", got)
	}
	if !m.Results(pod.UID).Readiness["c1"] {
		t.Fatal("readiness did not turn true")
	}

	// Syncing again starts nothing new.
	m.Sync(pod, rt)
	waitFor(t, "workers waiting", func() bool { return clk.Waiters() == 2 })

	// A failed liveness probe is reported and its worker stops.
	fp.set("c1", Liveness, failure)
	clk.Step(time.Second)
	receivePod(t, m)
	if m.Results(pod.UID).Liveness["c1"] {
		t.Fatal("liveness did not turn false")
	}
	waitFor(t, "the liveness worker to stop", func() bool { return clk.Waiters() == 1 })

	// The container was replaced: the old instance's workers and results go.
	rt.Containers[0] = state.Container{ID: "c1", Name: "app", State: state.ContainerExited}
	rt.Containers = append(rt.Containers, running("c2", clk.Now()))
	m.Sync(pod, rt)
	res = m.Results(pod.UID)
	if _, ok := res.Readiness["c1"]; ok {
		t.Error("readiness of the exited instance kept")
	}
	if _, ok := res.Liveness["c1"]; ok {
		t.Error("liveness of the exited instance kept")
	}
	if res.Liveness["c2"] != true || res.Readiness["c2"] != false {
		t.Errorf("results of the new instance %+v", res)
	}
	waitFor(t, "the new instance's liveness probe", func() bool { return fp.count("c2", Liveness) == 1 })

	// A pod being deleted keeps no workers.
	deleting := pod.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: clk.Now()}
	m.Sync(deleting, rt)
	if res := m.Results(pod.UID); len(res.Readiness)+len(res.Liveness) != 0 {
		t.Errorf("results kept for a pod being deleted: %+v", res)
	}
	waitFor(t, "every worker to stop", func() bool { return clk.Waiters() == 0 })
}

func TestManagerStartupGatesAndForget(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	m, err := New(noRunner{}, nil, Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	fp := &fakeProbes{answers: map[workerKey]outcome{}, calls: map[workerKey]int{}}
	m.probe = fp.probe
	pod := testPod(corev1.Container{
		Name:           "app",
		StartupProbe:   execProbe(func(p *corev1.Probe) { p.PeriodSeconds = 1; p.FailureThreshold = 30 }),
		ReadinessProbe: execProbe(func(p *corev1.Probe) { p.PeriodSeconds = 60 }),
	})
	rt := state.PodRuntime{Containers: []state.Container{running("c1", epoch)}}
	fp.set("c1", Startup, failure)
	fp.set("c1", Readiness, success)
	m.Sync(pod, rt)
	waitFor(t, "the first startup probe", func() bool { return fp.count("c1", Startup) == 1 })
	waitFor(t, "both workers waiting", func() bool { return clk.Waiters() == 2 })
	if fp.count("c1", Readiness) != 0 {
		t.Fatal("readiness probed before the container started")
	}
	fp.set("c1", Startup, success)
	clk.Step(time.Second)
	receivePod(t, m) // started
	// The readiness worker is woken at once, not after its 60 s period.
	receivePod(t, m)
	res := m.Results(pod.UID)
	if !res.Startup["c1"] || !res.Readiness["c1"] {
		t.Fatalf("results %+v, want started and ready", res)
	}
	waitFor(t, "the startup worker to stop", func() bool { return clk.Waiters() == 1 })

	m.Forget(pod.UID)
	if res := m.Results(pod.UID); res.Readiness != nil || res.Startup != nil {
		t.Errorf("results after Forget: %+v", res)
	}
	waitFor(t, "every worker to stop", func() bool { return clk.Waiters() == 0 })
}

func TestManagerIgnoresPodsWithoutProbesAndStopsOnStop(t *testing.T) {
	m, err := New(noRunner{}, nil, Options{Clock: testingclock.NewFakeClock(epoch)})
	if err != nil {
		t.Fatal(err)
	}
	pod := testPod(corev1.Container{Name: "app"})
	m.Sync(pod, state.PodRuntime{Containers: []state.Container{running("c1", epoch)}})
	if len(m.pods) != 0 {
		t.Errorf("a pod without probes is tracked")
	}
	pod.Spec.Containers[0].ReadinessProbe = execProbe(nil)
	m.probe = func(ctx context.Context, _ target) (outcome, string, error) {
		<-ctx.Done()
		return failure, "", ctx.Err()
	}
	m.Sync(pod, state.PodRuntime{Containers: []state.Container{running("c1", epoch)}})
	m.Stop() // returns although the probe was running
	m.Sync(pod, state.PodRuntime{Containers: []state.Container{running("c1", epoch)}})
	if len(m.pods) != 0 {
		t.Errorf("Sync after Stop started workers")
	}
}

func TestMetrics(t *testing.T) {
	pod := testPod(corev1.Container{Name: "app", LivenessProbe: execProbe(nil)})
	before := failedLiveness(t, pod)
	m, err := New(noRunner{}, nil, Options{Clock: testingclock.NewFakeClock(epoch)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	m.probe = func(context.Context, target) (outcome, string, error) { return failure, "", nil }
	pp := newPodProbes(pod)
	m.pods[pod.UID] = pp
	m.newWorker(pod, pp, workerKey{"c1", Liveness}, workerSpec{container: &pod.Spec.Containers[0], inst: running("c1", epoch)}).step(context.Background())
	if got := failedLiveness(t, pod) - before; got != 1 {
		t.Errorf("failed liveness probes counted %v, want 1", got)
	}
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range families {
		seen[f.GetName()] = true
	}
	if !seen["prober_probe_total"] {
		t.Error("prober_probe_total is not registered")
	}
}

func failedLiveness(t *testing.T, pod *corev1.Pod) float64 {
	t.Helper()
	var m dto.Metric
	if err := metrics.ProbeTotal.WithLabelValues("Liveness", "failed", "app", pod.Name, pod.Namespace, string(pod.UID)).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

package prober

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// noRunner is a CommandRunner for tests that replace the probe function.
type noRunner struct{}

func (noRunner) ExecSync(context.Context, string, []string, time.Duration) ([]byte, []byte, error) {
	return nil, nil, errors.New("not expected")
}

func execProbe(mod func(*corev1.Probe)) *corev1.Probe {
	p := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"check"}}}}
	if mod != nil {
		mod(p)
	}
	return p
}

func testPod(c corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-1"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{c}},
		Status:     corev1.PodStatus{PodIP: "10.0.0.9"},
	}
}

func running(id string, started time.Time) state.Container {
	return state.Container{ID: id, Name: "app", State: state.ContainerRunning, StartedAt: started, SandboxID: "sb"}
}

// probeStep is one step of a worker, at a time after the container started.
type probeStep struct {
	at  time.Duration
	out outcome
	err bool
	// started sets the container's startup result before the step.
	started bool

	probed bool  // the probe function must be called
	want   *bool // the result afterwards; nil for none
	stop   bool  // the worker must stop
	event  string
	// notified: the pod must be sent on the events channel.
	notified bool
}

var (
	yes = ptr.To(true)
	no  = ptr.To(false)
)

func TestWorkerStateMachine(t *testing.T) {
	tests := []struct {
		name      string
		probeType ProbeType
		probe     *corev1.Probe
		// withStartup gives the container a startup probe as well.
		withStartup bool
		initial     *bool
		steps       []probeStep
	}{
		{
			name: "readiness with defaults flips on one success and on three failures", probeType: Readiness,
			probe: execProbe(nil), initial: no,
			steps: []probeStep{
				{at: 0, out: success, probed: true, want: yes, notified: true},
				{at: 10 * time.Second, out: failure, probed: true, want: yes, event: "Warning Unhealthy Readiness probe failed: out"},
				{at: 20 * time.Second, out: failure, probed: true, want: yes, event: "Warning Unhealthy Readiness probe failed: out"},
				{at: 30 * time.Second, out: failure, probed: true, want: no, notified: true, event: "Warning Unhealthy Readiness probe failed: out"},
				{at: 40 * time.Second, out: failure, probed: true, want: no, event: "Warning Unhealthy Readiness probe failed: out"},
				{at: 50 * time.Second, out: success, probed: true, want: yes, notified: true},
			},
		},
		{
			name: "readiness needs successThreshold successes in a row", probeType: Readiness,
			probe: execProbe(func(p *corev1.Probe) { p.SuccessThreshold = 2 }), initial: no,
			steps: []probeStep{
				{out: success, probed: true, want: no},
				{out: failure, probed: true, want: no, event: "Warning Unhealthy Readiness probe failed: out"},
				{out: success, probed: true, want: no},
				{out: success, probed: true, want: yes, notified: true},
			},
		},
		{
			name: "no probe before initialDelaySeconds from the container's start", probeType: Readiness,
			probe: execProbe(func(p *corev1.Probe) { p.InitialDelaySeconds = 5 }), initial: no,
			steps: []probeStep{
				{at: 0, want: no},
				{at: 4 * time.Second, want: no},
				{at: 5 * time.Second, out: success, probed: true, want: yes, notified: true},
			},
		},
		{
			name: "a warning counts as success", probeType: Readiness,
			probe: execProbe(nil), initial: no,
			steps: []probeStep{
				{out: warning, probed: true, want: yes, notified: true, event: "Warning ProbeWarning Readiness probe warning: out"},
			},
		},
		{
			name: "liveness starts successful and stops at the failure threshold", probeType: Liveness,
			probe: execProbe(nil), initial: yes,
			steps: []probeStep{
				{out: failure, probed: true, want: yes, event: "Warning Unhealthy Liveness probe failed: out"},
				{out: failure, probed: true, want: yes, event: "Warning Unhealthy Liveness probe failed: out"},
				{out: success, probed: true, want: yes},
				{out: failure, probed: true, want: yes, event: "Warning Unhealthy Liveness probe failed: out"},
				{out: failure, probed: true, want: yes, event: "Warning Unhealthy Liveness probe failed: out"},
				{out: failure, probed: true, want: no, stop: true, notified: true, event: "Warning Unhealthy Liveness probe failed: out"},
			},
		},
		{
			name: "liveness with failureThreshold 1 fails on the first failure", probeType: Liveness,
			probe: execProbe(func(p *corev1.Probe) { p.FailureThreshold = 1 }), initial: yes,
			steps: []probeStep{
				{out: success, probed: true, want: yes},
				{out: failure, probed: true, want: no, stop: true, notified: true, event: "Warning Unhealthy Liveness probe failed: out"},
			},
		},
		{
			name: "liveness ignores a successThreshold above 1", probeType: Liveness,
			probe: execProbe(func(p *corev1.Probe) { p.SuccessThreshold = 3; p.FailureThreshold = 2 }), initial: yes,
			steps: []probeStep{
				{out: failure, probed: true, want: yes, event: "Warning Unhealthy Liveness probe failed: out"},
				{out: success, probed: true, want: yes},
				{out: failure, probed: true, want: yes, event: "Warning Unhealthy Liveness probe failed: out"},
				{out: failure, probed: true, want: no, stop: true, notified: true, event: "Warning Unhealthy Liveness probe failed: out"},
			},
		},
		{
			name: "an errored probe counts for nothing", probeType: Liveness,
			probe: execProbe(func(p *corev1.Probe) { p.FailureThreshold = 1 }), initial: yes,
			steps: []probeStep{
				{err: true, probed: true, want: yes, event: "Warning Unhealthy Liveness probe errored: runtime down"},
				{out: success, probed: true, want: yes},
			},
		},
		{
			name: "startup has no result until one, and stops after success", probeType: Startup,
			probe: execProbe(nil),
			steps: []probeStep{
				{out: failure, probed: true, event: "Warning Unhealthy Startup probe failed: out"},
				{out: failure, probed: true, event: "Warning Unhealthy Startup probe failed: out"},
				{out: success, probed: true, want: yes, stop: true, notified: true},
			},
		},
		{
			name: "startup fails at its failure threshold", probeType: Startup,
			probe: execProbe(func(p *corev1.Probe) { p.FailureThreshold = 2 }),
			steps: []probeStep{
				{out: failure, probed: true, event: "Warning Unhealthy Startup probe failed: out"},
				{out: failure, probed: true, want: no, stop: true, notified: true, event: "Warning Unhealthy Startup probe failed: out"},
			},
		},
		{
			name: "readiness waits for the startup probe", probeType: Readiness, withStartup: true,
			probe: execProbe(nil), initial: no,
			steps: []probeStep{
				{at: 0, want: no},
				{at: 10 * time.Second, want: no},
				{at: 20 * time.Second, started: true, out: success, probed: true, want: yes, notified: true},
			},
		},
		{
			name: "liveness waits for the startup probe", probeType: Liveness, withStartup: true,
			probe: execProbe(func(p *corev1.Probe) { p.FailureThreshold = 1 }), initial: yes,
			steps: []probeStep{
				{want: yes},
				{started: true, out: failure, probed: true, want: no, stop: true, notified: true, event: "Warning Unhealthy Liveness probe failed: out"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(epoch)
			rec := record.NewFakeRecorder(100)
			m, err := New(noRunner{}, rec, Options{Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Stop()
			probed := 0
			var stepNow probeStep
			m.probe = func(_ context.Context, tg target) (outcome, string, error) {
				probed++
				if tg.containerID != "c1" || tg.podIP != "10.0.0.9" {
					t.Errorf("probe target = %+v", tg)
				}
				if stepNow.err {
					return failure, "", errors.New("runtime down")
				}
				return stepNow.out, "out", nil
			}
			c := corev1.Container{Name: "app"}
			switch tt.probeType {
			case Readiness:
				c.ReadinessProbe = tt.probe
			case Liveness:
				c.LivenessProbe = tt.probe
			case Startup:
				c.StartupProbe = tt.probe
			}
			if tt.withStartup {
				c.StartupProbe = execProbe(nil)
			}
			pod := testPod(c)
			pp := newPodProbes(pod)
			m.pods[pod.UID] = pp
			key := workerKey{"c1", tt.probeType}
			w := m.newWorker(pod, pp, key, workerSpec{container: &pod.Spec.Containers[0], inst: running("c1", epoch)})
			checkResult(t, "initially", m, tt.probeType, tt.initial)

			for i, s := range tt.steps {
				clk.SetTime(epoch.Add(s.at))
				if s.started {
					pp.results[Startup]["c1"] = true
				}
				stepNow, probed = s, 0
				goOn := w.step(context.Background())
				if want := map[bool]int{true: 1, false: 0}[s.probed]; probed != want {
					t.Errorf("step %d: probe ran %d times, want %d", i, probed, want)
				}
				if goOn == s.stop {
					t.Errorf("step %d: worker goes on = %v, want %v", i, goOn, !s.stop)
				}
				checkResult(t, fmt.Sprintf("after step %d", i), m, tt.probeType, s.want)
				select {
				case e := <-m.events:
					if !s.notified {
						t.Errorf("step %d: unexpected pod event %v", i, e.Object.GetName())
					}
				default:
					if s.notified {
						t.Errorf("step %d: no pod event", i)
					}
				}
				select {
				case e := <-rec.Events:
					if e != s.event {
						t.Errorf("step %d: event %q, want %q", i, e, s.event)
					}
				default:
					if s.event != "" {
						t.Errorf("step %d: no event, want %q", i, s.event)
					}
				}
			}
		})
	}
}

func checkResult(t *testing.T, when string, m *Manager, pt ProbeType, want *bool) {
	t.Helper()
	res := m.Results("uid-1")
	got, found := map[ProbeType]map[string]bool{Startup: res.Startup, Readiness: res.Readiness, Liveness: res.Liveness}[pt]["c1"]
	switch {
	case want == nil && found:
		t.Errorf("%s: %s result = %v, want none", when, pt, got)
	case want != nil && !found:
		t.Errorf("%s: no %s result, want %v", when, pt, *want)
	case want != nil && got != *want:
		t.Errorf("%s: %s result = %v, want %v", when, pt, got, *want)
	}
}

func TestWorkerWaits(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	m, err := New(noRunner{}, nil, Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	pod := testPod(corev1.Container{Name: "app",
		ReadinessProbe: execProbe(func(p *corev1.Probe) { p.InitialDelaySeconds = 5; p.PeriodSeconds = 3 })})
	pp := newPodProbes(pod)
	w := m.newWorker(pod, pp, workerKey{"c1", Readiness}, workerSpec{
		container: &pod.Spec.Containers[0], inst: running("c1", epoch.Add(-2*time.Second)),
	})
	if got := w.nextWait(); got != 3*time.Second {
		t.Errorf("wait in the initial delay = %v, want the 3s left of it", got)
	}
	clk.Step(3 * time.Second)
	if got := w.nextWait(); got != 0 {
		t.Errorf("first wait after the initial delay = %v, want 0", got)
	}
	w.stepped = true
	if got := w.nextWait(); got != 3*time.Second {
		t.Errorf("wait after a probe = %v, want the period", got)
	}
	if !strings.Contains(w.ref.FieldPath, "spec.containers{app}") {
		t.Errorf("event field path = %q", w.ref.FieldPath)
	}
}

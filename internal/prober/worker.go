package prober

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/metrics"
)

// worker runs one probe of one container instance until it is stopped, its
// startup probe succeeded, or its liveness or startup probe failed (the
// container is then killed and a new instance gets new workers).
type worker struct {
	m          *Manager
	uid        types.UID
	key        workerKey
	container  *corev1.Container
	probe      *corev1.Probe
	startedAt  time.Time
	podIP      string
	hasStartup bool
	ref        *corev1.ObjectReference
	log        logr.Logger
	cancel     context.CancelFunc
	// wake makes a waiting worker probe at once.
	wake chan struct{}

	// Only the worker's goroutine uses these: whether step ran, and the
	// run of equal results so far.
	stepped bool
	lastOK  bool
	run     int
}

// loop probes once the initial delay is over, then every period, until
// step says to stop or ctx ends.
func (w *worker) loop(ctx context.Context) {
	for {
		if !w.sleep(ctx, w.nextWait()) {
			return
		}
		if !w.step(ctx) {
			return
		}
	}
}

// nextWait is the time until the next probe: what is left of the initial
// delay, else the period. The first probe after the delay runs at once.
func (w *worker) nextWait() time.Duration {
	if left := w.startedAt.Add(w.initialDelay()).Sub(w.m.clock.Now()); left > 0 {
		return left
	}
	if !w.stepped {
		return 0
	}
	return time.Duration(valueOr(w.probe.PeriodSeconds, defaultPeriodSeconds)) * time.Second
}

func (w *worker) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := w.m.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	case <-w.wake:
		return true
	}
}

func (w *worker) initialDelay() time.Duration {
	return time.Duration(w.probe.InitialDelaySeconds) * time.Second
}

// threshold returns how many equal results in a row make a result.
func (w *worker) threshold(ok bool) int {
	if !ok {
		return int(valueOr(w.probe.FailureThreshold, defaultFailureThreshold))
	}
	if w.key.probeType != Readiness {
		// Liveness and startup probes must use 1, as validation requires.
		return 1
	}
	return int(valueOr(w.probe.SuccessThreshold, defaultSuccessThreshold))
}

// step runs the probe once, unless the initial delay is not over or the
// container has not started, and records its result when a threshold is
// reached. It returns whether the worker goes on.
func (w *worker) step(ctx context.Context) bool {
	w.stepped = true
	if w.m.clock.Now().Before(w.startedAt.Add(w.initialDelay())) {
		return true
	}
	if w.key.probeType != Startup && w.hasStartup && !w.m.started(w.uid, w.key.containerID) {
		return true
	}
	ip := w.podIP
	if ip == "" {
		ip = w.m.podIP(w.uid)
	}
	start := w.m.clock.Now()
	res, output, err := w.m.probe(ctx, target{podIP: ip, container: w.container, containerID: w.key.containerID, probe: w.probe})
	metrics.ProbeDuration.WithLabelValues(string(w.key.probeType), w.container.Name, w.ref.Name, w.ref.Namespace).
		Observe(w.m.clock.Since(start).Seconds())
	if ctx.Err() != nil {
		// Stopped while probing: the result belongs to no one.
		return false
	}
	if err != nil {
		w.count(metrics.ProbeResultUnknown)
		w.log.V(1).Info("Probe errored", "err", err)
		w.m.event(w, corev1.EventTypeWarning, EventUnhealthy, "%s probe errored: %v", w.key.probeType, err)
		return true
	}
	ok := res != failure
	switch res {
	case failure:
		w.count(metrics.ProbeResultFailed)
		w.log.V(1).Info("Probe failed", "output", output)
		w.m.event(w, corev1.EventTypeWarning, EventUnhealthy, "%s probe failed: %s", w.key.probeType, output)
	case warning:
		w.count(metrics.ProbeResultSuccessful)
		w.m.event(w, corev1.EventTypeWarning, EventProbeWarning, "%s probe warning: %s", w.key.probeType, output)
	default:
		w.count(metrics.ProbeResultSuccessful)
	}
	if w.run > 0 && ok == w.lastOK {
		w.run++
	} else {
		w.lastOK, w.run = ok, 1
	}
	if w.run < w.threshold(ok) {
		return true
	}
	if w.m.setResult(w, ok) {
		w.log.V(1).Info("Probe result changed", "success", ok)
		w.m.notify(ctx, w)
	}
	switch {
	case w.key.probeType == Startup && ok:
		w.m.wakeSiblings(w)
		return false
	case w.key.probeType != Readiness && !ok:
		// The container is killed; its next instance gets a new worker.
		return false
	}
	return true
}

// count adds one probe with result to prober_probe_total.
func (w *worker) count(result string) {
	metrics.ProbeTotal.WithLabelValues(string(w.key.probeType), result, w.container.Name, w.ref.Name, w.ref.Namespace, string(w.uid)).Inc()
}

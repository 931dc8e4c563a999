package ctrlqueue

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"

	// Sets client-go's global workqueue metrics provider to
	// controller-runtime's, as nodelet's controllers do.
	_ "sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const period = 500 * time.Millisecond

// manualTimers is a clock that moves only when Step moves it, running the
// callbacks that fell due outside its lock.
type manualTimers struct {
	mu      sync.Mutex
	now     time.Time
	pending []*manualTimer
}

type manualTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func (m *manualTimers) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

func (m *manualTimers) AfterFunc(d time.Duration, f func()) stopper {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := &manualTimer{at: m.now.Add(d), f: f}
	m.pending = append(m.pending, t)
	return t
}

func (t *manualTimer) Stop() bool {
	was := !t.stopped
	t.stopped = true
	return was
}

// Step moves the clock by d, a due timer at a time, in order.
func (m *manualTimers) Step(d time.Duration) {
	m.mu.Lock()
	end := m.now.Add(d)
	m.mu.Unlock()
	for {
		m.mu.Lock()
		var next *manualTimer
		i := -1
		for j, t := range m.pending {
			if !t.at.After(end) && (next == nil || t.at.Before(next.at)) {
				next, i = t, j
			}
		}
		if next == nil {
			m.now = end
			m.mu.Unlock()
			return
		}
		m.pending = append(m.pending[:i], m.pending[i+1:]...)
		m.now = next.at
		m.mu.Unlock()
		if !next.stopped {
			next.f()
		}
	}
}

// armed counts the timers set and not stopped.
func (m *manualTimers) armed() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, t := range m.pending {
		if !t.stopped {
			n++
		}
	}
	return n
}

func newTimers() *manualTimers {
	return &manualTimers{now: time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)}
}

// ticks counts what ticker's channel holds, draining it.
func ticks(t *busyTicker) int {
	n := 0
	for {
		select {
		case <-t.C():
			n++
		default:
			return n
		}
	}
}

func TestTickerTicksOnlyWhileBusyAndOnceAfter(t *testing.T) {
	clk := newTimers()
	tk := newBusyTicker(clk)
	tk.start(period)
	steps := []struct {
		name      string
		do        func()
		advance   time.Duration
		wantTicks int
	}{
		{"idle", nil, 10 * period, 0},
		{"one item taken", tk.started, period, 1},
		{"still processing", nil, period, 1},
		{"a second item taken", tk.started, period, 1},
		{"one of two done", tk.finished, period, 1},
		{"the last one done", tk.finished, period, 1},
		{"idle again", nil, 10 * period, 0},
	}
	for _, s := range steps {
		if s.do != nil {
			s.do()
		}
		clk.Step(s.advance)
		if got := ticks(tk); got != s.wantTicks {
			t.Fatalf("%s: %d ticks after %s, want %d", s.name, got, s.advance, s.wantTicks)
		}
	}
	if n := clk.armed(); n != 0 {
		t.Errorf("an idle ticker left %d timers set", n)
	}
	tk.started()
	tk.Stop()
	clk.Step(10 * period)
	if got := ticks(tk); got != 0 {
		t.Errorf("%d ticks after Stop, want none", got)
	}
}

func TestTickerTakenAfterWorkStartedTicks(t *testing.T) {
	clk := newTimers()
	tk := newBusyTicker(clk)
	// The queue asks for its ticker from a goroutine of its own: an item
	// may be taken first.
	tk.started()
	clk.Step(period)
	if got := ticks(tk); got != 0 {
		t.Fatalf("%d ticks before the ticker was asked for", got)
	}
	tk.start(period)
	clk.Step(period)
	if got := ticks(tk); got != 1 {
		t.Fatalf("%d ticks a period after the ticker was asked for, want 1", got)
	}
}

// gauges records what the queue sets its unfinished-work gauge to.
type gauges struct {
	workqueue.MetricsProvider
	mu   sync.Mutex
	sets []float64
}

func (g *gauges) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric { return g }

func (g *gauges) Set(v float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sets = append(g.sets, v)
}

func (g *gauges) last() (float64, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.sets) == 0 {
		return 0, 0
	}
	return g.sets[len(g.sets)-1], len(g.sets)
}

type noop struct{}

func (noop) Inc()            {}
func (noop) Dec()            {}
func (noop) Set(float64)     {}
func (noop) Observe(float64) {}

type noopProvider struct{}

func (noopProvider) NewDepthMetric(string) workqueue.GaugeMetric            { return noop{} }
func (noopProvider) NewAddsMetric(string) workqueue.CounterMetric           { return noop{} }
func (noopProvider) NewLatencyMetric(string) workqueue.HistogramMetric      { return noop{} }
func (noopProvider) NewWorkDurationMetric(string) workqueue.HistogramMetric { return noop{} }
func (noopProvider) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noop{}
}
func (noopProvider) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noop{}
}
func (noopProvider) NewRetriesMetric(string) workqueue.CounterMetric { return noop{} }

// waitFor polls cond, which the queue's own goroutine makes true.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestQueueReportsUnfinishedWorkWhileProcessingOnly(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC))
	timers := newTimers()
	g := &gauges{MetricsProvider: noopProvider{}}
	q := newQueue("test", workqueue.DefaultTypedControllerRateLimiter[string](), clk, timers, g)
	defer q.ShutDown()

	q.Add("a")
	item, shutdown := q.Get()
	if shutdown || item != "a" {
		t.Fatalf("Get = %q, %v", item, shutdown)
	}
	// The queue's loop asks for its ticker from its own goroutine.
	tk := q.(*queue[string]).ticker
	waitFor(t, "the ticker to be asked for", func() bool {
		tk.mu.Lock()
		defer tk.mu.Unlock()
		return tk.period == period
	})
	step := func(d time.Duration) { clk.Step(d); timers.Step(d) }
	step(3 * period)
	waitFor(t, "unfinished work while processing", func() bool { v, _ := g.last(); return v > 0 })

	q.Done(item)
	step(period)
	waitFor(t, "unfinished work back to zero", func() bool { v, n := g.last(); return n > 0 && v == 0 })
	_, n := g.last()
	for range 10 {
		step(period)
	}
	// Give the loop time to act on a tick, had one been sent.
	time.Sleep(50 * time.Millisecond)
	if _, m := g.last(); m != n {
		t.Errorf("the idle queue set its gauge %d more times", m-n)
	}
}

// runs counts the runs of TestNewServesControllerRuntimesWorkqueueMetrics.
var runs int

// TestNewServesControllerRuntimesWorkqueueMetrics checks that the queue's
// metrics reach controller-runtime's registry, as its own queues' do: the
// queue leaves the provider to client-go's global one, which
// controller-runtime's controller package sets.
func TestNewServesControllerRuntimesWorkqueueMetrics(t *testing.T) {
	// A name of its own each run: the registry outlives a test run
	// (go test -count).
	runs++
	name := fmt.Sprintf("ctrlqueue-test-%d", runs)
	q := New(name, workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: "a"}})
	item, _ := q.Get()
	q.Done(item)

	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == name {
					found[f.GetName()] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	for _, want := range []string{"workqueue_adds_total", "workqueue_depth", "workqueue_unfinished_work_seconds",
		"workqueue_longest_running_processor_seconds", "workqueue_queue_duration_seconds", "workqueue_work_duration_seconds"} {
		if _, ok := found[want]; !ok {
			t.Errorf("no %s{name=%q} in controller-runtime's registry", want, name)
		}
	}
	if got := found["workqueue_adds_total"]; got != 1 {
		t.Errorf("workqueue_adds_total = %v, want 1", got)
	}
}

package ctrlqueue

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// New is a controller.Options NewQueue: a rate-limiting queue named after
// the controller whose unfinished-work gauges tick only while it works.
func New(controllerName string, rateLimiter workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return newQueue(controllerName, rateLimiter, clock.RealClock{}, realTimers{}, nil)
}

// newQueue makes the queue with clk, its ticker with timers, and with
// metrics (nil: the global provider, which controller-runtime sets to its
// own).
func newQueue[T comparable](name string, rateLimiter workqueue.TypedRateLimiter[T], clk clock.WithTicker, timers timers, metrics workqueue.MetricsProvider) workqueue.TypedRateLimitingInterface[T] {
	t := newBusyTicker(timers)
	// The queue's one ticker is its unfinished-work loop's; the delaying
	// layer above it keeps clk for its heartbeat and timers.
	inner := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[T]{
		Name:            name,
		MetricsProvider: metrics,
		Clock:           tickerClock{WithTicker: clk, ticker: t},
	})
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[T]{
		Name:            name,
		MetricsProvider: metrics,
		Clock:           clk,
		Queue:           inner,
	})
	q := workqueue.NewTypedRateLimitingQueueWithConfig(rateLimiter, workqueue.TypedRateLimitingQueueConfig[T]{
		Name:            name,
		MetricsProvider: metrics,
		Clock:           clk,
		DelayingQueue:   delaying,
	})
	return &queue[T]{TypedRateLimitingInterface: q, ticker: t}
}

// queue counts the items being processed, between Get and Done, for its
// ticker.
type queue[T comparable] struct {
	workqueue.TypedRateLimitingInterface[T]
	ticker *busyTicker
}

func (q *queue[T]) Get() (T, bool) {
	item, shutdown := q.TypedRateLimitingInterface.Get()
	if !shutdown {
		q.ticker.started()
	}
	return item, shutdown
}

func (q *queue[T]) Done(item T) {
	q.TypedRateLimitingInterface.Done(item)
	q.ticker.finished()
}

// tickerClock hands out ticker as the one ticker its queue asks for.
type tickerClock struct {
	clock.WithTicker
	ticker *busyTicker
}

func (c tickerClock) NewTicker(d time.Duration) clock.Ticker {
	c.ticker.start(d)
	return c.ticker
}

// busyTicker ticks every period while at least one item is being
// processed, and once more a period after the last one is done, so that
// the gauges go back to zero; while the queue is idle it has no timer.
type busyTicker struct {
	timers timers
	c      chan time.Time

	mu      sync.Mutex
	period  time.Duration // 0 until the queue asks for its ticker
	busy    int
	timer   stopper // set while a tick is due
	stopped bool
}

func newBusyTicker(timers timers) *busyTicker {
	// Room for one tick, as a time.Ticker has.
	return &busyTicker{timers: timers, c: make(chan time.Time, 1)}
}

// start makes the ticker tick every period from now on.
func (t *busyTicker) start(period time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.period = period
	t.armLocked()
}

func (t *busyTicker) C() <-chan time.Time { return t.c }

func (t *busyTicker) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
}

func (t *busyTicker) started() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.busy++
	t.armLocked()
}

func (t *busyTicker) finished() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.busy > 0 {
		t.busy--
	}
}

// armLocked sets a timer for the next tick when the queue is busy and none
// is set (t.mu held).
func (t *busyTicker) armLocked() {
	if t.stopped || t.period <= 0 || t.busy == 0 || t.timer != nil {
		return
	}
	t.timer = t.timers.AfterFunc(t.period, t.tick)
}

// tick delivers a tick, as a time.Ticker does (dropped when the last one
// was not read), and sets the next timer if the queue is still busy.
func (t *busyTicker) tick() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.timer = nil
	t.armLocked()
	select {
	case t.c <- t.timers.Now():
	default:
	}
}

// timers is what busyTicker needs of a clock. Its callbacks must not run
// with a lock the callback's calls need: the ticker sets its next timer
// from the callback.
type timers interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) stopper
}

// stopper is a timer that can be stopped.
type stopper interface{ Stop() bool }

type realTimers struct{}

func (realTimers) Now() time.Time                              { return time.Now() }
func (realTimers) AfterFunc(d time.Duration, f func()) stopper { return time.AfterFunc(d, f) }

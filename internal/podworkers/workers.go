package podworkers

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/metrics"
)

// Key identifies one pod instance: a namespace/name may be reused by a new
// pod with another UID, which gets a worker of its own.
type Key struct {
	Namespace, Name string
	UID             types.UID
}

// KeyOf returns the key of pod.
func KeyOf(pod *corev1.Pod) Key {
	return Key{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
}

// Work is what one sync is asked to do.
type Work struct {
	Key Key
	// Pod is the latest pod the worker was handed; nil when the worker was
	// started for a pod known only from the runtime (after a restart). It
	// may be the API cache's own object: nobody changes it.
	Pod *corev1.Pod
	// Gone: the pod is no longer in the API server (or has another UID
	// there): stop and remove everything of it.
	Gone bool

	// nudged: only Nudge asked for this sync, as of the runtime's state at
	// mark.
	nudged bool
	mark   uint64
}

// terminating reports whether the work stops the pod for good.
func (w Work) terminating() bool {
	return w.Gone || (w.Pod != nil && w.Pod.DeletionTimestamp != nil)
}

// Result is what a sync tells its worker.
type Result struct {
	// RequeueAfter asks for another sync after this long (0: only on the
	// next update).
	RequeueAfter time.Duration
	// Err asks for a retry with back-off.
	Err error
	// RetryWithin, with Err, caps the back-off: the sync knows the error
	// may clear soon and is cheap to try again (a claim waiting to be
	// bound).
	RetryWithin time.Duration
	// Finished: nothing is left to do for the pod; the worker ends. A
	// later Update starts a new one.
	Finished bool
	// Periodic marks RequeueAfter as the pod's periodic resync, which
	// comes as the kubelet's does: after 1 to 1.5 times RequeueAfter
	// (resyncJitter), on a whole second of the clock (resyncTick).
	Periodic bool
}

const (
	// resyncJitter is how much later than its period, at most, a periodic
	// resync comes, as a share of the period: the kubelet's pod workers
	// spread their resyncs so.
	resyncJitter = 0.5
	// resyncTick is the grid periodic resyncs fire on, as the kubelet's
	// sync loop picks the pods due at each tick of a one-second ticker:
	// the resyncs of many pods that fall due within a second wake the
	// process once, not once each.
	resyncTick = time.Second
)

// resyncAt returns when a periodic resync of period d, set at now, fires:
// after d jittered by up to resyncJitter of it (jitter, in [0, 1), draws
// where), then at the next whole resyncTick.
func resyncAt(now time.Time, d time.Duration, jitter float64) time.Time {
	at := now.Add(d + time.Duration(jitter*resyncJitter*float64(d)))
	if tick := at.Truncate(resyncTick); tick.Before(at) {
		at = tick.Add(resyncTick)
	}
	return at
}

// SyncFunc syncs one pod. It must return promptly once ctx is cancelled.
type SyncFunc func(ctx context.Context, w Work) Result

// Options configure Workers.
type Options struct {
	// Sync is called for each sync; required.
	Sync SyncFunc
	// BackOffBase and BackOffMax bound the retry delay after an error
	// (defaults 100ms and 30s); it doubles per consecutive error.
	BackOffBase, BackOffMax time.Duration
	// Clock times requeues and back-off; nil means the real clock.
	Clock clock.WithDelayedExecution
	// Logger logs sync errors; the zero Logger discards.
	Logger logr.Logger
	// Settled, when set, is asked before a sync that only Nudge asked for,
	// after a sync that succeeded: true skips it, the sync before having
	// seen and acted on the runtime as of mark.
	Settled func(w Work, mark uint64) bool
}

// Workers runs one worker per pod. It implements manager.Runnable: syncs
// run from Start on, and Start returns once every worker has stopped.
type Workers struct {
	opts Options

	mu  sync.Mutex
	ctx context.Context // nil until Start
	// stopped: Start's context ended; no worker starts a goroutine again.
	stopped bool
	workers map[types.UID]*worker
	// named indexes workers by their pod's namespace/name, which pods of
	// other UIDs may share (a pod deleted and created again): Named
	// answers without a look at every worker, per watch event of a pod.
	named map[types.NamespacedName][]types.UID
	// backOff is the wait after a pod's failed sync, by UID: BackOffBase
	// doubling to BackOffMax with each failure in a row, forgotten when a
	// sync succeeds or the worker goes.
	backOff workqueue.TypedRateLimiter[types.UID]
	wg      sync.WaitGroup
}

// New returns Workers running opts.Sync.
func New(opts Options) (*Workers, error) {
	if opts.Sync == nil {
		return nil, errors.New("creating pod workers: a sync function is required")
	}
	if opts.BackOffBase <= 0 {
		opts.BackOffBase = 100 * time.Millisecond
	}
	if opts.BackOffMax <= 0 {
		opts.BackOffMax = 30 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Workers{
		opts:    opts,
		workers: map[types.UID]*worker{},
		named:   map[types.NamespacedName][]types.UID{},
		backOff: workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](opts.BackOffBase, opts.BackOffMax),
	}, nil
}

// worker is the state of one pod's worker; fields are guarded by Workers.mu.
//
// A worker has a goroutine only while it has something to do: a sync
// wanted (dirty), or the timer of its last sync fired (due). An idle
// worker, a running pod's for most of its life, is this struct and maybe
// a runtime timer, not a goroutine and its stack.
type worker struct {
	key Key
	// pending is the work of the next sync; dirty says one is wanted.
	pending Work
	dirty   bool
	// active: a goroutine runs the worker's loop.
	active bool
	// timer is the requeue or back-off the last sync asked for; due says
	// it fired. timerGen tells a stopped timer's late callback from the
	// current one's.
	timer    clock.Timer
	timerGen uint64
	due      bool
	// synced says the last sync succeeded and did not finish the pod.
	synced bool
	// running is the work of the sync in flight (nil when idle) and
	// cancel its context's cancel function.
	running *Work
	cancel  context.CancelFunc
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every node
// runs its own pods.
func (p *Workers) NeedLeaderElection() bool { return false }

// Start runs the workers until ctx ends, then cancels every sync in flight
// and waits for the workers to stop.
func (p *Workers) Start(ctx context.Context) error {
	p.mu.Lock()
	p.ctx = ctx
	for _, w := range p.workers {
		p.wakeLocked(w)
	}
	p.mu.Unlock()
	<-ctx.Done()
	p.mu.Lock()
	p.stopped = true
	for _, w := range p.workers {
		p.stopTimerLocked(w)
		// A worker with a goroutine forgets itself when it returns.
		if !w.active {
			p.removeLocked(w)
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// Update hands the latest pod to its worker, starting one if needed, and
// asks for a sync. It never blocks.
func (p *Workers) Update(pod *corev1.Pod) {
	p.submit(Work{Key: KeyOf(pod), Pod: pod})
}

// Nudge asks the worker of uid, if there is one, for a sync because the
// runtime's objects of its pod changed, as seen at mark (see
// Options.Settled); it reports whether there was a worker. A nudge does
// not change the work: an Update or Gone not yet synced stays due.
func (p *Workers) Nudge(uid types.UID, mark uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.workers[uid]
	if w == nil {
		return false
	}
	if !w.dirty {
		w.pending.nudged = true
	}
	if w.pending.nudged {
		w.pending.mark = max(w.pending.mark, mark)
	}
	w.dirty = true
	p.wakeLocked(w)
	return true
}

// Gone tells the worker of key that its pod is no longer in the API
// server, starting a worker (with no pod) if there is none. last, if not
// nil, is the pod as last seen; otherwise the worker keeps the pod it had.
func (p *Workers) Gone(key Key, last *corev1.Pod) {
	p.submit(Work{Key: key, Pod: last, Gone: true})
}

func (p *Workers) submit(next Work) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.workers[next.Key.UID]
	if w == nil {
		w = &worker{key: next.Key}
		p.addLocked(w)
	}
	if next.Pod == nil {
		next.Pod = w.pending.Pod
	}
	// Once gone, always gone: a late update of the old object must not
	// bring the pod back.
	next.Gone = next.Gone || w.pending.Gone
	if w.running != nil && shouldCancel(*w.running, next) {
		w.cancel()
	}
	w.pending, w.dirty = next, true
	p.wakeLocked(w)
}

// shouldCancel reports whether the sync running for running must stop in
// favour of next: next terminates a pod that running was starting, or
// shortens the grace period running terminates with.
func shouldCancel(running, next Work) bool {
	if !next.terminating() {
		return false
	}
	if !running.terminating() {
		return true
	}
	return grace(next.Pod) < grace(running.Pod)
}

// grace is the deletion grace period of pod, or a large value when it has
// none.
func grace(pod *corev1.Pod) int64 {
	if pod == nil || pod.DeletionGracePeriodSeconds == nil {
		return 1 << 62
	}
	return *pod.DeletionGracePeriodSeconds
}

// Keys returns the keys of the pods that have a worker.
func (p *Workers) Keys() []Key {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := make([]Key, 0, len(p.workers))
	for _, w := range p.workers {
		keys = append(keys, w.key)
	}
	return keys
}

// Named returns the keys of the pods of namespace/name that have a
// worker: usually one, more while a pod of the name is replaced by one
// with another UID.
func (p *Workers) Named(namespace, name string) []Key {
	p.mu.Lock()
	defer p.mu.Unlock()
	uids := p.named[types.NamespacedName{Namespace: namespace, Name: name}]
	if len(uids) == 0 {
		return nil
	}
	keys := make([]Key, 0, len(uids))
	for _, uid := range uids {
		keys = append(keys, p.workers[uid].key)
	}
	return keys
}

// addLocked adds w; p.mu is held.
func (p *Workers) addLocked(w *worker) {
	p.workers[w.key.UID] = w
	n := types.NamespacedName{Namespace: w.key.Namespace, Name: w.key.Name}
	p.named[n] = append(p.named[n], w.key.UID)
}

// removeLocked removes w; p.mu is held.
func (p *Workers) removeLocked(w *worker) {
	delete(p.workers, w.key.UID)
	p.backOff.Forget(w.key.UID)
	n := types.NamespacedName{Namespace: w.key.Namespace, Name: w.key.Name}
	uids := slices.DeleteFunc(p.named[n], func(uid types.UID) bool { return uid == w.key.UID })
	if len(uids) == 0 {
		delete(p.named, n)
	} else {
		p.named[n] = uids
	}
}

// Has reports whether the pod with uid has a worker.
func (p *Workers) Has(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.workers[uid]
	return ok
}

// wakeLocked starts w's goroutine unless it has one, or the Workers have
// not started or have stopped; p.mu is held.
func (p *Workers) wakeLocked(w *worker) {
	if w.active || p.ctx == nil || p.stopped {
		return
	}
	w.active = true
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.run(w)
	}()
}

// run is w's goroutine: sync while there is work or a timer fired, then
// return, until the sync says the pod is finished or the Workers stop.
func (p *Workers) run(w *worker) {
	ctx := p.ctx
	for {
		p.mu.Lock()
		if ctx.Err() != nil {
			p.stopTimerLocked(w)
			w.active = false
			if p.workers[w.key.UID] == w {
				p.removeLocked(w)
			}
			p.mu.Unlock()
			return
		}
		if !w.dirty && !w.due {
			w.active = false
			p.mu.Unlock()
			return
		}
		// A requeue or a retry syncs whatever the nudge rules say.
		timed := w.due
		w.due = false
		work := w.pending
		w.dirty = false
		w.pending.nudged, w.pending.mark = false, 0
		if !timed && work.nudged && w.synced && p.opts.Settled != nil {
			p.mu.Unlock()
			if p.opts.Settled(work, work.mark) {
				// Any timer set by the last sync stays.
				metrics.PodWorkerSyncs.WithLabelValues("settled").Inc()
				continue
			}
			p.mu.Lock()
		}
		syncCtx, cancel := context.WithCancel(ctx)
		w.running, w.cancel = &work, cancel
		p.mu.Unlock()

		res := p.opts.Sync(syncCtx, work)
		cancelled := syncCtx.Err() != nil
		cancel()

		p.mu.Lock()
		w.running, w.cancel = nil, nil
		// The sync just run is the one a timer that fired during it
		// asked for.
		p.stopTimerLocked(w)
		if res.Finished && !w.dirty {
			w.active = false
			p.removeLocked(w)
			p.mu.Unlock()
			return
		}
		delay := res.RequeueAfter
		w.synced = !cancelled && res.Err == nil && !res.Finished
		outcome := "ok"
		switch {
		case cancelled:
			outcome = "canceled"
		case res.Err != nil:
			outcome = "error"
			delay = p.backOff.When(w.key.UID)
			if res.RetryWithin > 0 {
				delay = min(delay, res.RetryWithin)
			}
		default:
			p.backOff.Forget(w.key.UID)
			if res.Periodic && delay > 0 {
				now := p.opts.Clock.Now()
				delay = resyncAt(now, delay, rand.Float64()).Sub(now)
			}
		}
		if delay > 0 {
			p.armLocked(w, delay)
		}
		p.mu.Unlock()
		metrics.PodWorkerSyncs.WithLabelValues(outcome).Inc()
		if res.Err != nil && !cancelled {
			p.opts.Logger.Error(res.Err, "Pod sync failed", "pod", klog.KRef(w.key.Namespace, w.key.Name), "podUID", w.key.UID, "retryIn", delay)
		}
	}
}

// armLocked sets w's timer to make it due after d; p.mu is held.
func (p *Workers) armLocked(w *worker, d time.Duration) {
	w.timerGen++
	gen := w.timerGen
	w.timer = p.opts.Clock.AfterFunc(d, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if w.timerGen != gen {
			// Stopped or replaced after it fired.
			return
		}
		w.timer = nil
		w.due = true
		p.wakeLocked(w)
	})
}

// stopTimerLocked stops w's timer and forgets that it fired; p.mu is held.
func (p *Workers) stopTimerLocked(w *worker) {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.timerGen++
	w.due = false
}

package pleg

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/nodelet/nodelet/internal/metrics"
)

const (
	// DefaultRelistPeriod is the relist period when Options.RelistPeriod is
	// zero, as the kubelet's.
	DefaultRelistPeriod = time.Second
	// DefaultEventedRelistPeriod is the relist period, when
	// Options.EventedRelistPeriod is zero, while the runtime reports its
	// changes: a relist then only makes sure nothing was missed.
	DefaultEventedRelistPeriod = 10 * time.Second
	// DefaultHealthThreshold is how old the last successful relist may be
	// before Healthy fails, as the kubelet's PLEG check.
	DefaultHealthThreshold = 3 * time.Minute
	// DefaultChannelCapacity is the capacity of the events channel.
	DefaultChannelCapacity = 1000
)

// Lister is what a Relister needs of the runtime; cri.Runtime implements it
// and lists only nodelet's own objects. A lister may hand out an object it
// handed out before only while the object is unchanged (cri's brief lister
// does): a relist whose lists hold the same objects as the last one's
// reuses that relist's snapshot.
type Lister interface {
	ListPodSandboxes(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
}

// ChangeWatcher tells a relister when the runtime changed (cri.Client
// does, from containerd's events). WatchChanges calls subscribed once it
// has subscribed, then changed for every change, until ctx ends or the
// subscription fails, and returns why; an error wrapping
// errors.ErrUnsupported says the runtime has no changes to report.
type ChangeWatcher interface {
	WatchChanges(ctx context.Context, subscribed, changed func()) error
}

// Options configure a Relister.
type Options struct {
	// RelistPeriod is the time between two relists, and the shortest time
	// between two relists a change asks for. Zero means
	// DefaultRelistPeriod.
	RelistPeriod time.Duration
	// Changes, when set, reports the runtime's changes: while it is
	// subscribed, a change makes the relister list the runtime (no sooner
	// than RelistPeriod after the last relist), and without one it lists
	// every EventedRelistPeriod. Without Changes, or while it cannot
	// subscribe, the relister lists every RelistPeriod.
	Changes ChangeWatcher
	// EventedRelistPeriod is the time between two relists while Changes
	// is subscribed. Zero means DefaultEventedRelistPeriod.
	EventedRelistPeriod time.Duration
	// HealthThreshold is how old the last successful relist may be before
	// Healthy fails. Zero means DefaultHealthThreshold.
	HealthThreshold time.Duration
	// ChannelCapacity is the capacity of the events channel. Zero means
	// DefaultChannelCapacity.
	ChannelCapacity int
	// Clock drives the relist period and the health check. Nil means the
	// real clock.
	Clock clock.WithTicker
}

func (o Options) withDefaults() Options {
	if o.RelistPeriod <= 0 {
		o.RelistPeriod = DefaultRelistPeriod
	}
	if o.EventedRelistPeriod <= 0 {
		o.EventedRelistPeriod = DefaultEventedRelistPeriod
	}
	o.EventedRelistPeriod = max(o.EventedRelistPeriod, o.RelistPeriod)
	if o.HealthThreshold <= 0 {
		o.HealthThreshold = DefaultHealthThreshold
	}
	if o.ChannelCapacity <= 0 {
		o.ChannelCapacity = DefaultChannelCapacity
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Relister turns changes of the runtime's state into pod events. Create it
// with New, add it to the manager, and watch Events from the pod
// controller.
type Relister struct {
	lister Lister
	opts   Options
	events chan event.TypedGenericEvent[*corev1.Pod]

	// lastSuccess is the start of the last successful relist, in Unix
	// nanoseconds; read without mu so a hung relist cannot block Healthy.
	lastSuccess atomic.Int64
	// listed counts the relists that listed the runtime (see Listed);
	// last is the snapshot of the last one, read without mu so that a
	// sync does not wait for a relist in flight.
	listed atomic.Uint64
	last   atomic.Pointer[Snapshot]

	mu       sync.Mutex // serializes relists; guards the fields below
	snapshot Snapshot
	// sandboxes and containers remember the lists snapshot was made of.
	sandboxes  listed[*runtimeapi.PodSandbox]
	containers listed[*runtimeapi.Container]
	// builder builds each snapshot from the last, keeping the records of
	// the pods that did not change.
	builder snapshotBuilder
	pending map[types.UID]PodRef // changed pods the channel could not take yet
}

var (
	_ manager.Runnable               = (*Relister)(nil)
	_ manager.LeaderElectionRunnable = (*Relister)(nil)
)

// New returns a Relister over lister.
func New(lister Lister, opts Options) (*Relister, error) {
	if lister == nil {
		return nil, errors.New("creating relister: a runtime lister is required")
	}
	opts = opts.withDefaults()
	return &Relister{
		lister:  lister,
		opts:    opts,
		events:  make(chan event.TypedGenericEvent[*corev1.Pod], opts.ChannelCapacity),
		pending: map[types.UID]PodRef{},
	}, nil
}

// Events returns the channel of pod events. Each event's object is a pod
// stub with only Name, Namespace and UID set.
func (r *Relister) Events() <-chan event.TypedGenericEvent[*corev1.Pod] {
	return r.events
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every node
// runs its own relister.
func (r *Relister) NeedLeaderElection() bool { return false }

// Start relists every RelistPeriod until ctx is done, or, while
// Options.Changes reports the runtime's changes, when one is reported and
// every EventedRelistPeriod. A failed relist is logged and retried at the
// next RelistPeriod. It implements manager.Runnable.
func (r *Relister) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("pleg")
	ctx = log.IntoContext(ctx, logger)
	logger.Info("Starting relister", "period", r.opts.RelistPeriod, "eventedPeriod", r.opts.EventedRelistPeriod)
	w := &watch{wake: make(chan struct{}, 1)}
	if r.opts.Changes != nil {
		watchCtx, stopWatch := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.watchChanges(watchCtx, w)
		}()
		defer func() { stopWatch(); <-done }()
	}
	failures := 0
	for {
		start := r.opts.Clock.Now()
		failures = r.relistAndLog(ctx, failures)
		period := r.opts.RelistPeriod
		if w.subscribed.Load() && failures == 0 && !w.recentChange(r.opts.Clock, hotPeriods*r.opts.RelistPeriod) {
			period = r.opts.EventedRelistPeriod
		}
		select {
		case <-ctx.Done():
			logger.Info("Stopped relister")
			return nil
		case <-r.opts.Clock.After(period):
		case <-w.wake:
			// A change, or the subscription came or went: relist, but
			// no sooner than RelistPeriod after the last one started,
			// and not before the runtime's own handling of a change.
			if wait := max(r.opts.RelistPeriod-r.opts.Clock.Since(start), w.settling(r.opts.Clock)); wait > 0 {
				select {
				case <-ctx.Done():
					logger.Info("Stopped relister")
					return nil
				case <-r.opts.Clock.After(wait):
				}
			}
		}
	}
}

// A change is reported before the runtime's CRI service has handled it
// (containerd publishes a task's exit, then its CRI plugin records it):
// the relist a change asks for waits changeSettle, and the relister keeps
// listing every RelistPeriod for hotPeriods periods after a change, so
// that a relist that came too early is followed by one that sees it.
const (
	changeSettle = 100 * time.Millisecond
	hotPeriods   = 3
)

// watch is what the relist loop and watchChanges share: whether the
// runtime's changes are subscribed to, when the last change was reported,
// and a wake-up for the loop.
type watch struct {
	subscribed atomic.Bool
	changedAt  atomic.Int64 // Unix nanoseconds; 0 for none
	wake       chan struct{}
}

// changed records a change and wakes the loop.
func (w *watch) changed(clk clock.PassiveClock) {
	w.changedAt.Store(clk.Now().UnixNano())
	w.notify()
}

// settling returns how long the runtime may still be handling the last
// change reported: changeSettle from its report.
func (w *watch) settling(clk clock.PassiveClock) time.Duration {
	at := w.changedAt.Load()
	if at == 0 {
		return 0
	}
	return changeSettle - clk.Since(time.Unix(0, at))
}

// recentChange reports whether a change was reported within d.
func (w *watch) recentChange(clk clock.PassiveClock, d time.Duration) bool {
	at := w.changedAt.Load()
	return at != 0 && clk.Since(time.Unix(0, at)) < d
}

func (w *watch) notify() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Subscribing to the runtime's changes again after a failure waits
// between these two, doubling.
const (
	resubscribeMin = time.Second
	resubscribeMax = 30 * time.Second
)

// watchChanges keeps a subscription to the runtime's changes until ctx is
// done or the runtime says it has none. While one holds, w.subscribed is
// set; each change, and each subscription made or lost, wakes the relist
// loop: a relist right after subscribing catches what changed before it.
func (r *Relister) watchChanges(ctx context.Context, w *watch) {
	logger := log.FromContext(ctx)
	delay := resubscribeMin
	reported := false
	for {
		var began time.Time
		err := r.opts.Changes.WatchChanges(ctx,
			func() {
				began, reported = r.opts.Clock.Now(), false
				metrics.EventedPLEGConnections.Inc()
				w.subscribed.Store(true)
				w.notify()
			},
			func() { w.changed(r.opts.Clock) })
		if w.subscribed.Swap(false) {
			w.notify()
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errors.ErrUnsupported) {
			logger.Info("The runtime reports no changes; relisting every period", "err", err)
			return
		}
		metrics.EventedPLEGConnectionErrors.Inc()
		if !began.IsZero() && r.opts.Clock.Since(began) > resubscribeMax {
			delay = resubscribeMin
		}
		if reported && began.IsZero() {
			// Still down, or still refusing: said before.
			logger.V(1).Info("Unable to subscribe to the runtime's changes", "err", err, "retryIn", delay)
		} else {
			logger.Info("Lost the runtime's changes; relisting every period until subscribed again", "err", err, "retryIn", delay)
		}
		reported = true
		select {
		case <-ctx.Done():
			return
		case <-r.opts.Clock.After(delay):
		}
		delay = min(2*delay, resubscribeMax)
	}
}

// relistAndLog relists and logs the outcome without repeating itself every
// period while the runtime stays down: the first failure is an error, the
// following ones are debug messages, and the recovery is reported. It
// returns the number of consecutive failures.
func (r *Relister) relistAndLog(ctx context.Context, failures int) int {
	logger := log.FromContext(ctx)
	err := r.Relist(ctx)
	switch {
	case ctx.Err() != nil:
		return failures
	case err != nil && failures == 0:
		logger.Error(err, "Relist failed; retrying every period")
	case err != nil:
		logger.V(1).Info("Relist failed again", "failures", failures+1, "err", err)
	case failures > 0:
		logger.Info("Relist succeeded again", "failures", failures)
	}
	if err != nil {
		return failures + 1
	}
	return 0
}

// Relist lists the runtime once, sends an event for every pod that changed
// since the last successful relist (and for those not delivered before),
// and returns the error of listing, if any. Start calls it; tests and
// callers that want an immediate look may too.
func (r *Relister) Relist(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := r.opts.Clock.Now()
	defer func() { metrics.PLEGRelistDuration.Observe(r.opts.Clock.Since(start).Seconds()) }()

	cur, same, err := r.list(ctx)
	if err != nil {
		metrics.PLEGRelistErrors.Inc()
		return err
	}
	// The snapshot first: whoever reads Listed() = n reads relist n's
	// records or newer ones.
	if !same {
		r.last.Store(&cur)
	}
	r.listed.Add(1)
	var changes []PodChange
	if !same {
		changes = Diff(r.snapshot, cur)
	}
	r.snapshot = cur
	r.lastSuccess.Store(start.UnixNano())
	metrics.PLEGLastSeen.Set(float64(start.UnixNano()) / 1e9)
	r.deliver(ctx, changes)
	return nil
}

// list lists the runtime and returns its snapshot, and whether it is the
// last relist's: the lists hold the same objects (r.mu held).
func (r *Relister) list(ctx context.Context) (_ Snapshot, same bool, _ error) {
	sandboxes, err := r.lister.ListPodSandboxes(ctx, nil)
	if err != nil {
		return nil, false, fmt.Errorf("relisting sandboxes: %w", err)
	}
	containers, err := r.lister.ListContainers(ctx, nil)
	if err != nil {
		return nil, false, fmt.Errorf("relisting containers: %w", err)
	}
	if r.snapshot != nil && r.sandboxes.same(sandboxes) && r.containers.same(containers) {
		return r.snapshot, true, nil
	}
	// In a fixed order, as a snapshot names a pod after its first object:
	// a runtime lists in any.
	slices.SortFunc(sandboxes, func(a, b *runtimeapi.PodSandbox) int { return cmp.Compare(a.GetId(), b.GetId()) })
	slices.SortFunc(containers, func(a, b *runtimeapi.Container) int { return cmp.Compare(a.GetId(), b.GetId()) })
	r.sandboxes.remember(sandboxes)
	r.containers.remember(containers)
	return r.builder.build(r.snapshot, sandboxes, containers), false, nil
}

// listed remembers the objects of one kind a relist listed, to tell
// whether the next list holds the same objects without sorting it: a
// runtime lists in any order, and sorting was most of a relist that found
// nothing changed.
type listed[T comparable] struct {
	// at holds each object's position in the list remembered.
	at map[T]int
	// marks holds, by position, the check that last found the object.
	marks []uint64
	check uint64
}

// same reports whether list holds exactly the objects remembered, each
// once, in any order.
func (l *listed[T]) same(list []T) bool {
	if l.at == nil || len(list) != len(l.marks) {
		return false
	}
	l.check++
	for _, o := range list {
		i, ok := l.at[o]
		if !ok || l.marks[i] == l.check {
			return false
		}
		l.marks[i] = l.check
	}
	return true
}

// remember makes list's objects the ones remembered.
func (l *listed[T]) remember(list []T) {
	if l.at == nil {
		l.at = make(map[T]int, len(list))
	}
	clear(l.at)
	for i, o := range list {
		l.at[o] = i
	}
	l.marks = slices.Grow(l.marks[:0], len(list))[:len(list)]
}

// deliver sends one event per changed or still pending pod without
// blocking; what the channel cannot take stays pending for the next relist.
func (r *Relister) deliver(ctx context.Context, changes []PodChange) {
	logger := log.FromContext(ctx)
	for _, ch := range changes {
		logger.V(1).Info("Pod changed in runtime", "pod", klog.KRef(ch.Pod.Namespace, ch.Pod.Name), "podUID", ch.Pod.UID, "events", ch.Events)
		r.pending[ch.Pod.UID] = ch.Pod
	}
	for uid, ref := range r.pending {
		select {
		case r.events <- event.TypedGenericEvent[*corev1.Pod]{Object: podStub(ref)}:
			delete(r.pending, uid)
		default:
			logger.V(1).Info("Event channel full; deferring pod events to the next relist", "pending", len(r.pending))
			return
		}
	}
}

// podStub returns the pod object an event carries.
func podStub(ref PodRef) *corev1.Pod {
	p := &corev1.Pod{}
	p.Name, p.Namespace, p.UID = ref.Name, ref.Namespace, ref.UID
	return p
}

// Listed returns how many relists have listed the runtime. It grows once a
// relist has its list and before it sends that list's events: a reader
// that got n before reading the runtime itself has seen every change that
// the events of relists up to n report.
func (r *Relister) Listed() uint64 { return r.listed.Load() }

// Record returns the runtime objects of the pod with uid at the last
// relist (nil when it had none). A record is never modified once handed
// out: a pod whose objects did not change keeps its record from relist to
// relist, and one that changed gets a new one. The caller must not modify
// it.
func (r *Relister) Record(uid types.UID) *PodRecord {
	if s := r.last.Load(); s != nil {
		return (*s)[uid]
	}
	return nil
}

// Healthy returns an error when no relist has succeeded within
// HealthThreshold, or none yet.
func (r *Relister) Healthy() error {
	last := r.lastSuccess.Load()
	if last == 0 {
		return errors.New("PLEG has not relisted successfully yet")
	}
	if age := r.opts.Clock.Since(time.Unix(0, last)); age > r.opts.HealthThreshold {
		return fmt.Errorf("PLEG is not healthy: last successful relist %v ago; threshold is %v", age.Truncate(time.Second), r.opts.HealthThreshold)
	}
	return nil
}

// Snapshot returns the pods seen by the last successful relist. The caller
// must not modify it.
func (r *Relister) Snapshot() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snapshot
}

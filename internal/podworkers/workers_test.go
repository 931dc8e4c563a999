package podworkers

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func pod(uid string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-" + uid, UID: types.UID(uid)}}
}

func deleting(p *corev1.Pod, grace int64) *corev1.Pod {
	p = p.DeepCopy()
	now := metav1.Now()
	p.DeletionTimestamp = &now
	p.DeletionGracePeriodSeconds = ptr.To(grace)
	return p
}

// recorder is a SyncFunc whose behaviour each test sets, recording calls.
type recorder struct {
	mu    sync.Mutex
	calls []Work
	fn    func(ctx context.Context, w Work) Result
}

func (r *recorder) sync(ctx context.Context, w Work) Result {
	r.mu.Lock()
	r.calls = append(r.calls, w)
	fn := r.fn
	r.mu.Unlock()
	if fn == nil {
		return Result{}
	}
	return fn(ctx, w)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

func (r *recorder) last() Work {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[len(r.calls)-1]
}

func start(t *testing.T, r *recorder) *Workers {
	t.Helper()
	return startWith(t, Options{Sync: r.sync, BackOffBase: 10 * time.Millisecond, BackOffMax: 40 * time.Millisecond})
}

func startWith(t *testing.T, opts Options) *Workers {
	t.Helper()
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return p
}

func TestSlowSyncOfOnePodDoesNotHoldAnother(t *testing.T) {
	g := NewWithT(t)
	release := make(chan struct{})
	var fast sync.WaitGroup
	fast.Add(1)
	r := &recorder{fn: func(ctx context.Context, w Work) Result {
		if w.Key.UID == "slow" {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return Result{}
		}
		fast.Done()
		return Result{}
	}}
	p := start(t, r)
	p.Update(pod("slow"))
	g.Eventually(r.count).Should(Equal(1))
	p.Update(pod("fast"))
	done := make(chan struct{})
	go func() { fast.Wait(); close(done) }()
	g.Eventually(done).WithTimeout(time.Second).Should(BeClosed())
	close(release)
}

func TestUpdatesDuringASyncAreCoalesced(t *testing.T) {
	g := NewWithT(t)
	release := make(chan struct{})
	r := &recorder{fn: func(ctx context.Context, w Work) Result {
		if w.Pod.Labels["v"] == "" {
			<-release
		}
		return Result{}
	}}
	p := start(t, r)
	p.Update(pod("a"))
	g.Eventually(r.count).Should(Equal(1))
	for i := range 5 {
		next := pod("a")
		next.Labels = map[string]string{"v": string(rune('1' + i))}
		p.Update(next)
	}
	close(release)
	g.Eventually(r.count).Should(Equal(2))
	g.Consistently(r.count, 100*time.Millisecond).Should(Equal(2))
	g.Expect(r.last().Pod.Labels["v"]).To(Equal("5"), "the second sync sees the latest pod")
}

func TestDeletionCancelsASyncOfTheLivePod(t *testing.T) {
	g := NewWithT(t)
	cancelled := make(chan struct{})
	r := &recorder{fn: func(ctx context.Context, w Work) Result {
		if w.Pod.DeletionTimestamp == nil {
			<-ctx.Done() // a pull that never completes
			close(cancelled)
			return Result{Err: ctx.Err()}
		}
		return Result{Finished: true}
	}}
	p := start(t, r)
	p.Update(pod("a"))
	g.Eventually(r.count).Should(Equal(1))
	p.Update(deleting(pod("a"), 30))
	g.Eventually(cancelled).Should(BeClosed())
	g.Eventually(func() bool { return p.Has("a") }).Should(BeFalse(), "the terminating sync finished the worker")
	g.Expect(r.count()).To(Equal(2))
}

func TestTerminationIsCancelledOnlyByAShorterGracePeriod(t *testing.T) {
	g := NewWithT(t)
	var cancels int
	var mu sync.Mutex
	r := &recorder{fn: func(ctx context.Context, w Work) Result {
		select {
		case <-ctx.Done():
			mu.Lock()
			cancels++
			mu.Unlock()
			return Result{}
		case <-time.After(300 * time.Millisecond):
			return Result{Finished: true}
		}
	}}
	p := start(t, r)
	p.Update(deleting(pod("a"), 30))
	g.Eventually(r.count).Should(Equal(1))
	p.Update(deleting(pod("a"), 30)) // the same grace: no cancel
	p.Gone(KeyOf(pod("a")), nil)     // gone, with the grace it had
	g.Consistently(func() int { mu.Lock(); defer mu.Unlock(); return cancels }, 100*time.Millisecond).Should(Equal(0))
	p.Update(deleting(pod("a"), 1))
	g.Eventually(func() int { mu.Lock(); defer mu.Unlock(); return cancels }).Should(Equal(1))
	g.Eventually(func() bool { return p.Has("a") }).Should(BeFalse())
	g.Expect(r.last().Gone).To(BeTrue(), "a late update does not bring a gone pod back")
}

func TestRequeueAndBackOff(t *testing.T) {
	g := NewWithT(t)
	r := &recorder{fn: func(context.Context, Work) Result { return Result{Err: errors.New("boom")} }}
	p := start(t, r)
	p.Update(pod("a"))
	g.Eventually(r.count).Should(BeNumerically(">=", 4), "errors are retried")
	r.mu.Lock()
	r.fn = func(context.Context, Work) Result { return Result{RequeueAfter: 20 * time.Millisecond} }
	r.mu.Unlock()
	n := r.count()
	g.Eventually(r.count).Should(BeNumerically(">=", n+3), "RequeueAfter syncs again")
}

// A sync that says its error may clear soon is retried within that time,
// however many times it failed before.
func TestRetryWithinCapsTheBackOff(t *testing.T) {
	g := NewWithT(t)
	r := &recorder{fn: func(context.Context, Work) Result { return Result{Err: errors.New("claim not bound")} }}
	p, err := New(Options{Sync: r.sync, BackOffBase: 10 * time.Millisecond, BackOffMax: time.Hour})
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	p.Update(pod("a"))
	// The back-off doubles from 10ms: ten more failures without a cap
	// would take over ten seconds.
	g.Eventually(r.count).Should(BeNumerically(">=", 6))
	r.mu.Lock()
	r.fn = func(context.Context, Work) Result {
		return Result{Err: errors.New("claim not bound"), RetryWithin: 20 * time.Millisecond}
	}
	r.mu.Unlock()
	n := r.count()
	g.Eventually(r.count, 10*time.Second).Should(BeNumerically(">=", n+10), "retried within RetryWithin, not the grown back-off")
}

func TestGoneWithoutAnUpdateStartsAWorker(t *testing.T) {
	g := NewWithT(t)
	r := &recorder{fn: func(context.Context, Work) Result { return Result{Finished: true} }}
	p := start(t, r)
	p.Gone(Key{Namespace: "ns", Name: "orphan", UID: "o"}, nil)
	g.Eventually(r.count).Should(Equal(1))
	g.Expect(r.last().Gone).To(BeTrue())
	g.Expect(r.last().Pod).To(BeNil())
	g.Eventually(func() bool { return p.Has("o") }).Should(BeFalse())
}

// settledAt is an Options.Settled that says a nudge up to mark is settled,
// recording the marks it was asked about.
type settledAt struct {
	mu    sync.Mutex
	upTo  uint64
	asked []uint64
}

func (s *settledAt) settled(_ Work, mark uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, mark)
	return mark <= s.upTo
}

func (s *settledAt) questions() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint64(nil), s.asked...)
}

func startSettled(t *testing.T, r *recorder, s *settledAt) *Workers {
	t.Helper()
	// Retries after an error wait an hour: only a nudge or an update syncs.
	return startWith(t, Options{Sync: r.sync, Settled: s.settled, BackOffBase: time.Hour, BackOffMax: time.Hour})
}

func TestNudgeSkipsASyncOnlyWhenSettled(t *testing.T) {
	g := NewWithT(t)
	r := &recorder{}
	s := &settledAt{upTo: 5}
	p := startSettled(t, r, s)

	g.Expect(p.Nudge("a", 1)).To(BeFalse(), "no worker: the caller must pass the event on")
	p.Update(pod("a"))
	g.Eventually(r.count).Should(Equal(1))

	g.Expect(p.Nudge("a", 3)).To(BeTrue())
	g.Eventually(s.questions).Should(Equal([]uint64{3}))
	g.Consistently(r.count, 100*time.Millisecond).Should(Equal(1), "a settled nudge syncs nothing")

	p.Nudge("a", 6)
	g.Eventually(r.count).Should(Equal(2), "a change the last sync did not see is synced")
	g.Expect(s.questions()).To(Equal([]uint64{3, 6}))
}

func TestNudgeNeverSkipsOtherWork(t *testing.T) {
	g := NewWithT(t)
	var mu sync.Mutex
	next := Result{Err: errors.New("boom")}
	setNext := func(res Result) {
		mu.Lock()
		next = res
		mu.Unlock()
	}
	r := &recorder{fn: func(context.Context, Work) Result {
		mu.Lock()
		defer mu.Unlock()
		return next
	}}
	s := &settledAt{upTo: 100}
	p := startSettled(t, r, s)

	// After a failed sync a nudge syncs, without asking.
	p.Update(pod("a"))
	g.Eventually(r.count).Should(Equal(1))
	setNext(Result{})
	p.Nudge("a", 1)
	g.Eventually(r.count).Should(Equal(2))
	g.Expect(s.questions()).To(BeEmpty())

	// An update pending with the nudge is synced.
	p.Update(pod("a"))
	p.Nudge("a", 2)
	g.Eventually(r.count).Should(Equal(3))
	g.Consistently(r.count, 50*time.Millisecond).Should(Equal(3))

	// A skipped nudge keeps the timer the last sync asked for.
	setNext(Result{RequeueAfter: 300 * time.Millisecond})
	p.Update(pod("a"))
	g.Eventually(r.count).Should(Equal(4))
	setNext(Result{})
	p.Nudge("a", 3)
	g.Eventually(s.questions).Should(ContainElement(uint64(3)))
	g.Expect(r.count()).To(Equal(4), "the nudge was settled")
	g.Eventually(r.count, 2*time.Second).Should(Equal(5), "the requeue still fires")
}

// Workers between syncs, every running pod's for most of its life, hold no
// goroutine; a requeue timer or an update starts one again.
// asyncClock is a fake clock whose AfterFunc callbacks run on goroutines of
// their own, as the real clock's do. The fake clock runs them in Step,
// holding its lock, which a worker arming its timer under the workers'
// lock also takes: the two would deadlock, which the real clock cannot.
type asyncClock struct{ *testingclock.FakeClock }

func (c asyncClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return c.FakeClock.AfterFunc(d, func() { go f() })
}

func TestIdleWorkersHoldNoGoroutines(t *testing.T) {
	g := NewWithT(t)
	clk := asyncClock{testingclock.NewFakeClock(time.Now())}
	r := &recorder{fn: func(context.Context, Work) Result { return Result{RequeueAfter: time.Minute} }}
	before := runtime.NumGoroutine()
	p := startWith(t, Options{Sync: r.sync, Clock: clk})
	const pods = 50
	for i := range pods {
		p.Update(pod(strconv.Itoa(i)))
	}
	g.Eventually(r.count).Should(Equal(pods))
	g.Eventually(runtime.NumGoroutine).Should(BeNumerically("<", before+pods/5), "idle workers")
	g.Expect(p.Keys()).To(HaveLen(pods))

	clk.Step(time.Minute)
	g.Eventually(r.count).Should(Equal(2*pods), "each requeue timer starts its worker again")
	g.Eventually(runtime.NumGoroutine).Should(BeNumerically("<", before+pods/5))
	p.Update(pod("0"))
	g.Eventually(r.count).Should(Equal(2*pods+1), "so does an update")
}

// Stopping the workers stops the timers of idle ones: nothing syncs after
// Start returned, and no worker is left.
func TestStopStopsIdleWorkersTimers(t *testing.T) {
	g := NewWithT(t)
	clk := asyncClock{testingclock.NewFakeClock(time.Now())}
	r := &recorder{fn: func(context.Context, Work) Result { return Result{RequeueAfter: time.Minute} }}
	p, err := New(Options{Sync: r.sync, Clock: clk})
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Start(ctx); close(done) }()
	p.Update(pod("a"))
	g.Eventually(r.count).Should(Equal(1))
	g.Eventually(clk.HasWaiters).Should(BeTrue(), "the requeue timer is set")
	cancel()
	g.Eventually(done).Should(BeClosed())
	g.Expect(clk.HasWaiters()).To(BeFalse(), "the timer was stopped")
	clk.Step(time.Minute)
	g.Consistently(r.count, 100*time.Millisecond).Should(Equal(1))
	g.Expect(p.Has("a")).To(BeFalse())
}

func TestNamedFollowsTheWorkersOfAName(t *testing.T) {
	g := NewWithT(t)
	release := make(chan struct{})
	r := &recorder{fn: func(ctx context.Context, w Work) Result {
		if w.Gone {
			return Result{Finished: true}
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return Result{}
	}}
	p := start(t, r)
	named := func(uid string) *corev1.Pod {
		pd := pod(uid)
		pd.Name = "web"
		return pd
	}
	p.Update(named("a"))
	p.Update(named("b"))
	p.Update(pod("c"))
	uids := func() []types.UID {
		var out []types.UID
		for _, k := range p.Named("ns", "web") {
			g.Expect(k.Namespace).To(Equal("ns"))
			g.Expect(k.Name).To(Equal("web"))
			out = append(out, k.UID)
		}
		return out
	}
	g.Expect(uids()).To(ConsistOf(types.UID("a"), types.UID("b")))
	g.Expect(p.Named("ns", "p-c")).To(ConsistOf(Key{Namespace: "ns", Name: "p-c", UID: "c"}))
	g.Expect(p.Named("other", "web")).To(BeEmpty())

	close(release)
	p.Gone(KeyOf(named("a")), nil)
	g.Eventually(uids).Should(ConsistOf(types.UID("b")))
	p.Gone(KeyOf(named("b")), nil)
	g.Eventually(uids).Should(BeEmpty())
	g.Expect(p.named).NotTo(HaveKey(types.NamespacedName{Namespace: "ns", Name: "web"}))
	// A new pod of the name gets a worker, and is named, again.
	p.Update(named("d"))
	g.Expect(uids()).To(ConsistOf(types.UID("d")))
}

func TestResyncAtIsJitteredOnWholeSeconds(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 300_000_000, time.UTC)
	for _, tt := range []struct {
		jitter float64
		want   time.Time
	}{
		// 12:01:00.3 is not a whole second: the next one.
		{0, time.Date(2026, 3, 1, 12, 1, 1, 0, time.UTC)},
		// 12:01:15.3
		{0.5, time.Date(2026, 3, 1, 12, 1, 16, 0, time.UTC)},
		// 12:01:29.9 (the draw is below 1)
		{0.98, time.Date(2026, 3, 1, 12, 1, 30, 0, time.UTC)},
	} {
		if got := resyncAt(now, time.Minute, tt.jitter); !got.Equal(tt.want) {
			t.Errorf("jitter %v: %s, want %s", tt.jitter, got, tt.want)
		}
	}
	// On a whole second already, it stays there.
	whole := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if got := resyncAt(whole, time.Minute, 0); !got.Equal(whole.Add(time.Minute)) {
		t.Errorf("from a whole second: %s, want %s", got, whole.Add(time.Minute))
	}
}

// A periodic requeue comes no sooner than its period and no later than
// 1.5 times it and a second; the other requeues come when asked.
func TestPeriodicResyncComesAsTheKubelets(t *testing.T) {
	g := NewWithT(t)
	clk := asyncClock{testingclock.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 300_000_000, time.UTC))}
	r := &recorder{fn: func(_ context.Context, w Work) Result {
		return Result{RequeueAfter: time.Minute, Periodic: w.Key.Name != "p-exact"}
	}}
	p := startWith(t, Options{Sync: r.sync, Clock: clk})
	const pods = 20
	for i := range pods {
		p.Update(pod(strconv.Itoa(i)))
	}
	p.Update(pod("exact"))
	g.Eventually(r.count).Should(Equal(pods + 1))

	clk.Step(time.Minute)
	g.Eventually(r.count).Should(Equal(pods+2), "the exact requeue")
	g.Expect(r.last().Key.Name).To(Equal("p-exact"))
	clk.Step(500 * time.Millisecond)
	g.Consistently(r.count, 200*time.Millisecond).Should(Equal(pods+2), "no periodic resync before 12:01:01")
	clk.Step(30*time.Second - 300*time.Millisecond)
	g.Eventually(r.count).Should(Equal(2*pods+2), "every periodic resync by 12:01:30")
}

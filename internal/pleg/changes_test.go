package pleg

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// fakeChanges is a ChangeWatcher the test drives: each WatchChanges call
// subscribes at once (unless refuse is set), reports a change for every
// value sent on changes, and ends with the error sent on fail.
type fakeChanges struct {
	calls   atomic.Int32
	refuse  atomic.Pointer[error]
	changes chan struct{}
	fail    chan error
}

func newFakeChanges() *fakeChanges {
	return &fakeChanges{changes: make(chan struct{}), fail: make(chan error)}
}

func (f *fakeChanges) WatchChanges(ctx context.Context, subscribed, changed func()) error {
	f.calls.Add(1)
	if err := f.refuse.Load(); err != nil {
		return *err
	}
	subscribed()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-f.fail:
			return err
		case <-f.changes:
			changed()
		}
	}
}

// startWithChanges runs a relister (period 1 s, 10 s while subscribed)
// over changes until the test ends, once it has made its first relist.
func startWithChanges(t *testing.T, g *WithT, changes *fakeChanges) *env {
	t.Helper()
	e := newEnv(t, Options{RelistPeriod: time.Second, EventedRelistPeriod: 10 * time.Second, Changes: changes})
	startRelister(t, e)
	g.Eventually(e.r.Listed).Should(Equal(uint64(1)))
	return e
}

// startRelister runs e's relister until the test ends.
func startRelister(t *testing.T, e *env) {
	t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- e.r.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
}

// step moves e's clock by d once the relister has had time to wait on it,
// and checks how many relists have been made then.
func step(g *WithT, e *env, d time.Duration, listed uint64) {
	g.THelper()
	time.Sleep(20 * time.Millisecond) // the loop blocks on the clock again
	e.clock.Step(d)
	g.Eventually(e.r.Listed).Should(Equal(listed), "after a step of %s", d)
	g.Consistently(e.r.Listed, 30*time.Millisecond).Should(Equal(listed), "after a step of %s", d)
}

func TestStartWithChangesRelistsWhenTheRuntimeChangedAndRarelyOtherwise(t *testing.T) {
	g := NewWithT(t)
	changes := newFakeChanges()
	e := startWithChanges(t, g, changes)

	// The subscription asks for a relist, one period after the first:
	// what changed before it started is seen.
	step(g, e, time.Second, 2)
	// Subscribed and quiet: no relist for nine periods, one at the tenth.
	for range 8 {
		step(g, e, time.Second, 2)
	}
	step(g, e, 2*time.Second, 3)

	// A change: a relist once the runtime has handled it, then one every
	// period for three periods (a relist may come before the runtime's
	// CRI service shows the change), then quiet again.
	step(g, e, 5*time.Second, 3)
	changes.changes <- struct{}{}
	g.Consistently(e.r.Listed, 50*time.Millisecond).Should(Equal(uint64(3)), "a relist before the runtime handled the change")
	step(g, e, changeSettle, 4)
	step(g, e, time.Second, 5)
	step(g, e, time.Second, 6)
	step(g, e, time.Second, 7)
	step(g, e, time.Second, 7)

	// Two changes within a period make one relist, a period after the
	// last relist.
	step(g, e, 5*time.Second, 7)
	changes.changes <- struct{}{}
	step(g, e, changeSettle, 8)
	changes.changes <- struct{}{}
	changes.changes <- struct{}{}
	step(g, e, changeSettle, 8)
	step(g, e, time.Second-changeSettle, 9)
}

func TestStartRelistsEveryPeriodWhileTheSubscriptionIsLost(t *testing.T) {
	g := NewWithT(t)
	changes := newFakeChanges()
	e := startWithChanges(t, g, changes)
	step(g, e, time.Second, 2)
	step(g, e, 3*time.Second, 2)

	// The stream fails (the runtime restarts): relists every period, and
	// a new subscription a second later.
	refused := errors.New("connection refused")
	changes.refuse.Store(&refused)
	changes.fail <- fmt.Errorf("stream ended: %w", context.Canceled)
	step(g, e, changeSettle, 3)
	step(g, e, time.Second, 4)
	g.Expect(changes.calls.Load()).To(BeNumerically(">=", 2), "subscribed again after a second")
	step(g, e, time.Second, 5)
	step(g, e, time.Second, 6)

	// The runtime is back: subscribed again within the back-off (1, 2,
	// 4 s...), relisting every period until then.
	changes.refuse.Store(nil)
	calls := changes.calls.Load()
	for n := e.r.Listed(); changes.calls.Load() == calls; n++ {
		step(g, e, time.Second, n+1)
	}
	// Then the relist the new subscription asks for, a period after the
	// last, and quiet.
	n := e.r.Listed()
	step(g, e, time.Second, n+1)
	for range 5 {
		step(g, e, time.Second, n+1)
	}
}

func TestStartRelistsEveryPeriodWhenTheRuntimeHasNoChangesToReport(t *testing.T) {
	g := NewWithT(t)
	changes := newFakeChanges()
	unsupported := fmt.Errorf("no events here: %w", errors.ErrUnsupported)
	changes.refuse.Store(&unsupported)
	e := startWithChanges(t, g, changes)
	for i := uint64(2); i < 6; i++ {
		step(g, e, time.Second, i)
	}
	g.Expect(changes.calls.Load()).To(Equal(int32(1)), "not asked again")
}

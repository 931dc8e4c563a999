package executor

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// waiting returns once n calls wait for a slot of g.
func waiting(t *testing.T, g *StartGate, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		g.mu.Lock()
		got := g.waiters.Len()
		g.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls wait, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// hold takes a slot of g for uid until the returned func is called.
func hold(t *testing.T, g *StartGate, uid types.UID) (release func()) {
	t.Helper()
	held, done := make(chan struct{}), make(chan struct{})
	go func() {
		_ = g.Do(context.Background(), uid, func() error {
			close(held)
			<-done
			return nil
		})
	}()
	<-held
	return func() { close(done) }
}

func TestNilStartGateRunsAtOnce(t *testing.T) {
	var g *StartGate
	want := errors.New("boom")
	if err := g.Do(context.Background(), "a", func() error { return want }); !errors.Is(err, want) {
		t.Fatalf("Do = %v, want %v", err, want)
	}
	g.Forget("a")
}

func TestStartGateBoundsCalls(t *testing.T) {
	const slots, calls = 3, 20
	g := NewStartGate(slots)
	var running, peak atomic.Int32
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			_ = g.Do(context.Background(), types.UID(rune('a'+i)), func() error {
				n := running.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				time.Sleep(2 * time.Millisecond)
				running.Add(-1)
				return nil
			})
		})
	}
	wg.Wait()
	if p := peak.Load(); p > slots || p < 2 {
		t.Fatalf("at most %d calls ran at once, want 2 to %d", p, slots)
	}
	if g.free != slots {
		t.Fatalf("%d slots free after all calls, want %d", g.free, slots)
	}
}

// served has each of uids make a first call, in that order, then forgets
// the pods in forget, then queues a second call of each pod in queued
// order behind a held slot, and returns the order they ran in.
func served(t *testing.T, uids, forget, queued []types.UID) []types.UID {
	t.Helper()
	g := NewStartGate(1)
	ctx := context.Background()
	for _, uid := range uids {
		if err := g.Do(ctx, uid, func() error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	for _, uid := range forget {
		g.Forget(uid)
	}
	release := hold(t, g, "x")
	var mu sync.Mutex
	var order []types.UID
	var wg sync.WaitGroup
	for i, uid := range queued {
		wg.Go(func() {
			_ = g.Do(ctx, uid, func() error {
				mu.Lock()
				order = append(order, uid)
				mu.Unlock()
				return nil
			})
		})
		waiting(t, g, i+1)
	}
	release()
	wg.Wait()
	return order
}

func TestStartGateServesPodsInTheOrderTheyCame(t *testing.T) {
	// a, b and c came in this order; their next calls queue in the
	// opposite order, behind the new pod d.
	order := served(t, []types.UID{"a", "b", "c"}, nil, []types.UID{"d", "c", "b", "a"})
	if !slices.Equal(order, []types.UID{"a", "b", "c", "d"}) {
		t.Fatalf("ran %v, want [a b c d]", order)
	}
}

func TestStartGateForgottenPodGoesLast(t *testing.T) {
	order := served(t, []types.UID{"a", "b"}, []types.UID{"a"}, []types.UID{"a", "b"})
	if !slices.Equal(order, []types.UID{"b", "a"}) {
		t.Fatalf("ran %v, want b before the forgotten a", order)
	}
}

func TestStartGateCallEndedWhileWaitingDoesNotRunNorKeepASlot(t *testing.T) {
	g := NewStartGate(1)
	release := hold(t, g, "x")
	ctx, cancel := context.WithCancel(context.Background())
	ran := false
	errc := make(chan error)
	go func() {
		errc <- g.Do(ctx, "a", func() error { ran = true; return nil })
	}()
	waiting(t, g, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want context.Canceled", err)
	}
	if ran {
		t.Fatal("the call ran after its context ended")
	}
	waiting(t, g, 0)
	release()
	// The slot came back: a call goes through at once.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if err := g.Do(ctx2, "b", func() error { return nil }); err != nil {
		t.Fatalf("Do after release = %v", err)
	}
}

func TestStartGateSlowCallGivesItsSlotOn(t *testing.T) {
	g := NewStartGate(1)
	g.slow = 10 * time.Millisecond
	stuck := make(chan struct{})
	defer close(stuck)
	go func() {
		_ = g.Do(context.Background(), "hung", func() error { <-stuck; return nil })
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.Do(ctx, "next", func() error { return nil }); err != nil {
		t.Fatalf("a call behind a hung one: %v", err)
	}
}

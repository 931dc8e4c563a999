package executor

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// StartGate bounds how many runtime calls that start pods (a sandbox's
// creation, a container's creation and start) run at once, and gives a free
// slot to the pod that came first. All pods of a burst started together
// would share the runtime evenly and all finish late; in arrival order the
// first are Ready early and the last no later, the runtime being as busy.
// A pod keeps its place for all its steps (sandbox, init containers,
// containers) until it is forgotten. Image pulls and hooks run outside it,
// and a call that takes longer than slowCall gives its slot on, so a
// runtime that hangs on one pod (its network plugin, say) holds up the
// others no longer than that. A nil *StartGate lets every call through.
type StartGate struct {
	// slow is slowCall but in tests.
	slow    time.Duration
	mu      sync.Mutex
	free    int
	next    uint64
	places  map[types.UID]uint64
	waiters waitQueue
}

// maxPlaces bounds the places remembered: beyond it they are dropped, which
// only costs the pods that had one their precedence.
const maxPlaces = 1 << 14

// slowCall is how long a call holds its slot at most. A sandbox's creation
// takes well under a second when the runtime is busy with a burst.
const slowCall = 2 * time.Second

// NewStartGate returns a gate with n slots (at least one).
func NewStartGate(n int) *StartGate {
	return &StartGate{slow: slowCall, free: max(n, 1), places: map[types.UID]uint64{}}
}

// Do runs f once the pod uid has a slot, and returns f's error, or ctx's
// when it ended first (f then never runs).
func (g *StartGate) Do(ctx context.Context, uid types.UID, f func() error) error {
	if g == nil {
		return f()
	}
	if err := g.acquire(ctx, uid); err != nil {
		return err
	}
	var once sync.Once
	slow := time.AfterFunc(g.slow, func() { once.Do(g.release) })
	defer func() {
		slow.Stop()
		once.Do(g.release)
	}()
	return f()
}

// Forget drops the place of a pod that is gone.
func (g *StartGate) Forget(uid types.UID) {
	if g == nil {
		return
	}
	g.mu.Lock()
	delete(g.places, uid)
	g.mu.Unlock()
}

func (g *StartGate) acquire(ctx context.Context, uid types.UID) error {
	g.mu.Lock()
	place, ok := g.places[uid]
	if !ok {
		if len(g.places) >= maxPlaces {
			clear(g.places)
		}
		place = g.next
		g.next++
		g.places[uid] = place
	}
	if g.free > 0 {
		// Nobody waits while a slot is free: release hands slots over.
		g.free--
		g.mu.Unlock()
		return nil
	}
	w := &waiter{place: place, ready: make(chan struct{})}
	heap.Push(&g.waiters, w)
	g.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		granted := w.index < 0
		if !granted {
			heap.Remove(&g.waiters, w.index)
		}
		g.mu.Unlock()
		if granted {
			// Handed a slot as ctx ended: pass it on.
			g.release()
		}
		return ctx.Err()
	}
}

func (g *StartGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.waiters.Len() == 0 {
		g.free++
		return
	}
	w := heap.Pop(&g.waiters).(*waiter)
	close(w.ready)
}

// waiter is a call waiting for a slot; index is its position in the queue,
// -1 once it was handed one.
type waiter struct {
	place uint64
	index int
	ready chan struct{}
}

// waitQueue is a heap of waiters, the earliest place first.
type waitQueue []*waiter

func (q waitQueue) Len() int           { return len(q) }
func (q waitQueue) Less(i, j int) bool { return q[i].place < q[j].place }
func (q waitQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}

func (q *waitQueue) Push(x any) {
	w := x.(*waiter)
	w.index = len(*q)
	*q = append(*q, w)
}

func (q *waitQueue) Pop() any {
	old := *q
	w := old[len(old)-1]
	old[len(old)-1] = nil
	w.index = -1
	*q = old[:len(old)-1]
	return w
}

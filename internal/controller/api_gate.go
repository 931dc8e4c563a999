package controller

import (
	"context"
	"sync"
	"sync/atomic"
)

// apiGate says whether the API server has been reached: the manager's
// caches have synced once. Until then the static pod path reads nothing
// from the API server and writes nothing to it; it keeps what it would
// write (the static pods' statuses) and writes it once the gate opens.
type apiGate struct {
	open atomic.Bool
	mu   sync.Mutex
	// onOpen run once, when the gate opens.
	onOpen []func()
}

// Ready reports whether the API server has been reached.
func (g *apiGate) Ready() bool { return g.open.Load() }

// OnOpen runs f when the gate opens (at once if it is open).
func (g *apiGate) OnOpen(f func()) {
	g.mu.Lock()
	if !g.open.Load() {
		g.onOpen = append(g.onOpen, f)
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	f()
}

// Start opens the gate. It is a runnable of the manager, which starts it
// once its caches have synced; it returns at once.
func (g *apiGate) Start(context.Context) error {
	g.mu.Lock()
	g.open.Store(true)
	fs := g.onOpen
	g.onOpen = nil
	g.mu.Unlock()
	for _, f := range fs {
		f()
	}
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: the
// manager starts the gate with its other runnables, after the caches.
func (g *apiGate) NeedLeaderElection() bool { return false }

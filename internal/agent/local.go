package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Local runs the runnables that must not wait for the API server: the
// pod workers, the relister and the prober that run static pods, the
// static pod sources and the client certificate's bootstrap. The
// controller-runtime manager starts its runnables only once its caches
// have synced, which needs a reachable API server; Local starts its own at
// once.
type Local struct {
	mu        sync.Mutex
	runnables []manager.Runnable
	started   bool
}

// Add adds r; it must be called before Start.
func (l *Local) Add(r manager.Runnable) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		return errors.New("adding a local runnable after the start")
	}
	l.runnables = append(l.runnables, r)
	return nil
}

// Start runs every runnable until ctx ends or one of them fails, then
// stops the others and waits for them. It returns the first failure.
func (l *Local) Start(ctx context.Context) error {
	l.mu.Lock()
	l.started = true
	runs := l.runnables
	l.mu.Unlock()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() {
			if err := r.Start(ctx); err != nil {
				cancel(fmt.Errorf("%T: %w", r, err))
			}
		})
	}
	<-ctx.Done()
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

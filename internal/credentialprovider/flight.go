package credentialprovider

import (
	"context"
	"sync"
)

// flight runs a function once for all callers that ask for the same key
// while it runs, as the kubelet runs a plugin once for concurrent requests
// for one image. The zero flight is ready to use.
type flight[T any] struct {
	mu    sync.Mutex
	calls map[string]*flightCall[T]
}

type flightCall[T any] struct {
	done    chan struct{}
	val     T
	err     error
	waiters int // callers that joined a running call; guarded by flight.mu
}

// do returns fn's result, running fn unless a call for key is running, in
// which case it waits for that call's result. A caller whose ctx ends stops
// waiting with ctx's error; fn goes on for the others, so it must bound its
// own run time.
func (f *flight[T]) do(ctx context.Context, key string, fn func() (T, error)) (T, error) {
	f.mu.Lock()
	c, ok := f.calls[key]
	if ok {
		c.waiters++
	} else {
		if f.calls == nil {
			f.calls = map[string]*flightCall[T]{}
		}
		c = &flightCall[T]{done: make(chan struct{})}
		f.calls[key] = c
		go func() {
			c.val, c.err = fn()
			f.mu.Lock()
			delete(f.calls, key)
			f.mu.Unlock()
			close(c.done)
		}()
	}
	f.mu.Unlock()
	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// waiting returns how many callers joined the running call for key.
func (f *flight[T]) waiting(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.calls[key]; ok {
		return c.waiters
	}
	return 0
}

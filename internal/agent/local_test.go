package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

func TestLocalStartsAtOnceAndStopsTogether(t *testing.T) {
	l := &Local{}
	started := make(chan struct{}, 2)
	stopped := make(chan struct{}, 2)
	for range 2 {
		if err := l.Add(manager.RunnableFunc(func(ctx context.Context) error {
			started <- struct{}{}
			<-ctx.Done()
			stopped <- struct{}{}
			return nil
		})); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.Start(ctx) }()
	for range 2 {
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Fatal("a runnable did not start")
		}
	}
	if err := l.Add(manager.RunnableFunc(func(context.Context) error { return nil })); err == nil {
		t.Fatal("Add after Start was accepted")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("clean stop: %v", err)
	}
	if len(stopped) != 2 {
		t.Fatalf("%d runnables stopped, want 2", len(stopped))
	}
}

func TestLocalFailureStopsTheOthers(t *testing.T) {
	l := &Local{}
	boom := errors.New("boom")
	_ = l.Add(manager.RunnableFunc(func(ctx context.Context) error { <-ctx.Done(); return nil }))
	_ = l.Add(manager.RunnableFunc(func(context.Context) error { return boom }))
	done := make(chan error)
	go func() { done <- l.Start(context.Background()) }()
	select {
	case err := <-done:
		if !errors.Is(err, boom) {
			t.Fatalf("got %v, want the failure", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a failure did not stop the others")
	}
}

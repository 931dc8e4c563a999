package keylock

import (
	"testing"
	"time"
)

// Holding one key's lock does not block another key.
func TestKeysAreIndependent(t *testing.T) {
	var l Map
	unlockA := l.Lock("a")
	done := make(chan struct{})
	go func() {
		l.Lock("b")()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("locking b waited for a")
	}

	blocked := make(chan struct{})
	go func() {
		l.Lock("a")()
		close(blocked)
	}()
	select {
	case <-blocked:
		t.Fatal("a was locked twice")
	case <-time.After(50 * time.Millisecond):
	}
	unlockA()
	<-blocked
	if l.Len() != 0 {
		t.Errorf("%d locks kept after release, want 0", l.Len())
	}
}

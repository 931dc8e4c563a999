package volume

import (
	"sync"

	"k8s.io/mount-utils"
)

// mountTable reads the mount table for concurrent teardowns, once for all
// of those that ask while a read is under way. Each caller gets a table
// read after its call began: a caller that comes during a read waits for
// the next one, which starts when that read ends and serves every caller
// that came meanwhile. A node's pods deleted at once tear down together,
// and the table grows with the pods (their tmpfs volumes and the runtime's
// mounts): read once per teardown, it made the teardowns' cost grow with
// the square of the pods.
type mountTable struct {
	list func() ([]mount.MountPoint, error)

	mu sync.Mutex
	// reading: a read is under way; next is the read the callers that
	// came during it wait for (nil: none came yet).
	reading bool
	next    *mountRead
}

// mountRead is one read of the table and the callers waiting on it.
type mountRead struct {
	done chan struct{}
	mps  []mount.MountPoint
	err  error
}

// List returns the mount table as list reads it, read after the call
// began. Callers share the slice and must not modify it.
func (t *mountTable) List() ([]mount.MountPoint, error) {
	t.mu.Lock()
	if t.next == nil {
		t.next = &mountRead{done: make(chan struct{})}
	}
	r := t.next
	if !t.reading {
		// No read is under way: this caller's read starts now.
		t.reading, t.next = true, nil
		t.mu.Unlock()
		t.read(r)
	} else {
		t.mu.Unlock()
	}
	<-r.done
	return r.mps, r.err
}

// read reads the table for r's callers, then starts the read the callers
// that came meanwhile wait for, if any.
func (t *mountTable) read(r *mountRead) {
	r.mps, r.err = t.list()
	close(r.done)
	t.mu.Lock()
	defer t.mu.Unlock()
	next := t.next
	if next == nil {
		t.reading = false
		return
	}
	t.next = nil
	go t.read(next)
}

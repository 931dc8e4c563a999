package objectstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// entry is one referenced object: who references it and what was last seen
// of it. pods is guarded by the Store's mutex, the rest by mu.
type entry struct {
	key  key
	pods map[types.UID]struct{}

	// fetchMu serialises the GETs of the Cache and Get strategies.
	fetchMu sync.Mutex

	mu sync.Mutex
	// obj is the last content seen; nil when the object was never seen.
	obj client.Object
	// observed is true once the API server said whether the object exists.
	observed bool
	// deleted is true when the last observation was "does not exist".
	deleted bool
	// lastErr is the last error of a list or watch, reported by reads that
	// wait for a first list that does not come.
	lastErr error
	// fetched is when the Cache strategy last read the object.
	fetched time.Time
	// synced is closed at the first observation.
	synced chan struct{}
	// cancel stops the watch; nil when there is none (any more).
	cancel context.CancelFunc
}

func newEntry(k key) *entry {
	return &entry{key: k, pods: map[types.UID]struct{}{}, synced: make(chan struct{})}
}

// record stores an observation (obj nil: the object does not exist) and
// says whether it changes content seen before, and whether the object is
// immutable.
func (e *entry) record(obj client.Object) (changed, immutable bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	first := !e.observed
	if !e.observed {
		e.observed = true
		close(e.synced)
	}
	if obj == nil {
		changed = !first && !e.deleted
		e.deleted = true
		return changed, false
	}
	changed = !first && (e.obj == nil || e.deleted || e.obj.GetResourceVersion() != obj.GetResourceVersion())
	e.obj, e.deleted = obj, false
	return changed, isImmutable(obj)
}

// readMode says what a read returns of an object the API server last said
// does not exist.
type readMode int

const (
	// lastSeen returns the last content seen of a deleted object, so that
	// a running pod keeps what it was given: container environments, pull
	// secrets.
	lastSeen readMode = iota
	// existing reports a deleted object as NotFound, as the kubelet's
	// object managers do: volumes, so that an optional source's files go
	// with its object and a required one's set-up fails, keeping them.
	existing
)

// current returns a copy of what a read in mode gets, or NotFound.
func (e *entry) current(mode readMode) (client.Object, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !visible(e.obj != nil, e.deleted, mode) {
		return nil, notFoundError(e.key)
	}
	return e.obj.DeepCopyObject().(client.Object), nil
}

// visible says whether a read in mode gets the content seen of an object:
// there must be some, and it must still exist unless the read wants the
// last content seen.
func visible(seen, deleted bool, mode readMode) bool {
	return seen && (!deleted || mode == lastSeen)
}

func (e *entry) seen() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.obj != nil
}

// immutable says whether the content seen is marked immutable (a deleted
// and recreated object is not looked at again, as in the kubelet).
func (e *entry) immutable() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.obj != nil && isImmutable(e.obj)
}

func (e *entry) isFreshAt(now time.Time, ttl time.Duration) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.fetched.IsZero() && now.Before(e.fetched.Add(ttl))
}

func (e *entry) setFetched(t time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fetched = t
}

func (e *entry) setErr(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lastErr = err
}

// waitSynced waits for the first observation, at most timeout.
func (e *entry) waitSynced(ctx context.Context, timeout time.Duration) error {
	select {
	case <-e.synced:
		return nil
	default:
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-e.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the first list: %w", ctx.Err())
	case <-t.C:
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lastErr != nil {
		return fmt.Errorf("no list within %v: %w", timeout, e.lastErr)
	}
	return fmt.Errorf("no list within %v", timeout)
}

// stopWatch stops the entry's watch, if it has one, and says whether it did.
func (e *entry) stopWatch() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cancel == nil {
		return false
	}
	e.cancel()
	e.cancel = nil
	return true
}

// newObject returns an empty object of the entry's kind.
func (k key) newObject() client.Object {
	if k.kind == KindSecret {
		return &v1.Secret{}
	}
	return &v1.ConfigMap{}
}

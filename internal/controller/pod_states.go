package controller

import (
	"sync"

	"github.com/nodelet/nodelet/internal/checkpoint"
	"github.com/nodelet/nodelet/internal/keylock"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

// podStates is the checkpoint store as the pod controller uses it: the
// state of each pod as last read from its checkpoint or written to it is
// kept in memory, and a read of a pod's checkpoint returns a copy of it.
// Every sync of a pod reads its state; a settled pod's periodic sync would
// otherwise open, read, decode and verify the file each time, most of
// what such a sync costs. Only this process writes these checkpoints
// while it runs, so the copy in memory is the file's content; a restart
// starts with none and reads (and verifies) each file once. Other
// checkpoints pass through to the store.
type podStates struct {
	checkpoint.Manager
	// mem holds a state.PodState by checkpoint key, owned by the cache:
	// what goes in and what comes out is a copy.
	mem sync.Map
	// keys orders, per key, a read from the store and the copy it keeps
	// with writes and removals, so that a read never keeps a state a
	// write or a removal made old meanwhile.
	keys keylock.Map
}

// newPodStates caches the pod states of store.
func newPodStates(store checkpoint.Manager) *podStates {
	return &podStates{Manager: store}
}

// CreateCheckpoint stores c, and keeps a copy of a pod state once stored.
func (p *podStates) CreateCheckpoint(key string, c checkpoint.Checkpoint) error {
	d, ok := c.(*checkpoint.Data[state.PodState])
	if !ok {
		return p.Manager.CreateCheckpoint(key, c)
	}
	defer p.keys.Lock(key)()
	if err := p.Manager.CreateCheckpoint(key, c); err != nil {
		// The file holds the old state or the new: read it again.
		p.mem.Delete(key)
		return err
	}
	p.mem.Store(key, d.Value.Clone())
	return nil
}

// GetCheckpoint reads a pod state from memory when it is there, else from
// the store, keeping a copy of what it read.
func (p *podStates) GetCheckpoint(key string, c checkpoint.Checkpoint) error {
	d, ok := c.(*checkpoint.Data[state.PodState])
	if !ok {
		return p.Manager.GetCheckpoint(key, c)
	}
	if v, ok := p.mem.Load(key); ok {
		d.Value = v.(state.PodState).Clone()
		return nil
	}
	defer p.keys.Lock(key)()
	if err := p.Manager.GetCheckpoint(key, c); err != nil {
		return err
	}
	p.mem.Store(key, d.Value.Clone())
	return nil
}

// RemoveCheckpoint forgets the state and removes the checkpoint.
func (p *podStates) RemoveCheckpoint(key string) error {
	defer p.keys.Lock(key)()
	p.mem.Delete(key)
	return p.Manager.RemoveCheckpoint(key)
}

package staticpod

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Store holds the node's static pods, merged from the manifest sources
// (Pods), whether every source has reported once, and what the API server
// would otherwise hold of them: their last status. A nil *Store has none.
// Store is safe for concurrent use.
type Store struct {
	pods *Pods

	mu     sync.Mutex
	status map[types.UID]corev1.PodStatus
	// pending are the sources that have not reported yet.
	pending map[string]bool
}

// NewStore returns a Store of the given sources (in order of precedence,
// as NewPods), none of which has reported yet.
func NewStore(sources ...string) *Store {
	s := &Store{pods: NewPods(sources...), status: map[types.UID]corev1.PodStatus{}, pending: map[string]bool{}}
	for _, src := range sources {
		s.pending[src] = true
	}
	return s
}

// WithStatus returns a copy of p with the last status nodelet computed
// for it, or Pending when none.
func (s *Store) WithStatus(p *corev1.Pod) *corev1.Pod {
	out := p.DeepCopy()
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.status[p.UID]; ok {
		out.Status = *st.DeepCopy()
	}
	return out
}

// Get returns the static pod of a full name, with its status.
func (s *Store) Get(namespace, name string) (*corev1.Pod, bool) {
	if s == nil {
		return nil, false
	}
	p, ok := s.pods.Get(namespace, name)
	if !ok {
		return nil, false
	}
	return s.WithStatus(p), true
}

// SetStatus records the status computed for a static pod.
func (s *Store) SetStatus(uid types.UID, st corev1.PodStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status[uid] = *st.DeepCopy()
}

// Forget drops the status of a static pod that is gone.
func (s *Store) Forget(uid types.UID) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.status, uid)
}

// Reported marks a source as having Reported once.
func (s *Store) Reported(source string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, source)
}

// Ready reports whether every source has Reported once: before that, a
// mirror pod or runtime objects may belong to a static pod not read yet.
func (s *Store) Ready() bool {
	if s == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending) == 0
}

// UIDs returns the static pods' UIDs.
func (s *Store) UIDs() map[types.UID]bool {
	out := map[types.UID]bool{}
	if s == nil {
		return out
	}
	for _, p := range s.pods.List() {
		out[p.UID] = true
	}
	return out
}

// Set replaces the pods of source, as Pods.Set.
func (s *Store) Set(source string, pods []*corev1.Pod) (Changes, []Problem) {
	return s.pods.Set(source, pods)
}

// List returns the merged static pods, without their statuses.
func (s *Store) List() []*corev1.Pod {
	return s.pods.List()
}

package staticpod

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
)

// Problem is one manifest or pod that could not be used: Source is the
// config source ("file", "http"), Origin the file or URL, or for a pod that
// clashes with another source's, the source that was left out; Err says why.
type Problem struct {
	Source, Origin string
	Err            error
}

func (p Problem) Error() string { return p.Err.Error() }

// Changes is what one Pods.Set changed in the merged set. Updated pods keep
// their UID (only metadata such as labels or annotations changed); a changed
// manifest gives a new UID, so it shows as the old pod Removed and the new
// one Added.
type Changes struct {
	Added, Updated, Removed []*corev1.Pod
}

// Empty reports whether nothing changed.
func (c Changes) Empty() bool {
	return len(c.Added) == 0 && len(c.Updated) == 0 && len(c.Removed) == 0
}

// Pods merges the static pods of all sources, as the kubelet's pod config
// does. Each source's set is replaced as a whole by Set. When two pods share
// a full name, the first in a stable order wins (sources in the order given
// to NewPods, then the order within a source, which for files is by file
// name) and the other is left out and reported. A pod keeps, while it is
// unchanged, its object identity and the time it was first seen (the
// config.seen annotation). The pods Pods hands out must not be modified.
// Pods is safe for concurrent use.
type Pods struct {
	mu      sync.RWMutex
	now     func() time.Time
	order   []string
	sets    map[string][]*corev1.Pod
	byUID   map[types.UID]*corev1.Pod
	byName  map[string]*corev1.Pod
	sources map[types.UID]string
}

// NewPods returns an empty merge of the given sources, in order of precedence.
func NewPods(sources ...string) *Pods {
	return &Pods{
		now:     time.Now,
		order:   slices.Clone(sources),
		sets:    map[string][]*corev1.Pod{},
		byUID:   map[types.UID]*corev1.Pod{},
		byName:  map[string]*corev1.Pod{},
		sources: map[types.UID]string{},
	}
}

// Set replaces the pods of source with pods and returns what changed in the
// merged set and every pod the merge leaves out because another pod has its
// full name (or UID). A source not given to NewPods ranks after the others.
// Set copies the pods it keeps; the caller's pods are not modified.
func (p *Pods) Set(source string, pods []*corev1.Pod) (changed Changes, dupes []Problem) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Contains(p.order, source) {
		p.order = append(p.order, source)
	}

	old := map[types.UID]*corev1.Pod{}
	for _, pod := range p.sets[source] {
		old[pod.UID] = pod
	}
	seenAt := p.now().UTC().Format(time.RFC3339Nano)
	next := make([]*corev1.Pod, 0, len(pods))
	for _, in := range pods {
		if in == nil {
			continue
		}
		prev, ok := old[in.UID]
		if ok && !differ(prev, in) {
			next = append(next, prev)
			continue
		}
		pod := in.DeepCopy()
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[ConfigSourceAnnotationKey] = source
		if ok {
			pod.Annotations[ConfigFirstSeenAnnotationKey] = prev.Annotations[ConfigFirstSeenAnnotationKey]
		} else {
			pod.Annotations[ConfigFirstSeenAnnotationKey] = seenAt
		}
		next = append(next, pod)
	}
	p.sets[source] = next

	byUID := map[types.UID]*corev1.Pod{}
	byName := map[string]*corev1.Pod{}
	sources := map[types.UID]string{}
	for _, src := range p.order {
		for _, pod := range p.sets[src] {
			name := FullName(pod)
			if first, ok := byName[name]; ok {
				dupes = append(dupes, Problem{Source: src, Origin: src, Err: fmt.Errorf(
					"static pod %s from source %q left out: source %q already has a pod of that name", name, src, sources[first.UID])})
				continue
			}
			if first, ok := byUID[pod.UID]; ok {
				dupes = append(dupes, Problem{Source: src, Origin: src, Err: fmt.Errorf(
					"static pod %s from source %q left out: pod %s of source %q has the same UID %s", name, src, FullName(first), sources[first.UID], pod.UID)})
				continue
			}
			byName[name] = pod
			byUID[pod.UID] = pod
			sources[pod.UID] = src
		}
	}

	for uid, pod := range byUID {
		prev, ok := p.byUID[uid]
		switch {
		case !ok:
			changed.Added = append(changed.Added, pod)
		case prev != pod:
			changed.Updated = append(changed.Updated, pod)
		}
	}
	for uid, pod := range p.byUID {
		if _, ok := byUID[uid]; !ok {
			changed.Removed = append(changed.Removed, pod)
		}
	}
	sortPods(changed.Added)
	sortPods(changed.Updated)
	sortPods(changed.Removed)
	p.byUID, p.byName, p.sources = byUID, byName, sources
	return changed, dupes
}

// differ reports whether in changes the stored pod prev in a way the pod
// engine must see: anything but the annotations Pods itself sets.
func differ(prev, in *corev1.Pod) bool {
	a := prev.DeepCopy()
	b := in.DeepCopy()
	for _, pod := range []*corev1.Pod{a, b} {
		delete(pod.Annotations, ConfigFirstSeenAnnotationKey)
		delete(pod.Annotations, ConfigSourceAnnotationKey)
		if len(pod.Annotations) == 0 {
			pod.Annotations = nil
		}
	}
	return !equality.Semantic.DeepEqual(a, b)
}

// Get returns the merged pod of that namespace and name.
func (p *Pods) Get(namespace, name string) (*corev1.Pod, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	pod, ok := p.byName[namespace+"/"+name]
	return pod, ok
}

// ByUID returns the merged pod of that UID.
func (p *Pods) ByUID(uid types.UID) (*corev1.Pod, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	pod, ok := p.byUID[uid]
	return pod, ok
}

// List returns the merged pods sorted by full name.
func (p *Pods) List() []*corev1.Pod {
	p.mu.RLock()
	defer p.mu.RUnlock()
	pods := slices.Collect(maps.Values(p.byUID))
	sortPods(pods)
	return pods
}

func sortPods(pods []*corev1.Pod) {
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(strings.Compare(FullName(a), FullName(b)), strings.Compare(string(a.UID), string(b.UID)))
	})
}

// lastSet is the set of pods a source last handed on, by UID.
type lastSet struct {
	uids []types.UID
	sent bool
}

// changed records pods as the set handed on and reports whether it
// differs from the last one (always true the first time).
func (l *lastSet) changed(pods []*corev1.Pod) bool {
	uids := make([]types.UID, len(pods))
	for i, pod := range pods {
		uids[i] = pod.UID
	}
	if l.sent && slices.Equal(uids, l.uids) {
		return false
	}
	l.sent, l.uids = true, uids
	return true
}

package executor

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"

	"github.com/nodelet/nodelet/internal/cri"
)

// firstLookTTL is how long the process's first look at the runtime answers
// the first Observe of each pod name: the time a restarted agent takes to
// sync every pod it finds (seconds on a full node), with room to spare.
const firstLookTTL = time.Minute

// firstLook is one list of every sandbox and container the node owns,
// taken at the process's first Observe, that answers the first Observe of
// each pod name instead of two lists of the name's own: a restarted agent
// looks at a full node with two list calls, not two for every pod.
//
// It is exact because only a pod's worker makes runtime objects, and only
// after it has observed its pod's name: until a name's first Observe, the
// runtime holds no object of the name but those the list saw (and maybe
// fewer: one removed since is left out when its status is read). A name's
// first Observe takes the name's entry, so every later one lists afresh.
// After firstLookTTL, or when the list failed, every Observe lists.
type firstLook struct {
	once sync.Once
	mu   sync.Mutex
	// byName holds the listed objects of each name not observed yet; taken
	// the names observed since the look, listed or not.
	byName map[types.NamespacedName]*namedObjects
	taken  map[types.NamespacedName]bool
	until  time.Time
}

// namedObjects are the sandboxes and containers of one pod name.
type namedObjects struct {
	sandboxes  []*runtimeapi.PodSandbox
	containers []*runtimeapi.Container
}

// take returns what the first look saw of the pod name, taking the look
// first when this is the process's first Observe; ok is false when the
// name must be listed: observed before, the look expired or failed.
func (f *firstLook) take(ctx context.Context, rt cri.Runtime, now time.Time, name types.NamespacedName) (_ *namedObjects, ok bool) {
	f.once.Do(func() { f.look(ctx, rt, now) })
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byName == nil {
		return nil, false
	}
	if now.After(f.until) {
		f.byName, f.taken = nil, nil
		return nil, false
	}
	if f.taken[name] {
		return nil, false
	}
	f.taken[name] = true
	objs := f.byName[name]
	delete(f.byName, name)
	if objs == nil {
		objs = &namedObjects{}
	}
	return objs, true
}

// look lists the node's sandboxes and containers once and groups them by
// pod name; a failed list leaves the look empty, so that each name lists.
func (f *firstLook) look(ctx context.Context, rt cri.Runtime, now time.Time) {
	lister := cri.BriefOf(rt)
	sandboxes, err := lister.ListPodSandboxes(ctx, nil)
	if err != nil {
		return
	}
	containers, err := lister.ListContainers(ctx, nil)
	if err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byName, f.taken, f.until = groupByPodName(sandboxes, containers), map[types.NamespacedName]bool{}, now.Add(firstLookTTL)
}

// groupByPodName groups sandboxes and containers by the pod namespace and
// name of their labels.
func groupByPodName(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) map[types.NamespacedName]*namedObjects {
	out := map[types.NamespacedName]*namedObjects{}
	of := func(labels map[string]string) *namedObjects {
		key := types.NamespacedName{Namespace: labels[kubetypes.KubernetesPodNamespaceLabel], Name: labels[kubetypes.KubernetesPodNameLabel]}
		o := out[key]
		if o == nil {
			o = &namedObjects{}
			out[key] = o
		}
		return o
	}
	for _, sb := range sandboxes {
		o := of(sb.GetLabels())
		o.sandboxes = append(o.sandboxes, sb)
	}
	for _, c := range containers {
		o := of(c.GetLabels())
		o.containers = append(o.containers, c)
	}
	return out
}

package eviction

import (
	"cmp"
	"math"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodelet/nodelet/internal/volumestats"
)

// ContainerUsage is what one container of a pod uses.
type ContainerUsage struct {
	Name string
	// Memory is the container's working set, in bytes.
	Memory *int64
	// Ephemeral is its writable layer plus its logs, in bytes.
	Ephemeral *int64
	// Inodes is the inodes its writable layer and its logs take.
	Inodes *int64
}

// PodUsage is what one pod uses, as measured for a round. A nil field is
// not known.
type PodUsage struct {
	Pod *v1.Pod
	// Memory is the pod's working set, in bytes.
	Memory *int64
	// Ephemeral is the pod's local ephemeral storage: its containers'
	// writable layers and logs and its disk-backed emptyDir volumes.
	Ephemeral *int64
	// Inodes is the inodes the same local ephemeral storage takes.
	Inodes *int64
	// Processes is the number of processes (and threads) of the pod.
	Processes  *int64
	Containers []ContainerUsage
	// Volumes is the usage of each disk-backed emptyDir volume, by name.
	Volumes map[string]VolumeUsage
}

// VolumeUsage is what one of a pod's volumes uses, as a walk of it
// counted.
type VolumeUsage struct {
	volumestats.Usage
	// Incomplete says the walk could not count every entry: Usage is a
	// lower bound, and the volume counts as past any limit.
	Incomplete bool
}

// incomplete reports whether a walk of one of the pod's volumes could not
// count every entry: its local storage usage is then a lower bound, and
// it counts as past every local storage limit and as the largest user of
// disk.
func (p PodUsage) incomplete() bool {
	for _, v := range p.Volumes {
		if v.Incomplete {
			return true
		}
	}
	return false
}

// Rank orders the candidate pods for evicting for signal, first to go
// first, as the kubelet ranks them: for memory, pods using more than they
// request (or whose usage is unknown) first, then lower priority first,
// then larger usage above the request first; for disk space the same with
// local ephemeral storage; for inodes (nodefs.inodesFree,
// imagefs.inodesFree) the same with the inodes that storage takes, of
// which nothing is requested: pods using any (or not known) first, then
// lower priority, then more inodes first (the kubelet subtracts the pod's
// ephemeral-storage request, in bytes, from its inodes; nodelet does not,
// so that asking for bytes does not shelter a pod that exhausts inodes);
// for processes lower priority first, then more processes first. The
// input is not modified.
func Rank(signal Signal, pods []PodUsage) []PodUsage {
	out := slices.Clone(pods)
	var cmps []func(a, b PodUsage) int
	switch res := signal.Resource(); res {
	case v1.ResourceMemory, v1.ResourceEphemeralStorage, ResourceInodes:
		cmps = []func(a, b PodUsage) int{exceedsRequests(res), byPriority, aboveRequests(res)}
	default:
		cmps = []func(a, b PodUsage) int{byPriority, byProcesses}
	}
	slices.SortStableFunc(out, func(a, b PodUsage) int {
		for _, c := range cmps {
			if r := c(a, b); r != 0 {
				return r
			}
		}
		return 0
	})
	return out
}

// usageOf is the pod's usage of name (memory, ephemeral storage or
// inodes), and whether it is known. A local storage usage a walk could not
// count in full is the largest there is.
func usageOf(p PodUsage, name v1.ResourceName) (int64, bool) {
	u := p.Ephemeral
	switch {
	case name == v1.ResourceMemory:
		u = p.Memory
	case p.incomplete():
		return math.MaxInt64, true
	case name == ResourceInodes:
		u = p.Inodes
	}
	if u == nil {
		return 0, false
	}
	return *u, true
}

func podRequest(pod *v1.Pod, name v1.ResourceName) int64 {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	q := reqs[name]
	return q.Value()
}

// exceedsRequests puts pods whose usage is above their request, or not
// known, before the others.
func exceedsRequests(name v1.ResourceName) func(a, b PodUsage) int {
	over := func(p PodUsage) bool {
		u, known := usageOf(p, name)
		return !known || u > podRequest(p.Pod, name)
	}
	return func(a, b PodUsage) int {
		oa, ob := over(a), over(b)
		switch {
		case oa == ob:
			return 0
		case oa:
			return -1
		}
		return 1
	}
}

// aboveRequests puts the pod using more above its request first.
func aboveRequests(name v1.ResourceName) func(a, b PodUsage) int {
	above := func(p PodUsage) int64 {
		u, known := usageOf(p, name)
		if !known {
			return 0
		}
		return u - podRequest(p.Pod, name)
	}
	return func(a, b PodUsage) int { return cmp.Compare(above(b), above(a)) }
}

func priority(pod *v1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}

func byPriority(a, b PodUsage) int { return cmp.Compare(priority(a.Pod), priority(b.Pod)) }

func byProcesses(a, b PodUsage) int {
	n := func(p PodUsage) int64 {
		if p.Processes == nil {
			return 0
		}
		return *p.Processes
	}
	return cmp.Compare(n(b), n(a))
}

func quantity(v int64) *resource.Quantity { return resource.NewQuantity(v, resource.BinarySI) }

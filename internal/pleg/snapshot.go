package pleg

import (
	"cmp"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
)

// PodRef identifies the pod that runtime objects belong to, from the kubelet
// labels on them.
type PodRef struct {
	UID       types.UID
	Namespace string
	Name      string
}

// ObjectKind tells sandboxes from containers.
type ObjectKind string

// The kinds of runtime objects a Snapshot holds.
const (
	KindSandbox   ObjectKind = "Sandbox"
	KindContainer ObjectKind = "Container"
)

// ObjectState is what a relist compares of one sandbox or container: its
// kind and its CRI state name (SANDBOX_READY, CONTAINER_EXITED, ...). An
// exit is a state change; a restart is a new container ID.
type ObjectState struct {
	Kind  ObjectKind
	State string
}

// PodRecord is the runtime objects of one pod at one relist, by ID.
type PodRecord struct {
	Ref     PodRef
	Objects map[string]ObjectState
}

// Snapshot is the runtime state of every pod with owned objects at one
// relist, by pod UID. Objects without a pod UID label (and, for containers,
// no sandbox that has one) are left out.
type Snapshot map[types.UID]*PodRecord

// NewSnapshot groups sandboxes and containers by pod.
func NewSnapshot(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) Snapshot {
	return NextSnapshot(nil, sandboxes, containers)
}

// NextSnapshot is NewSnapshot for the relist after prev's: the record of a
// pod whose objects and identity are exactly those prev holds is prev's
// record, not a copy. A record is never modified once a snapshot holds it,
// so a reader of prev's records sees them as they were.
func NextSnapshot(prev Snapshot, sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) Snapshot {
	var b snapshotBuilder
	return b.build(prev, sandboxes, containers)
}

// snapshotBuilder builds the snapshots of a relister's relists; what it
// holds between two builds is scratch space, reused so that a relist does
// not allocate it again.
type snapshotBuilder struct {
	// uids holds the pod UID of each object listed, sandboxes first.
	uids []types.UID
	// pods holds, by pod UID, how many of the pod's objects were found in
	// its previous record as they are (the record is then prev's), or one
	// of the marks below.
	pods map[types.UID]int
}

// The marks of snapshotBuilder.pods besides a count.
const (
	// podNew is a pod with a record of this build, made from its objects
	// as they are listed.
	podNew = -1
	// podRebuilt is a pod whose objects differ from its previous record
	// after some matched it: its new record is filled in a second pass.
	podRebuilt = -2
)

// build returns the snapshot of sandboxes and containers, keeping prev's
// record of every pod that did not change (see NextSnapshot).
func (b *snapshotBuilder) build(prev Snapshot, sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) Snapshot {
	if !distinctIDs(sandboxes) || !distinctIDs(containers) {
		// Counting a pod's objects found in its previous record tells
		// that it holds them all only when none is listed twice.
		prev = nil
	}
	pods := max(len(prev), len(sandboxes))
	s := make(Snapshot, pods)
	if b.pods == nil {
		b.pods = make(map[types.UID]int, pods)
	}
	clear(b.pods)
	b.uids = slices.Grow(b.uids[:0], len(sandboxes)+len(containers))
	var bySandbox map[string]*runtimeapi.PodSandbox // made for the first container without a pod UID label
	for _, sb := range sandboxes {
		labels, md := sb.GetLabels(), sb.GetMetadata()
		uid := types.UID(cmp.Or(kubetypes.GetPodUID(labels), md.GetUid()))
		b.add(s, prev, uid, labels, md, sb.GetId(), ObjectState{Kind: KindSandbox, State: sandboxState(sb.GetState())})
	}
	for _, c := range containers {
		labels, md := c.GetLabels(), (*runtimeapi.PodSandboxMetadata)(nil)
		uid := types.UID(kubetypes.GetPodUID(labels))
		if uid == "" {
			// The pod of its sandbox, if any.
			if bySandbox == nil {
				bySandbox = make(map[string]*runtimeapi.PodSandbox, len(sandboxes))
				for _, sb := range sandboxes {
					bySandbox[sb.GetId()] = sb
				}
			}
			sb := bySandbox[c.GetPodSandboxId()]
			labels, md = sb.GetLabels(), sb.GetMetadata()
			uid = types.UID(cmp.Or(kubetypes.GetPodUID(labels), md.GetUid()))
		}
		b.add(s, prev, uid, labels, md, c.GetId(), ObjectState{Kind: KindContainer, State: containerState(c.GetState())})
	}
	// A pod of prev's record with fewer objects than it lost some.
	rebuild := false
	for uid, n := range b.pods {
		switch {
		case n == podRebuilt:
			rebuild = true
		case n >= 0 && n != len(s[uid].Objects):
			b.rebuild(s, uid)
			rebuild = true
		}
	}
	if rebuild {
		b.fill(s, sandboxes, containers)
	}
	b.uids = b.uids[:0]
	return s
}

// add adds one listed object of the pod uid to s: to a record of this
// build, or as one more object of the pod's previous record, or, when the
// previous record holds it otherwise, by marking the pod podRebuilt. The
// pod's identity is read from labels and md only for its first object, as
// NewSnapshot names a pod after its first object.
func (b *snapshotBuilder) add(s, prev Snapshot, uid types.UID, labels map[string]string, md *runtimeapi.PodSandboxMetadata, id string, st ObjectState) {
	b.uids = append(b.uids, uid)
	if uid == "" {
		return
	}
	n, seen := b.pods[uid]
	switch {
	case !seen:
		ref := podRef(labels, md)
		if p := prev[uid]; p != nil && p.Ref == ref && holds(p, id, st) {
			s[uid], b.pods[uid] = p, 1
			return
		}
		s[uid] = &PodRecord{Ref: ref, Objects: map[string]ObjectState{id: st}}
		b.pods[uid] = podNew
	case n == podNew:
		s[uid].Objects[id] = st
	case n >= 0 && holds(s[uid], id, st):
		b.pods[uid] = n + 1
	case n >= 0:
		b.rebuild(s, uid)
	}
}

// rebuild gives the pod uid an empty record of its own in place of the
// previous one, for fill to fill.
func (b *snapshotBuilder) rebuild(s Snapshot, uid types.UID) {
	p := s[uid]
	s[uid] = &PodRecord{Ref: p.Ref, Objects: make(map[string]ObjectState, len(p.Objects)+1)}
	b.pods[uid] = podRebuilt
}

// fill adds every listed object of the pods marked podRebuilt to their
// records. b.uids holds the objects' pod UIDs, in the order listed.
func (b *snapshotBuilder) fill(s Snapshot, sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) {
	for i, uid := range b.uids {
		if uid == "" || b.pods[uid] != podRebuilt {
			continue
		}
		if i < len(sandboxes) {
			sb := sandboxes[i]
			s[uid].Objects[sb.GetId()] = ObjectState{Kind: KindSandbox, State: sandboxState(sb.GetState())}
			continue
		}
		c := containers[i-len(sandboxes)]
		s[uid].Objects[c.GetId()] = ObjectState{Kind: KindContainer, State: containerState(c.GetState())}
	}
}

// holds reports whether rec holds the object id in state st.
func holds(rec *PodRecord, id string, st ObjectState) bool {
	o, ok := rec.Objects[id]
	return ok && o == st
}

// distinctIDs reports whether no ID is listed twice in list: in one pass
// when list is ordered by ID, as a relist orders it.
func distinctIDs[T interface{ GetId() string }](list []T) bool {
	for i := 1; i < len(list); i++ {
		switch cmp.Compare(list[i-1].GetId(), list[i].GetId()) {
		case 0:
			return false
		case 1:
			seen := make(map[string]struct{}, len(list))
			for _, o := range list {
				if _, dup := seen[o.GetId()]; dup {
					return false
				}
				seen[o.GetId()] = struct{}{}
			}
			return true
		}
	}
	return true
}

// stateNames returns the names of an enum's values by value, from its
// generated name map.
func stateNames(names map[int32]string) []string {
	out := make([]string, len(names))
	for v, name := range names {
		if v < 0 || int(v) >= len(out) {
			return nil // not 0..n-1: left to String
		}
		out[v] = name
	}
	return out
}

// The names of the CRI states, as their String methods spell them.
var (
	sandboxStateNames   = stateNames(runtimeapi.PodSandboxState_name)
	containerStateNames = stateNames(runtimeapi.ContainerState_name)
)

// sandboxState returns st.String() without looking it up in the enum's
// descriptor, as a relist does for every sandbox.
func sandboxState(st runtimeapi.PodSandboxState) string {
	if st >= 0 && int(st) < len(sandboxStateNames) {
		return sandboxStateNames[st]
	}
	return st.String()
}

// containerState returns st.String() without looking it up in the enum's
// descriptor, as a relist does for every container.
func containerState(st runtimeapi.ContainerState) string {
	if st >= 0 && int(st) < len(containerStateNames) {
		return containerStateNames[st]
	}
	return st.String()
}

// podRef reads a pod's identity from the kubelet labels, falling back to
// sandbox metadata.
func podRef(labels map[string]string, md *runtimeapi.PodSandboxMetadata) PodRef {
	return PodRef{
		UID:       types.UID(cmp.Or(kubetypes.GetPodUID(labels), md.GetUid())),
		Namespace: cmp.Or(kubetypes.GetPodNamespace(labels), md.GetNamespace()),
		Name:      cmp.Or(kubetypes.GetPodName(labels), md.GetName()),
	}
}

// EventType says how one runtime object changed between two relists.
type EventType string

// The changes Diff reports.
const (
	ContainerCreated EventType = "ContainerCreated"
	ContainerStarted EventType = "ContainerStarted"
	ContainerDied    EventType = "ContainerDied"
	ContainerChanged EventType = "ContainerChanged"
	ContainerRemoved EventType = "ContainerRemoved"
	SandboxReady     EventType = "SandboxReady"
	SandboxNotReady  EventType = "SandboxNotReady"
	SandboxRemoved   EventType = "SandboxRemoved"
)

// Event is one runtime object's change.
type Event struct {
	ID   string
	Type EventType
}

// PodChange is a pod whose runtime objects changed, with what changed.
type PodChange struct {
	Pod    PodRef
	Events []Event
}

// Diff returns the pods whose objects differ between old and cur, ordered by
// UID, each with its events ordered by object ID. A pod present only in old
// is reported with its identity from old.
func Diff(old, cur Snapshot) []PodChange {
	// Most relists change nothing: compare each pod's objects without
	// allocating, and sort only what changed.
	var changes []PodChange
	for uid, c := range cur {
		if o := old[uid]; o == c {
			continue // the same record: NextSnapshot kept it
		} else if ch, changed := diffPod(o, c); changed {
			changes = append(changes, ch)
		}
	}
	for uid, o := range old {
		if _, ok := cur[uid]; ok {
			continue
		}
		if ch, changed := diffPod(o, nil); changed {
			changes = append(changes, ch)
		}
	}
	slices.SortFunc(changes, func(a, b PodChange) int { return cmp.Compare(a.Pod.UID, b.Pod.UID) })
	return changes
}

func diffPod(old, cur *PodRecord) (PodChange, bool) {
	ch := PodChange{}
	var oldObjs, curObjs map[string]ObjectState
	if old != nil {
		ch.Pod, oldObjs = old.Ref, old.Objects
	}
	if cur != nil {
		ch.Pod, curObjs = cur.Ref, cur.Objects
	}
	if maps.Equal(oldObjs, curObjs) {
		return ch, false
	}
	ids := slices.Sorted(maps.Keys(curObjs))
	for id := range oldObjs {
		if _, ok := curObjs[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		o, hadOld := oldObjs[id]
		c, hasCur := curObjs[id]
		if hadOld && hasCur && o == c {
			continue
		}
		ch.Events = append(ch.Events, Event{ID: id, Type: eventType(o, c, hadOld, hasCur)})
	}
	return ch, len(ch.Events) > 0
}

// eventType names the change of one object from o to c.
func eventType(o, c ObjectState, hadOld, hasCur bool) EventType {
	if !hasCur {
		if o.Kind == KindSandbox {
			return SandboxRemoved
		}
		return ContainerRemoved
	}
	if c.Kind == KindSandbox {
		if c.State == runtimeapi.PodSandboxState_SANDBOX_READY.String() {
			return SandboxReady
		}
		return SandboxNotReady
	}
	switch c.State {
	case runtimeapi.ContainerState_CONTAINER_RUNNING.String():
		return ContainerStarted
	case runtimeapi.ContainerState_CONTAINER_EXITED.String():
		return ContainerDied
	case runtimeapi.ContainerState_CONTAINER_CREATED.String():
		if !hadOld {
			return ContainerCreated
		}
	}
	return ContainerChanged
}

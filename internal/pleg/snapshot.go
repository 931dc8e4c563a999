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
	s := Snapshot{}
	bySandbox := make(map[string]PodRef, len(sandboxes))
	for _, sb := range sandboxes {
		ref := podRef(sb.GetLabels(), sb.GetMetadata())
		bySandbox[sb.GetId()] = ref
		s.add(ref, sb.GetId(), ObjectState{Kind: KindSandbox, State: sb.GetState().String()})
	}
	for _, c := range containers {
		ref := podRef(c.GetLabels(), nil)
		if ref.UID == "" {
			ref = bySandbox[c.GetPodSandboxId()]
		}
		s.add(ref, c.GetId(), ObjectState{Kind: KindContainer, State: c.GetState().String()})
	}
	return s
}

func (s Snapshot) add(ref PodRef, id string, st ObjectState) {
	if ref.UID == "" {
		return
	}
	rec := s[ref.UID]
	if rec == nil {
		rec = &PodRecord{Ref: ref, Objects: map[string]ObjectState{}}
		s[ref.UID] = rec
	}
	rec.Objects[id] = st
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
		if ch, changed := diffPod(old[uid], c); changed {
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

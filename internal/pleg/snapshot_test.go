package pleg

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
)

func podLabels(uid string) map[string]string {
	return map[string]string{
		kubetypes.KubernetesPodUIDLabel:       uid,
		kubetypes.KubernetesPodNamespaceLabel: "ns",
		kubetypes.KubernetesPodNameLabel:      "pod-" + uid,
	}
}

func sandbox(id, uid string, state runtimeapi.PodSandboxState) *runtimeapi.PodSandbox {
	return &runtimeapi.PodSandbox{Id: id, State: state, Labels: podLabels(uid)}
}

func container(id, sandboxID, uid string, state runtimeapi.ContainerState) *runtimeapi.Container {
	c := &runtimeapi.Container{Id: id, PodSandboxId: sandboxID, State: state}
	if uid != "" {
		c.Labels = podLabels(uid)
	}
	return c
}

const (
	ready    = runtimeapi.PodSandboxState_SANDBOX_READY
	notReady = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	created  = runtimeapi.ContainerState_CONTAINER_CREATED
	running  = runtimeapi.ContainerState_CONTAINER_RUNNING
	exited   = runtimeapi.ContainerState_CONTAINER_EXITED
	unknown  = runtimeapi.ContainerState_CONTAINER_UNKNOWN
)

func TestNewSnapshotGroupsByPod(t *testing.T) {
	g := NewWithT(t)
	s := NewSnapshot(
		[]*runtimeapi.PodSandbox{
			sandbox("sb1", "u1", ready),
			{Id: "sb2", State: ready, Metadata: &runtimeapi.PodSandboxMetadata{Uid: "u2", Namespace: "ns", Name: "meta-only"}},
			{Id: "sb-anon", State: ready},
		},
		[]*runtimeapi.Container{
			container("c1", "sb1", "u1", running),
			container("c2", "sb2", "", exited), // no labels: found through its sandbox
			container("c-anon", "nowhere", "", running),
		})
	g.Expect(s).To(HaveLen(2))
	g.Expect(s["u1"].Ref).To(Equal(PodRef{UID: "u1", Namespace: "ns", Name: "pod-u1"}))
	g.Expect(s["u1"].Objects).To(Equal(map[string]ObjectState{
		"sb1": {Kind: KindSandbox, State: "SANDBOX_READY"},
		"c1":  {Kind: KindContainer, State: "CONTAINER_RUNNING"},
	}))
	g.Expect(s["u2"].Ref).To(Equal(PodRef{UID: "u2", Namespace: "ns", Name: "meta-only"}))
	g.Expect(s["u2"].Objects).To(HaveKey("c2"))
}

func TestDiff(t *testing.T) {
	base := func() ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
		return []*runtimeapi.PodSandbox{sandbox("sb1", "u1", ready)},
			[]*runtimeapi.Container{container("c1", "sb1", "u1", running)}
	}
	type mutate func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container)
	for name, tc := range map[string]struct {
		mutate mutate
		want   []PodChange
	}{
		"nothing changed": {
			mutate: func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				return sbs, cs
			},
		},
		"container created": {
			mutate: func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				return sbs, append(cs, container("c2", "sb1", "u1", created))
			},
			want: []PodChange{{Pod: ref("u1"), Events: []Event{{ID: "c2", Type: ContainerCreated}}}},
		},
		"container started": {
			mutate: func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				return sbs, append(cs, container("c2", "sb1", "u1", running))
			},
			want: []PodChange{{Pod: ref("u1"), Events: []Event{{ID: "c2", Type: ContainerStarted}}}},
		},
		"container exited": {
			mutate: func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				cs[0].State = exited
				return sbs, cs
			},
			want: []PodChange{{Pod: ref("u1"), Events: []Event{{ID: "c1", Type: ContainerDied}}}},
		},
		"container unknown": {
			mutate: func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				cs[0].State = unknown
				return sbs, cs
			},
			want: []PodChange{{Pod: ref("u1"), Events: []Event{{ID: "c1", Type: ContainerChanged}}}},
		},
		"container removed": {
			mutate: func(sbs []*runtimeapi.PodSandbox, _ []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				return sbs, nil
			},
			want: []PodChange{{Pod: ref("u1"), Events: []Event{{ID: "c1", Type: ContainerRemoved}}}},
		},
		"container restarted as a new instance": {
			mutate: func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				cs[0].State = exited
				return sbs, append(cs, container("c1-1", "sb1", "u1", running))
			},
			want: []PodChange{{Pod: ref("u1"), Events: []Event{{ID: "c1", Type: ContainerDied}, {ID: "c1-1", Type: ContainerStarted}}}},
		},
		"sandbox not ready": {
			mutate: func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				sbs[0].State = notReady
				return sbs, cs
			},
			want: []PodChange{{Pod: ref("u1"), Events: []Event{{ID: "sb1", Type: SandboxNotReady}}}},
		},
		"pod gone from the runtime": {
			mutate: func(_ []*runtimeapi.PodSandbox, _ []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				return nil, nil
			},
			want: []PodChange{{Pod: ref("u1"), Events: []Event{{ID: "c1", Type: ContainerRemoved}, {ID: "sb1", Type: SandboxRemoved}}}},
		},
		"new pod next to an unchanged one": {
			mutate: func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				return append(sbs, sandbox("sb2", "u2", ready)), cs
			},
			want: []PodChange{{Pod: ref("u2"), Events: []Event{{ID: "sb2", Type: SandboxReady}}}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			old := NewSnapshot(base())
			cur := NewSnapshot(tc.mutate(base()))
			g.Expect(Diff(old, cur)).To(Equal(tc.want))
			sbs, cs := tc.mutate(base())
			next := NextSnapshot(old, sbs, cs)
			g.Expect(Diff(old, next)).To(Equal(tc.want), "from a snapshot that keeps the unchanged records")
		})
	}
}

func TestDiffFromEmptyReportsEveryPod(t *testing.T) {
	g := NewWithT(t)
	cur := NewSnapshot([]*runtimeapi.PodSandbox{sandbox("sb2", "u2", ready), sandbox("sb1", "u1", notReady)}, nil)
	changes := Diff(nil, cur)
	g.Expect(changes).To(HaveLen(2))
	g.Expect(changes[0].Pod.UID).To(Equal(types.UID("u1")))
	g.Expect(changes[0].Events).To(Equal([]Event{{ID: "sb1", Type: SandboxNotReady}}))
	g.Expect(changes[1].Pod.UID).To(Equal(types.UID("u2")))
}

func ref(uid string) PodRef {
	return PodRef{UID: types.UID(uid), Namespace: "ns", Name: "pod-" + uid}
}

// BenchmarkDiffUnchanged is a relist of a node with 110 running pods where
// nothing changed: what the relister does every second at rest.
func BenchmarkDiffUnchanged(b *testing.B) {
	var sandboxes []*runtimeapi.PodSandbox
	var containers []*runtimeapi.Container
	for i := range 110 {
		uid := fmt.Sprintf("uid-%03d", i)
		sandboxes = append(sandboxes, sandbox("sb-"+uid, uid, runtimeapi.PodSandboxState_SANDBOX_READY))
		containers = append(containers, container("c-"+uid, "sb-"+uid, uid, runtimeapi.ContainerState_CONTAINER_RUNNING))
	}
	old, cur := NewSnapshot(sandboxes, containers), NewSnapshot(sandboxes, containers)
	b.ReportAllocs()
	for b.Loop() {
		if changes := Diff(old, cur); len(changes) != 0 {
			b.Fatalf("%d changes in an unchanged node", len(changes))
		}
	}
}

package pleg

import (
	"context"
	"maps"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
)

// groupByPod is what NewSnapshot returns, written as plainly as possible:
// the reference NextSnapshot's snapshots are compared with.
func groupByPod(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) Snapshot {
	s := Snapshot{}
	add := func(ref PodRef, id string, st ObjectState) {
		if ref.UID == "" {
			return
		}
		if s[ref.UID] == nil {
			s[ref.UID] = &PodRecord{Ref: ref, Objects: map[string]ObjectState{}}
		}
		s[ref.UID].Objects[id] = st
	}
	bySandbox := map[string]PodRef{}
	for _, sb := range sandboxes {
		ref := podRef(sb.GetLabels(), sb.GetMetadata())
		bySandbox[sb.GetId()] = ref
		add(ref, sb.GetId(), ObjectState{Kind: KindSandbox, State: sb.GetState().String()})
	}
	for _, c := range containers {
		ref := podRef(c.GetLabels(), nil)
		if ref.UID == "" {
			ref = bySandbox[c.GetPodSandboxId()]
		}
		add(ref, c.GetId(), ObjectState{Kind: KindContainer, State: c.GetState().String()})
	}
	return s
}

// deepCopy returns a copy of s that shares nothing with it.
func deepCopy(s Snapshot) Snapshot {
	out := make(Snapshot, len(s))
	for uid, rec := range s {
		out[uid] = &PodRecord{Ref: rec.Ref, Objects: maps.Clone(rec.Objects)}
	}
	return out
}

func TestNextSnapshotKeepsTheRecordsOfUnchangedPods(t *testing.T) {
	// Two pods of a sandbox and two containers each, and a third pod whose
	// container has no labels; each case changes the lists, and names the
	// pods whose records must be new.
	base := func() ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
		return []*runtimeapi.PodSandbox{sandbox("sb1", "u1", ready), sandbox("sb2", "u2", ready), sandbox("sb3", "u3", ready)},
			[]*runtimeapi.Container{
				container("c1a", "sb1", "u1", running), container("c1b", "sb1", "u1", running),
				container("c2a", "sb2", "u2", running), container("c2b", "sb2", "u2", running),
				container("c3", "sb3", "", running),
			}
	}
	type lists = func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container)
	for name, tc := range map[string]struct {
		change  lists
		changed []types.UID
	}{
		"nothing changed": {
			change: func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				return sbs, cs
			},
		},
		"listed in another order": {
			change: func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				return rotated(sbs, 1), rotated(cs, 3)
			},
		},
		"a container exited": {
			change: func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				cs[1].State = exited
				return sbs, cs
			},
			changed: []types.UID{"u1"},
		},
		"the first container of a pod exited": {
			change: func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				cs[2].State = exited
				return sbs, cs
			},
			changed: []types.UID{"u2"},
		},
		"a sandbox is not ready": {
			change: func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				sbs[0].State = notReady
				return sbs, cs
			},
			changed: []types.UID{"u1"},
		},
		"a container was removed": {
			change: func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				return sbs, append(cs[:1:1], cs[2:]...)
			},
			changed: []types.UID{"u1"},
		},
		"the last container of a pod was removed": {
			change: func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				return sbs, append(cs[:3:3], cs[4:]...)
			},
			changed: []types.UID{"u2"},
		},
		"a container was added": {
			change: func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				return sbs, append(cs, container("c2c", "sb2", "u2", created))
			},
			changed: []types.UID{"u2"},
		},
		"a container replaced by another": {
			change: func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				cs[0] = container("c1c", "sb1", "u1", running)
				return sbs, cs
			},
			changed: []types.UID{"u1"},
		},
		"a container listed twice in place of another": {
			change: func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				cs[1] = cs[0]
				return sbs, cs
			},
			// Listing an ID twice keeps no record: every pod's is new.
			changed: []types.UID{"u1", "u2", "u3"},
		},
		"a pod renamed": {
			change: func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				sbs[1].Labels[kubetypes.KubernetesPodNameLabel] = "other"
				return sbs, cs
			},
			changed: []types.UID{"u2"},
		},
		"a pod gone": {
			change: func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				return sbs[1:], cs[2:]
			},
		},
		"the sandbox of a container without labels gone": {
			change: func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				return sbs[:2], cs
			},
		},
		"a new pod": {
			change: func(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
				return append(sbs, sandbox("sb4", "u4", ready)), append(cs, container("c4", "sb4", "u4", running))
			},
			changed: []types.UID{"u4"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			prev := NewSnapshot(base())
			held := deepCopy(prev)
			sbs, cs := tc.change(base())
			next := NextSnapshot(prev, sbs, cs)

			g.Expect(next).To(Equal(groupByPod(sbs, cs)), "the snapshot of the lists")
			g.Expect(prev).To(Equal(held), "the previous snapshot and its records are as they were")
			for uid, rec := range next {
				if p := prev[uid]; slices.Contains(tc.changed, uid) || p == nil {
					g.Expect(rec).NotTo(BeIdenticalTo(p), "pod %s changed: a new record", uid)
				} else {
					g.Expect(rec).To(BeIdenticalTo(p), "pod %s did not change: its previous record", uid)
				}
			}
			for _, uid := range tc.changed {
				g.Expect(next).To(HaveKey(uid))
			}
		})
	}
}

func TestDistinctIDs(t *testing.T) {
	for name, tc := range map[string]struct {
		ids  []string
		want bool
	}{
		"none":                         {want: true},
		"one":                          {ids: []string{"a"}, want: true},
		"ordered":                      {ids: []string{"a", "b", "c"}, want: true},
		"ordered, repeated":            {ids: []string{"a", "b", "b", "c"}, want: false},
		"unordered":                    {ids: []string{"c", "a", "b"}, want: true},
		"unordered, repeated":          {ids: []string{"b", "c", "a", "b"}, want: false},
		"repeated before the disorder": {ids: []string{"a", "a", "c", "b"}, want: false},
	} {
		t.Run(name, func(t *testing.T) {
			var list []*runtimeapi.Container
			for _, id := range tc.ids {
				list = append(list, &runtimeapi.Container{Id: id})
			}
			if got := distinctIDs(list); got != tc.want {
				t.Errorf("distinctIDs(%q) = %v, want %v", tc.ids, got, tc.want)
			}
		})
	}
}

func TestStateNamesAreTheEnumsNames(t *testing.T) {
	for _, v := range []int32{0, 1, 2, 3, 4, 99, -1} {
		if got, want := sandboxState(runtimeapi.PodSandboxState(v)), runtimeapi.PodSandboxState(v).String(); got != want {
			t.Errorf("sandboxState(%d) = %q, want %q", v, got, want)
		}
		if got, want := containerState(runtimeapi.ContainerState(v)), runtimeapi.ContainerState(v).String(); got != want {
			t.Errorf("containerState(%d) = %q, want %q", v, got, want)
		}
	}
}

func TestRelistNeverModifiesARecordHandedOut(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	l := &listsOf{
		sandboxes:  []*runtimeapi.PodSandbox{sandbox("sb1", "u1", ready), sandbox("sb2", "u2", ready)},
		containers: []*runtimeapi.Container{container("c1", "sb1", "u1", running), container("c2", "sb2", "u2", running)},
	}
	r, err := New(l, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Relist(ctx)).To(Succeed())
	u1, u2 := r.Record("u1"), r.Record("u2")
	held := deepCopy(Snapshot{"u1": u1, "u2": u2})

	// u1's container exits, then is removed, then another takes its place.
	for _, cs := range [][]*runtimeapi.Container{
		{container("c1", "sb1", "u1", exited), l.containers[1]},
		{l.containers[1]},
		{container("c1-1", "sb1", "u1", running), l.containers[1]},
	} {
		l.containers = cs
		g.Expect(r.Relist(ctx)).To(Succeed())
		g.Expect(Snapshot{"u1": u1, "u2": u2}).To(Equal(held), "a record handed out is as it was")
		g.Expect(r.Record("u1").Objects).To(Equal(groupByPod(l.sandboxes, l.containers)["u1"].Objects))
		g.Expect(r.Record("u2")).To(BeIdenticalTo(u2), "the record of a pod that did not change is kept")
	}
}

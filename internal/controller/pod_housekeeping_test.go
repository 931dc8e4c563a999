package controller

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	gm "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeruntime "k8s.io/cri-api/pkg/apis/testing"
	kubetypes "k8s.io/kubelet/pkg/types"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/nodelet/nodelet/internal/checkpoint"
	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/podworkers"
)

func uids(s ...string) []types.UID {
	out := make([]types.UID, len(s))
	for i, u := range s {
		out[i] = types.UID(u)
	}
	return out
}

func set(s ...string) map[types.UID]bool {
	out := map[types.UID]bool{}
	for _, u := range s {
		out[types.UID(u)] = true
	}
	return out
}

func keyOf(uid string) podworkers.Key {
	return podworkers.Key{Namespace: "ns", Name: "pod-" + uid, UID: types.UID(uid)}
}

// everything is what the node holds of each of the pods: runtime objects,
// a pod directory, a checkpoint, a log directory, a cgroup and the
// reconciler's memory of it.
func everything(pods ...string) leftovers {
	left := leftovers{runtime: map[types.UID]podworkers.Key{}, logDirs: map[types.UID]string{}}
	for _, p := range pods {
		uid := types.UID(p)
		left.runtime[uid] = keyOf(p)
		left.dirs = append(left.dirs, uid)
		left.ckpts = append(left.ckpts, uid)
		left.cgroups = append(left.cgroups, uid)
		left.logDirs[uid] = "/logs/ns_pod-" + p + "_" + p
		left.held = append(left.held, uid)
		left.noted = append(left.noted, uid)
	}
	return left
}

// noRuntime is everything but runtime objects.
func noRuntime(pods ...string) leftovers {
	left := everything(pods...)
	left.runtime = map[types.UID]podworkers.Key{}
	return left
}

// cleaned is the sweep that removes all but the runtime objects of pods.
func cleaned(pods ...string) sweepPlan {
	p := sweepPlan{tearDown: uids(pods...), checkpoints: uids(pods...), cgroups: uids(pods...), release: uids(pods...), forget: uids(pods...)}
	for _, pod := range pods {
		p.logDirs = append(p.logDirs, "/logs/ns_pod-"+pod+"_"+pod)
	}
	return p
}

func TestPlanSweep(t *testing.T) {
	tests := []struct {
		name       string
		left       leftovers
		live, busy map[types.UID]bool
		want       sweepPlan
	}{
		{name: "an empty node", left: leftovers{}},
		{name: "a gone pod's runtime objects go to a worker; the rest waits for it",
			left: everything("a"), want: sweepPlan{stop: []podworkers.Key{keyOf("a")}}},
		{name: "a gone pod with nothing in the runtime loses all the rest",
			left: noRuntime("a"), want: cleaned("a")},
		{name: "nothing of a pod in the API server is touched",
			left: everything("a"), live: set("a")},
		{name: "nothing of a pod with a worker is touched",
			left: everything("a"), busy: set("a")},
		{name: "a pod in the API server keeps its checkpoint without runtime objects",
			left: noRuntime("a"), live: set("a")},
		{name: "an orphaned cgroup alone is removed",
			left: leftovers{cgroups: uids("a")}, want: sweepPlan{cgroups: uids("a")}},
		{name: "the cgroup of a pod in the API server is kept (adopted)",
			left: leftovers{cgroups: uids("a", "b")}, live: set("a"), want: sweepPlan{cgroups: uids("b")}},
		{name: "the cgroup of a gone pod still in the runtime waits for its worker",
			left: leftovers{cgroups: uids("a"), runtime: map[types.UID]podworkers.Key{"a": keyOf("a")}},
			want: sweepPlan{stop: []podworkers.Key{keyOf("a")}}},
		{name: "memory alone is released and forgotten",
			left: leftovers{held: uids("a", "a"), noted: uids("a")}, want: sweepPlan{release: uids("a"), forget: uids("a")}},
		{name: "several pods, sorted, each by its own rule",
			left: func() leftovers {
				left := noRuntime("d", "b", "c", "live", "busy")
				for _, p := range []string{"z", "y", "live", "busy"} {
					left.runtime[types.UID(p)] = keyOf(p)
				}
				return left
			}(),
			live: set("live"), busy: set("busy"),
			want: func() sweepPlan {
				p := cleaned("b", "c", "d")
				p.stop = []podworkers.Key{keyOf("y"), keyOf("z")}
				return p
			}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gm.NewWithT(t)
			g.Expect(planSweep(tt.left, tt.live, tt.busy)).To(gm.Equal(tt.want))
		})
	}
}

// fakeDirs are the pod directories of the volume manager.
type fakeDirs struct {
	dirs     []types.UID
	tornDown []types.UID
}

func (f *fakeDirs) ListPodDirs() ([]types.UID, error) { return slices.Clone(f.dirs), nil }

func (f *fakeDirs) TearDown(_ context.Context, uid types.UID) error {
	f.tornDown = append(f.tornDown, uid)
	f.dirs = slices.DeleteFunc(f.dirs, func(u types.UID) bool { return u == uid })
	return nil
}

// fakeWorkers are pod workers: keys run, started were started after the
// keys were listed, gone are the pods handed over.
type fakeWorkers struct {
	keys    []podworkers.Key
	started map[types.UID]bool
	gone    []podworkers.Key
}

func (f *fakeWorkers) Keys() []podworkers.Key { return f.keys }

func (f *fakeWorkers) Has(uid types.UID) bool {
	return f.started[uid] || slices.ContainsFunc(f.keys, func(k podworkers.Key) bool { return k.UID == uid }) ||
		slices.ContainsFunc(f.gone, func(k podworkers.Key) bool { return k.UID == uid })
}

func (f *fakeWorkers) Gone(key podworkers.Key, _ *corev1.Pod) { f.gone = append(f.gone, key) }

// fakeMemory is the reconciler's memory of pods.
type fakeMemory struct {
	held, noted        map[types.UID]bool
	released, forgoten []types.UID
}

func (f *fakeMemory) heldUIDs() []types.UID  { return keys(f.held) }
func (f *fakeMemory) notedUIDs() []types.UID { return keys(f.noted) }
func (f *fakeMemory) release(uid types.UID) {
	f.released = append(f.released, uid)
	delete(f.held, uid)
}

func (f *fakeMemory) forget(uid types.UID) {
	f.forgoten = append(f.forgoten, uid)
	delete(f.noted, uid)
}

func keys(m map[types.UID]bool) []types.UID {
	var out []types.UID
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestHousekeepingSweep sweeps a node holding something of five pods: one
// in the API server, one whose worker runs, one whose worker started while
// the sweep ran, one gone with runtime objects left and one gone with
// nothing left in the runtime. Only the last two are touched: the runtime
// objects of the first go to a gone-pod worker, everything of the second
// is removed.
func TestHousekeepingSweep(t *testing.T) {
	g := gm.NewWithT(t)
	ctx := context.Background()
	const node = "node-a"
	all := []string{"live", "busy", "late", "stale", "cleared"}

	rs := fakeruntime.NewFakeRuntimeService()
	rt, err := cri.New(rs, fakeruntime.NewFakeImageService(), cri.Options{NodeName: node})
	g.Expect(err).NotTo(gm.HaveOccurred())
	for _, p := range []string{"live", "busy", "late", "stale"} {
		labels := map[string]string{
			kubetypes.KubernetesPodNamespaceLabel: "ns",
			kubetypes.KubernetesPodNameLabel:      "pod-" + p,
			kubetypes.KubernetesPodUIDLabel:       p,
		}
		_, err := rt.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Namespace: "ns", Name: "pod-" + p, Uid: p},
			Labels:   labels,
		}, "")
		g.Expect(err).NotTo(gm.HaveOccurred())
	}
	// A sandbox another agent owns is none of housekeeping's business.
	_, err = rs.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Namespace: "ns", Name: "foreign", Uid: "foreign"},
		Labels:   map[string]string{kubetypes.KubernetesPodUIDLabel: "foreign"},
	}, "")
	g.Expect(err).NotTo(gm.HaveOccurred())

	store, err := checkpoint.NewFileStore(t.TempDir())
	g.Expect(err).NotTo(gm.HaveOccurred())
	logsDir := t.TempDir()
	dirs := &fakeDirs{}
	memory := &fakeMemory{held: map[types.UID]bool{}, noted: map[types.UID]bool{}}
	for _, p := range all {
		uid := types.UID(p)
		g.Expect(store.CreateCheckpoint(checkpointKey(uid), checkpoint.NewData(state.NewPodState(uid)))).To(gm.Succeed())
		g.Expect(os.MkdirAll(filepath.Join(logsDir, "ns_pod-"+p+"_"+p, "app"), 0o755)).To(gm.Succeed())
		dirs.dirs = append(dirs.dirs, uid)
		memory.held[uid], memory.noted[uid] = true, true
	}
	// A file in the log root is not a pod's log directory.
	g.Expect(os.WriteFile(filepath.Join(logsDir, "ns_x_y"), nil, 0o600)).To(gm.Succeed())

	livePod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod-live", UID: "live"}}
	workers := &fakeWorkers{keys: []podworkers.Key{keyOf("busy")}, started: set("late")}
	h := &housekeeper{
		pods:    fakeclient.NewClientBuilder().WithObjects(livePod).Build(),
		runtime: rt,
		dirs:    dirs,
		store:   store,
		logsDir: logsDir,
		workers: workers,
		memory:  memory,
	}
	g.Expect(h.sweep(ctx)).To(gm.Succeed())

	g.Expect(workers.gone).To(gm.Equal([]podworkers.Key{keyOf("stale")}), "the stale pod's runtime objects go to a gone-pod worker")
	g.Expect(dirs.tornDown).To(gm.Equal(uids("cleared")))
	ckpts, err := store.ListCheckpoints()
	g.Expect(err).NotTo(gm.HaveOccurred())
	g.Expect(ckpts).To(gm.ConsistOf("pod-live", "pod-busy", "pod-late", "pod-stale"))
	entries, err := os.ReadDir(logsDir)
	g.Expect(err).NotTo(gm.HaveOccurred())
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	g.Expect(names).To(gm.ConsistOf("ns_pod-live_live", "ns_pod-busy_busy", "ns_pod-late_late", "ns_pod-stale_stale", "ns_x_y"))
	g.Expect(memory.released).To(gm.Equal(uids("cleared")))
	g.Expect(memory.forgoten).To(gm.Equal(uids("cleared")))
	sandboxes, err := rs.ListPodSandbox(ctx, nil)
	g.Expect(err).NotTo(gm.HaveOccurred())
	g.Expect(sandboxes).To(gm.HaveLen(5), "housekeeping itself removes nothing from the runtime")

	// Once the stale pod's worker has removed its runtime objects and
	// finished, the next sweep removes the rest of it.
	for _, sb := range sandboxes {
		if sb.GetLabels()[kubetypes.KubernetesPodUIDLabel] == "stale" {
			g.Expect(rs.RemovePodSandbox(ctx, sb.GetId())).To(gm.Succeed())
		}
	}
	workers.gone = nil
	g.Expect(h.sweep(ctx)).To(gm.Succeed())
	g.Expect(workers.gone).To(gm.BeEmpty())
	g.Expect(dirs.tornDown).To(gm.Equal(uids("cleared", "stale")))
	g.Expect(memory.released).To(gm.Equal(uids("cleared", "stale")))
	ckpts, err = store.ListCheckpoints()
	g.Expect(err).NotTo(gm.HaveOccurred())
	g.Expect(ckpts).To(gm.ConsistOf("pod-live", "pod-busy", "pod-late"))
	g.Expect(filepath.Join(logsDir, "ns_pod-stale_stale")).NotTo(gm.BeADirectory())
}

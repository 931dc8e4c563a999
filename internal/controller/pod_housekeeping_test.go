package controller

import (
	"context"
	"errors"
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
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/nodelet/nodelet/internal/checkpoint"
	"github.com/nodelet/nodelet/internal/containerlogs"
	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/podcache"
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
	left := leftovers{runtime: map[types.UID]podworkers.Key{}, logDirs: map[types.UID]podLogDir{}}
	for _, p := range pods {
		uid := types.UID(p)
		left.runtime[uid] = keyOf(p)
		left.dirs = append(left.dirs, uid)
		left.ckpts = append(left.ckpts, uid)
		left.cgroups = append(left.cgroups, uid)
		left.logDirs[uid] = podLogDir{path: logDirOf(p), marked: true}
		left.held = append(left.held, uid)
		left.noted = append(left.noted, uid)
	}
	return left
}

func logDirOf(uid string) string { return "/logs/ns_pod-" + uid + "_" + uid }

// logDirs are the log directories of pods, marked or not.
func logDirs(marked bool, pods ...string) map[types.UID]podLogDir {
	out := map[types.UID]podLogDir{}
	for _, p := range pods {
		out[types.UID(p)] = podLogDir{path: logDirOf(p), marked: marked}
	}
	return out
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
		p.logDirs = append(p.logDirs, logDirOf(pod))
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
		{name: "a log directory and a cgroup of a pod nodelet has no record of (a kubelet's) are left alone",
			left: leftovers{logDirs: logDirs(false, "k"), cgroups: uids("k")}},
		{name: "a log directory marked as this node's is removed without any other record",
			left: leftovers{logDirs: logDirs(true, "a")}, want: sweepPlan{logDirs: []string{logDirOf("a")}}},
		{name: "a cgroup with a checkpoint is removed, the checkpoint with it",
			left: leftovers{cgroups: uids("a"), ckpts: uids("a")}, want: sweepPlan{cgroups: uids("a"), checkpoints: uids("a")}},
		{name: "a cgroup with a pod directory is removed",
			left: leftovers{cgroups: uids("a"), dirs: uids("a")}, want: sweepPlan{cgroups: uids("a"), tearDown: uids("a")}},
		{name: "a cgroup the reconciler remembers is removed",
			left: leftovers{cgroups: uids("a"), held: uids("a")}, want: sweepPlan{cgroups: uids("a"), release: uids("a")}},
		{name: "a pod nodelet ran before it marked log directories is removed by its checkpoint",
			left: leftovers{ckpts: uids("a"), logDirs: logDirs(false, "a"), cgroups: uids("a")},
			want: sweepPlan{checkpoints: uids("a"), logDirs: []string{logDirOf("a")}, cgroups: uids("a")}},
		{name: "nodelet's pods' unmarked log directories that stay get a marker, a kubelet's none",
			left: func() leftovers {
				left := leftovers{runtime: map[types.UID]podworkers.Key{"run": keyOf("run")}, ckpts: uids("live", "busy"),
					logDirs: logDirs(false, "live", "busy", "run", "api", "k")}
				left.logDirs["done"] = podLogDir{path: logDirOf("done"), marked: true}
				return left
			}(),
			live: set("live", "api", "done"), busy: set("busy"),
			want: sweepPlan{stop: []podworkers.Key{keyOf("run")},
				mark: []string{logDirOf("api"), logDirOf("busy"), logDirOf("live"), logDirOf("run")}}},
		{name: "the cgroup of a pod in the API server is kept (adopted)",
			left: leftovers{cgroups: uids("a", "b"), ckpts: uids("a", "b")}, live: set("a"),
			want: sweepPlan{cgroups: uids("b"), checkpoints: uids("b")}},
		{name: "the cgroup of a gone pod still in the runtime waits for its worker",
			left: leftovers{cgroups: uids("a"), runtime: map[types.UID]podworkers.Key{"a": keyOf("a")}},
			want: sweepPlan{stop: []podworkers.Key{keyOf("a")}}},
		{name: "the claims of a gone pod are unprepared once the runtime holds nothing of it",
			left: leftovers{claims: uids("a", "b", "live"), runtime: map[types.UID]podworkers.Key{"b": keyOf("b")}}, live: set("live"),
			want: sweepPlan{stop: []podworkers.Key{keyOf("b")}, unprepare: uids("a")}},
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

// fakeCgroups are pod cgroups: those of fail cannot be removed.
type fakeCgroups struct {
	uids    []types.UID
	fail    map[types.UID]bool
	removed []types.UID
}

func (f *fakeCgroups) PodUIDs() ([]types.UID, error) { return slices.Clone(f.uids), nil }

func (f *fakeCgroups) RemovePod(_ context.Context, uid types.UID) error {
	if f.fail[uid] {
		return errors.New("device or resource busy")
	}
	f.removed = append(f.removed, uid)
	f.uids = slices.DeleteFunc(f.uids, func(u types.UID) bool { return u == uid })
	return nil
}

// TestHousekeepingSweep sweeps a node holding something of five pods: one
// in the API server, one whose worker runs, one whose worker started while
// the sweep ran, one gone with runtime objects left and one gone with
// nothing left in the runtime. Only the last two are touched: the runtime
// objects of the first go to a gone-pod worker, everything of the second
// is removed. A kubelet's pod beside them, of which nodelet has no record
// but whose log directory and cgroup are where nodelet's are, is never
// touched.
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
	// A kubelet's pod: a log directory without a marker, a cgroup.
	g.Expect(os.MkdirAll(filepath.Join(logsDir, "ns_kube_kuid", "app"), 0o755)).To(gm.Succeed())
	// What a crash left of a pod of nodelet's: a marked log directory.
	g.Expect(os.MkdirAll(filepath.Join(logsDir, "ns_left_left", "app"), 0o755)).To(gm.Succeed())
	g.Expect(containerlogs.MarkPodDir(filepath.Join(logsDir, "ns_left_left"), node)).To(gm.Succeed())
	// Another node's marked one.
	g.Expect(os.MkdirAll(filepath.Join(logsDir, "ns_other_ouid"), 0o755)).To(gm.Succeed())
	g.Expect(containerlogs.MarkPodDir(filepath.Join(logsDir, "ns_other_ouid"), "node-b")).To(gm.Succeed())
	cgroups := &fakeCgroups{uids: uids("live", "stale", "cleared", "kuid", "ouid")}

	livePod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod-live", UID: "live"}}
	workers := &fakeWorkers{keys: []podworkers.Key{keyOf("busy")}, started: set("late")}
	h := &housekeeper{
		pods:    podcache.FromReader(fakeclient.NewClientBuilder().WithObjects(livePod).Build()),
		runtime: rt,
		dirs:    dirs,
		store:   store,
		logsDir: logsDir,
		node:    node,
		workers: workers,
		memory:  memory,
		cgroups: cgroups,
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
	g.Expect(names).To(gm.ConsistOf("ns_pod-live_live", "ns_pod-busy_busy", "ns_pod-late_late", "ns_pod-stale_stale", "ns_x_y",
		"ns_kube_kuid", "ns_other_ouid"))
	g.Expect(cgroups.removed).To(gm.Equal(uids("cleared")))
	for _, p := range []string{"live", "busy", "stale"} {
		g.Expect(containerlogs.PodDirOwner(filepath.Join(logsDir, "ns_pod-"+p+"_"+p))).To(gm.Equal(node),
			"nodelet's pod %s's log directory, made before markers, gets one", p)
	}
	g.Expect(containerlogs.PodDirOwner(filepath.Join(logsDir, "ns_kube_kuid"))).To(gm.BeEmpty(), "a kubelet's gets none")
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
	// Its cgroup cannot be removed yet: its checkpoint stays, the record
	// that makes the cgroup nodelet's at the next sweep.
	workers.gone = nil
	cgroups.fail = map[types.UID]bool{"stale": true}
	g.Expect(h.sweep(ctx)).NotTo(gm.Succeed())
	g.Expect(workers.gone).To(gm.BeEmpty())
	g.Expect(dirs.tornDown).To(gm.Equal(uids("cleared", "stale")))
	g.Expect(memory.released).To(gm.Equal(uids("cleared", "stale")))
	g.Expect(filepath.Join(logsDir, "ns_pod-stale_stale")).NotTo(gm.BeADirectory())
	ckpts, err = store.ListCheckpoints()
	g.Expect(err).NotTo(gm.HaveOccurred())
	g.Expect(ckpts).To(gm.ConsistOf("pod-live", "pod-busy", "pod-late", "pod-stale"))

	cgroups.fail = nil
	g.Expect(h.sweep(ctx)).To(gm.Succeed())
	g.Expect(cgroups.removed).To(gm.Equal(uids("cleared", "stale")))
	ckpts, err = store.ListCheckpoints()
	g.Expect(err).NotTo(gm.HaveOccurred())
	g.Expect(ckpts).To(gm.ConsistOf("pod-live", "pod-busy", "pod-late"))
	g.Expect(cgroups.uids).To(gm.ConsistOf(uids("live", "kuid", "ouid")), "the kubelet's and the other node's cgroups stay")
	g.Expect(filepath.Join(logsDir, "ns_kube_kuid", "app")).To(gm.BeADirectory())
}

func TestMarkerReads(t *testing.T) {
	tests := []struct {
		name       string
		logDirs    map[types.UID]podLogDir
		live, busy map[types.UID]bool
		known      map[types.UID]string
		want       []types.UID
	}{
		{name: "no log directory"},
		{name: "the directories of pods that may be gone are read, known or not",
			logDirs: logDirs(false, "b", "a"), known: map[types.UID]string{"a": logDirOf("a")}, want: uids("a", "b")},
		{name: "the directories of live and busy pods known to be marked are not read",
			logDirs: logDirs(false, "live", "busy"), live: set("live"), busy: set("busy"),
			known: map[types.UID]string{"live": logDirOf("live"), "busy": logDirOf("busy")}},
		{name: "the directories of live and busy pods not known to be marked are read",
			logDirs: logDirs(false, "live", "busy"), live: set("live"), busy: set("busy"), want: uids("busy", "live")},
		{name: "a directory known by another path is read",
			logDirs: logDirs(false, "live"), live: set("live"), known: map[types.UID]string{"live": "/logs/other_pod_live"},
			want: uids("live")},
		{name: "several pods, sorted, each by its own rule",
			logDirs: logDirs(false, "z", "live", "new", "busy", "k"), live: set("live", "new"), busy: set("busy"),
			known: map[types.UID]string{"live": logDirOf("live"), "busy": logDirOf("busy"), "z": logDirOf("z")},
			want:  uids("k", "new", "z")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gm.NewWithT(t)
			g.Expect(markerReads(tt.logDirs, tt.live, tt.busy, tt.known)).To(gm.Equal(tt.want))
		})
	}
}

// TestHousekeepingReadsTheMarkersOfGonePodsAgain sweeps a node whose two
// pods, each with a marked log directory and nothing else, are in the API
// server, then sweeps it again once both are gone and one's marker names
// another node: the directory whose marker names this node goes, the
// other stays, as if no sweep had seen them before.
func TestHousekeepingReadsTheMarkersOfGonePodsAgain(t *testing.T) {
	g := gm.NewWithT(t)
	ctx := context.Background()
	const node = "node-a"
	rt, err := cri.New(fakeruntime.NewFakeRuntimeService(), fakeruntime.NewFakeImageService(), cri.Options{NodeName: node})
	g.Expect(err).NotTo(gm.HaveOccurred())
	store, err := checkpoint.NewFileStore(t.TempDir())
	g.Expect(err).NotTo(gm.HaveOccurred())
	logsDir := t.TempDir()
	var pods []client.Object
	for _, p := range []string{"mine", "taken"} {
		dir := filepath.Join(logsDir, "ns_pod-"+p+"_"+p)
		g.Expect(os.MkdirAll(filepath.Join(dir, "app"), 0o755)).To(gm.Succeed())
		g.Expect(containerlogs.MarkPodDir(dir, node)).To(gm.Succeed())
		pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod-" + p, UID: types.UID(p)}})
	}
	h := &housekeeper{
		pods:    podcache.FromReader(fakeclient.NewClientBuilder().WithObjects(pods...).Build()),
		runtime: rt,
		dirs:    &fakeDirs{},
		store:   store,
		logsDir: logsDir,
		node:    node,
		workers: &fakeWorkers{},
		memory:  &fakeMemory{held: map[types.UID]bool{}, noted: map[types.UID]bool{}},
	}
	g.Expect(h.sweep(ctx)).To(gm.Succeed())
	g.Expect(filepath.Join(logsDir, "ns_pod-mine_mine")).To(gm.BeADirectory())
	g.Expect(filepath.Join(logsDir, "ns_pod-taken_taken")).To(gm.BeADirectory())

	g.Expect(containerlogs.MarkPodDir(filepath.Join(logsDir, "ns_pod-taken_taken"), "node-b")).To(gm.Succeed())
	h.pods = podcache.FromReader(fakeclient.NewClientBuilder().Build())
	g.Expect(h.sweep(ctx)).To(gm.Succeed())
	g.Expect(filepath.Join(logsDir, "ns_pod-mine_mine")).NotTo(gm.BeAnExistingFile())
	g.Expect(filepath.Join(logsDir, "ns_pod-taken_taken", "app")).To(gm.BeADirectory(), "another node's directory stays")
}

package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	kubetypes "k8s.io/kubelet/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/internal/checkpoint"
	"github.com/nodelet/nodelet/internal/containerlogs"
	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/nomount"
	"github.com/nodelet/nodelet/internal/podcache"
	"github.com/nodelet/nodelet/internal/podworkers"
	"github.com/nodelet/nodelet/internal/staticpod"
)

// housekeepingPeriod is how often the node is swept for what gone pods
// left behind.
const housekeepingPeriod = 15 * time.Second

// podDirs is what housekeeping needs of the volume manager.
type podDirs interface {
	ListPodDirs() ([]types.UID, error)
	TearDown(ctx context.Context, uid types.UID) error
}

// podCgroups is what housekeeping needs of the pod cgroup manager.
type podCgroups interface {
	PodUIDs() ([]types.UID, error)
	RemovePod(ctx context.Context, uid types.UID) error
}

// orphanStagings is what housekeeping needs of the CSI publisher.
type orphanStagings interface {
	UnstageOrphans(ctx context.Context) error
}

// podClaims is what housekeeping needs of the ResourceClaims manager.
type podClaims interface {
	// PodUIDs lists the pods that use a prepared claim.
	PodUIDs() []types.UID
	// Unprepare takes a pod off its claims, unpreparing those no other
	// pod uses.
	Unprepare(ctx context.Context, pod types.UID) error
}

// podWorkerSet is what housekeeping needs of the pod workers.
type podWorkerSet interface {
	Keys() []podworkers.Key
	Has(uid types.UID) bool
	Gone(key podworkers.Key, last *corev1.Pod)
}

// podMemory is what the pod reconciler keeps of pods in memory, as
// housekeeping sweeps it.
type podMemory interface {
	// heldUIDs lists the pods that hold something on the node: an
	// admission slot, probe workers; release frees it.
	heldUIDs() []types.UID
	release(uid types.UID)
	// notedUIDs lists the pods with a note of their own (a status write,
	// a deletion); forget drops it.
	notedUIDs() []types.UID
	forget(uid types.UID)
}

// housekeeper is the pod reconciler's sweep, like the kubelet's pod
// cleanups: right after start (once the cache has synced) and then
// periodically it finds what pods no longer in the API server left on the
// node — runtime objects, pod directories and their mounts, checkpoints, log
// directories, cgroups, admission slots, probe workers — and removes it.
// Runtime objects go to a gone-pod worker, which stops them with the
// kubelet's grace period rules first. Nothing of a pod that is in the API
// server, or whose worker still runs, is ever touched, and nothing nodelet
// did not make: the paths it shares with a kubelet by default (podLogsDir,
// the kubepods cgroup) hold the kubelet's pods too (see planSweep).
type housekeeper struct {
	// pods lists this node's pods, from the cache, which Start waits for.
	pods    podcache.Lister
	cache   cache.Cache
	runtime cri.BriefLister
	dirs    podDirs
	store   checkpoint.Manager
	logsDir string
	// node is the node nodelet runs: the pod log directories whose marker
	// names it are nodelet's (containerlogs.PodDirMarker).
	node    string
	workers podWorkerSet
	// static are the node's static pods (nil: none).
	static *staticpod.Store
	memory podMemory
	// cgroups, when set, holds the pods' cgroups.
	cgroups podCgroups
	// stagings, when set, unstages the CSI volumes no pod publishes any
	// more (a crash between a pod's unpublish and the unstage).
	stagings orphanStagings
	// claims, when set, holds the pods' prepared ResourceClaims.
	claims podClaims
	period time.Duration
	log    logr.Logger

	// markedDirs are the pod log directories, by pod, that a sweep found
	// marked as this node's or marked itself, while they are listed: the
	// marker of a pod that stays is not read again (see markerReads).
	// Only sweep uses it, and sweeps never run at once.
	markedDirs map[types.UID]string
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (h *housekeeper) NeedLeaderElection() bool { return false }

// Start sweeps once the cache has synced, then every period, until ctx ends.
func (h *housekeeper) Start(ctx context.Context) error {
	ctx = log.IntoContext(ctx, h.log)
	if !h.cache.WaitForCacheSync(ctx) {
		return nil
	}
	// Runtime objects of static pods not read yet are not leftovers.
	if err := wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) {
		return h.static.Ready(), nil
	}); err != nil {
		return nil
	}
	wait.NonSlidingUntilWithContext(ctx, func(ctx context.Context) {
		if err := h.sweep(ctx); err != nil && ctx.Err() == nil {
			h.log.Error(err, "Pod housekeeping failed")
		}
	}, h.period)
	return nil
}

// leftovers is what the node holds, by pod UID, read before the API
// server's pods so that a pod created meanwhile is never taken for gone.
// The runtime objects (those with nodelet's ownership label), pod
// directories and checkpoints (under rootDir) and the reconciler's memory
// are nodelet's records of its pods; the pod log directories and pod
// cgroups are what is found in podLogsDir and under kubepods, which may
// hold a kubelet's pods too. The pod log directories are listed before
// the API server's pods; their markers, which say who made them, are read
// after, once it is known which pods may be gone (readMarkers).
type leftovers struct {
	runtime map[types.UID]podworkers.Key
	dirs    []types.UID
	ckpts   []types.UID
	logDirs map[types.UID]podLogDir
	cgroups []types.UID
	// held and noted are the reconciler's memory (podMemory).
	held, noted []types.UID
	// claims are the pods that use a prepared ResourceClaim.
	claims []types.UID
}

// podLogDir is a pod log directory found in podLogsDir.
type podLogDir struct {
	path string
	// marked says its marker names this node: nodelet made it. read
	// leaves it unset; readMarkers sets it.
	marked bool
}

// sweepPlan is what one sweep removes.
type sweepPlan struct {
	// stop are the pods whose runtime objects go to gone-pod workers.
	stop []podworkers.Key
	// The rest is of gone pods the runtime holds nothing of any more: pod
	// directories to tear down, checkpoints and log directories to
	// remove, memory to release and forget.
	tearDown, checkpoints []types.UID
	logDirs               []string
	// cgroups are the pod cgroups to remove (what is left in them killed).
	cgroups         []types.UID
	release, forget []types.UID
	// unprepare are the pods whose ResourceClaims are unprepared.
	unprepare []types.UID
	// mark are the pod log directories of nodelet's pods that stay and
	// carry no marker of this node (made before nodelet marked them): they
	// get one, so that the log manager sweeps the links into them.
	mark []string
}

// planSweep decides what a sweep removes of what the node holds (left):
// only what belongs to pods that are gone, neither in the API server (live)
// nor with a worker (busy). Their runtime objects are handed to gone-pod
// workers, which stop them before they remove them; everything else of a
// gone pod goes only once the runtime holds nothing of it, for the worker
// that stops it still needs its volumes, checkpoint and logs.
//
// A pod log directory or a pod cgroup goes only when nodelet made it: a
// kubelet beside nodelet keeps its pods' log directories in the same
// podLogsDir by default, and its pod cgroups may be where nodelet looks.
// A pod log directory is nodelet's when its marker names this node, or when
// nodelet has a record of its pod (runtime objects, a pod directory, a
// checkpoint, memory): the pods it ran before it marked them. A pod cgroup
// cannot carry a marker: it is nodelet's when nodelet has a record of its
// pod. The checkpoint is the record that outlives the others (sweep
// removes it last), so a cgroup whose removal fails is tried again. The
// lists are sorted by UID.
func planSweep(left leftovers, live, busy map[types.UID]bool) sweepPlan {
	gone := func(uid types.UID) bool { return !live[uid] && !busy[uid] }
	clean := func(uid types.UID) bool {
		_, inRuntime := left.runtime[uid]
		return gone(uid) && !inRuntime
	}
	recorded := make(map[types.UID]bool, len(left.runtime)+len(left.dirs))
	for _, uids := range [][]types.UID{slices.Collect(maps.Keys(left.runtime)), left.dirs, left.ckpts, left.held, left.noted, left.claims} {
		for _, uid := range uids {
			recorded[uid] = true
		}
	}
	ours := func(uid types.UID) bool { return recorded[uid] || live[uid] || busy[uid] }
	var p sweepPlan
	for _, uid := range slices.Sorted(maps.Keys(left.runtime)) {
		if gone(uid) {
			p.stop = append(p.stop, left.runtime[uid])
		}
	}
	cleanOf := func(uids []types.UID) []types.UID {
		var out []types.UID
		for _, uid := range slices.Compact(slices.Sorted(slices.Values(uids))) {
			if clean(uid) {
				out = append(out, uid)
			}
		}
		return out
	}
	p.tearDown = cleanOf(left.dirs)
	p.checkpoints = cleanOf(left.ckpts)
	for _, uid := range slices.Sorted(maps.Keys(left.logDirs)) {
		d := left.logDirs[uid]
		switch {
		case clean(uid) && (d.marked || recorded[uid]):
			p.logDirs = append(p.logDirs, d.path)
		case !d.marked && ours(uid) && !clean(uid):
			p.mark = append(p.mark, d.path)
		}
	}
	for _, uid := range cleanOf(left.cgroups) {
		if recorded[uid] {
			p.cgroups = append(p.cgroups, uid)
		}
	}
	p.release = cleanOf(left.held)
	p.forget = cleanOf(left.noted)
	p.unprepare = cleanOf(left.claims)
	return p
}

func (h *housekeeper) sweep(ctx context.Context) error {
	left, err := h.read(ctx)
	if err != nil {
		return err
	}
	pods, err := h.pods.ListPods(ctx)
	if err != nil {
		return fmt.Errorf("listing this node's pods: %w", err)
	}
	live := make(map[types.UID]bool, len(pods))
	for _, pod := range pods {
		live[pod.UID] = true
	}
	for uid := range h.static.UIDs() {
		live[uid] = true
	}
	keys := h.workers.Keys()
	busy := make(map[types.UID]bool, len(keys))
	for _, k := range keys {
		busy[k.UID] = true
	}
	h.readMarkers(ctx, left.logDirs, live, busy)
	p := planSweep(left, live, busy)

	// A worker started since the workers were listed owns its pod.
	started := func(uid types.UID) bool { return h.workers.Has(uid) }
	for _, key := range p.stop {
		if !started(key.UID) {
			log.FromContext(ctx).Info("Found runtime objects of a pod gone from the API server", "pod", klog.KRef(key.Namespace, key.Name), "podUID", key.UID)
			h.workers.Gone(key, nil)
		}
	}
	// The checkpoint goes last, and stays while anything else of its pod
	// could not be removed: it is the record that makes the log directory
	// and the cgroup nodelet's to remove at the next sweep.
	var errs []error
	failed := map[types.UID]bool{}
	fail := func(uid types.UID, err error) {
		errs = append(errs, err)
		failed[uid] = true
	}
	for _, uid := range p.tearDown {
		if !started(uid) {
			if err := h.dirs.TearDown(ctx, uid); err != nil {
				fail(uid, err)
			}
		}
	}
	for _, dir := range p.logDirs {
		if uid := logDirUID(filepath.Base(dir)); !started(uid) {
			if err := nomount.RemoveAll(dir); err != nil {
				fail(uid, fmt.Errorf("removing log directory of gone pod %s: %w", uid, err))
			}
		}
	}
	for _, uid := range p.unprepare {
		if !started(uid) && h.claims != nil {
			// Its worker went before it unprepared them (a crash).
			log.FromContext(ctx).Info("Unpreparing the ResourceClaims of a pod gone from the node", "podUID", uid)
			if err := h.claims.Unprepare(ctx, uid); err != nil {
				fail(uid, err)
			}
		}
	}
	for _, uid := range p.cgroups {
		if !started(uid) && h.cgroups != nil {
			log.FromContext(ctx).Info("Removing the cgroup of a pod gone from the node", "podUID", uid)
			if err := h.cgroups.RemovePod(ctx, uid); err != nil {
				fail(uid, err)
			}
		}
	}
	for _, uid := range p.checkpoints {
		if !started(uid) && !failed[uid] {
			if err := h.store.RemoveCheckpoint(checkpointKey(uid)); err != nil {
				errs = append(errs, fmt.Errorf("removing checkpoint of gone pod %s: %w", uid, err))
			}
		}
	}
	for _, dir := range p.mark {
		err := containerlogs.MarkPodDir(dir, h.node)
		if err == nil && h.node != "" {
			h.markedDirs[logDirUID(filepath.Base(dir))] = dir
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for _, uid := range p.release {
		if !started(uid) {
			h.memory.release(uid)
		}
	}
	for _, uid := range p.forget {
		if !started(uid) {
			h.memory.forget(uid)
		}
	}
	if h.stagings != nil {
		if err := h.stagings.UnstageOrphans(ctx); err != nil {
			errs = append(errs, fmt.Errorf("unstaging CSI volumes no pod publishes: %w", err))
		}
	}
	return errors.Join(errs...)
}

// logDirUID is the pod UID of a pod log directory name,
// <namespace>_<name>_<uid>: a UID holds no underscore. It is "" for
// another name.
func logDirUID(name string) types.UID {
	i := strings.LastIndexByte(name, '_')
	if i <= 0 {
		return ""
	}
	return types.UID(name[i+1:])
}

// read lists what the node holds of pods: runtime objects nodelet owns,
// pod directories, checkpoints, log directories (their markers are read
// later, by readMarkers), pod cgroups, and the reconciler's memory.
func (h *housekeeper) read(ctx context.Context) (leftovers, error) {
	left := leftovers{}
	add := func(labels map[string]string) {
		uid := types.UID(labels[kubetypes.KubernetesPodUIDLabel])
		if uid != "" {
			left.runtime[uid] = podworkers.Key{
				Namespace: labels[kubetypes.KubernetesPodNamespaceLabel],
				Name:      labels[kubetypes.KubernetesPodNameLabel],
				UID:       uid,
			}
		}
	}
	sandboxes, err := h.runtime.ListPodSandboxes(ctx, nil)
	if err != nil {
		return left, err
	}
	// Sized for a pod per sandbox: on a node at rest the maps of a sweep
	// are most of what it allocates, four times a minute.
	left.runtime = make(map[types.UID]podworkers.Key, len(sandboxes))
	for _, sb := range sandboxes {
		add(sb.Labels)
	}
	containers, err := h.runtime.ListContainers(ctx, nil)
	if err != nil {
		return left, err
	}
	for _, c := range containers {
		add(c.Labels)
	}
	if left.dirs, err = h.dirs.ListPodDirs(); err != nil {
		return left, err
	}
	keys, err := h.store.ListCheckpoints()
	if err != nil {
		return left, fmt.Errorf("listing checkpoints: %w", err)
	}
	for _, k := range keys {
		if uid, ok := strings.CutPrefix(k, "pod-"); ok {
			left.ckpts = append(left.ckpts, types.UID(uid))
		}
	}
	entries, err := os.ReadDir(h.logsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return left, fmt.Errorf("listing pod log directories: %w", err)
	}
	left.logDirs = make(map[types.UID]podLogDir, len(entries))
	for _, e := range entries {
		uid := logDirUID(e.Name())
		if !e.IsDir() || uid == "" {
			continue
		}
		left.logDirs[uid] = podLogDir{path: filepath.Join(h.logsDir, e.Name())}
	}
	if h.cgroups != nil {
		if left.cgroups, err = h.cgroups.PodUIDs(); err != nil {
			return left, err
		}
	}
	left.held, left.noted = h.memory.heldUIDs(), h.memory.notedUIDs()
	if h.claims != nil {
		left.claims = h.claims.PodUIDs()
	}
	return left, nil
}

// markerReads lists, sorted, the pods of logDirs whose log directory's
// marker a sweep reads: every pod that may be gone (neither live nor
// busy), for whether its directory is removed hangs on its marker, read
// afresh; and the others whose directory is not known to be marked
// (known: the directories by pod an earlier sweep found or made marked),
// for whether it gets a marker hangs on it. The directories of the rest
// are marked: on a node at rest no marker is read.
func markerReads(logDirs map[types.UID]podLogDir, live, busy map[types.UID]bool, known map[types.UID]string) []types.UID {
	var out []types.UID
	for uid, d := range logDirs {
		if gone := !live[uid] && !busy[uid]; gone || known[uid] != d.path {
			out = append(out, uid)
		}
	}
	slices.Sort(out)
	return out
}

// readMarkers sets whether each of the pod log directories of logDirs is
// marked as this node's: by its marker for those markerReads gives, else
// by markedDirs. A directory removed since it was listed is dropped; a
// marker that cannot be read is logged and counts as none (the directory
// is nodelet's only by a record of its pod). markedDirs keeps the
// directories listed, and learns what was read.
//
// The markers are read after the API server's pods are listed, the
// directories before: a pod created meanwhile has no directory in
// logDirs, and a marker read later is the one read before or one its pod's
// worker, which the sweep sees started, wrote since.
func (h *housekeeper) readMarkers(ctx context.Context, logDirs map[types.UID]podLogDir, live, busy map[types.UID]bool) {
	if h.markedDirs == nil {
		h.markedDirs = map[types.UID]string{}
	}
	for uid, path := range h.markedDirs {
		if logDirs[uid].path != path {
			delete(h.markedDirs, uid)
		}
	}
	for _, uid := range markerReads(logDirs, live, busy, h.markedDirs) {
		dir := logDirs[uid].path
		delete(h.markedDirs, uid)
		owner, err := containerlogs.PodDirOwner(dir)
		if errors.Is(err, os.ErrNotExist) {
			delete(logDirs, uid) // removed since it was listed
			continue
		}
		if err != nil {
			log.FromContext(ctx).Error(err, "Unable to read whose pod log directory this is", "path", dir)
		}
		if h.node != "" && owner == h.node {
			h.markedDirs[uid] = dir
		}
	}
	for uid, d := range logDirs {
		d.marked = h.markedDirs[uid] == d.path
		logDirs[uid] = d
	}
}

// heldUIDs implements podMemory: the pods admitted, probed or holding a
// user namespace range.
func (r *PodReconciler) heldUIDs() []types.UID {
	uids := append(r.Admit.UIDs(), r.Prober.PodUIDs()...)
	if r.Exec != nil && r.Exec.UserNamespaces != nil {
		uids = append(uids, r.Exec.UserNamespaces.UIDs()...)
	}
	return uids
}

// notedUIDs implements podMemory: the pods with a status write, a
// deletion or a start time noted.
func (r *PodReconciler) notedUIDs() []types.UID {
	var uids []types.UID
	for _, m := range []*sync.Map{&r.written, &r.deleted} {
		m.Range(func(k, _ any) bool {
			uids = append(uids, k.(types.UID))
			return true
		})
	}
	if r.Metrics != nil {
		uids = append(uids, r.Metrics.uids()...)
	}
	return uids
}

// forget implements podMemory.
func (r *PodReconciler) forget(uid types.UID) {
	r.written.Delete(uid)
	r.deleted.Delete(uid)
	r.settledSyncs.Delete(uid)
	if r.Metrics != nil {
		r.Metrics.forget(uid)
	}
}

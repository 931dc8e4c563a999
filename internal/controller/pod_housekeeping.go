package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	kubetypes "k8s.io/kubelet/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/internal/podworkers"
)

// housekeepingPeriod is how often the node is swept for what gone pods
// left behind.
const housekeepingPeriod = 15 * time.Second

// podDirs is what housekeeping needs of the volume manager.
type podDirs interface {
	ListPodDirs() ([]types.UID, error)
	TearDown(ctx context.Context, uid types.UID) error
}

// housekeeper is the pod reconciler's sweep, like the kubelet's pod
// cleanups: right after start (once the cache has synced) and then
// periodically it finds what pods no longer in the API server left on the
// node — runtime objects, pod directories and their mounts, checkpoints, log
// directories, admission slots, probe workers — and removes it. Runtime
// objects go to a gone-pod worker, which stops them with the kubelet's
// grace period rules first. Nothing of a pod that is in the API server, or
// whose worker still runs, is ever touched.
type housekeeper struct {
	r       *PodReconciler
	cache   cache.Cache
	dirs    podDirs
	logsDir string
	period  time.Duration
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (h *housekeeper) NeedLeaderElection() bool { return false }

// Start sweeps once the cache has synced, then every period, until ctx ends.
func (h *housekeeper) Start(ctx context.Context) error {
	logger := h.r.Log.WithName("housekeeping")
	ctx = log.IntoContext(ctx, logger)
	if !h.cache.WaitForCacheSync(ctx) {
		return nil
	}
	t := time.NewTicker(h.period)
	defer t.Stop()
	for {
		if err := h.sweep(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Pod housekeeping failed")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// leftovers is what the node holds, by pod UID, read before the API
// server's pods so that a pod created meanwhile is never taken for gone.
type leftovers struct {
	runtime  map[types.UID]podworkers.Key
	dirs     []types.UID
	ckpts    []types.UID
	logDirs  map[types.UID]string
	admitted []types.UID
	probed   []types.UID
}

func (h *housekeeper) sweep(ctx context.Context) error {
	left, err := h.read(ctx)
	if err != nil {
		return err
	}
	var pods corev1.PodList
	if err := h.r.List(ctx, &pods); err != nil {
		return fmt.Errorf("listing this node's pods: %w", err)
	}
	live := map[types.UID]bool{}
	for i := range pods.Items {
		live[pods.Items[i].UID] = true
	}
	busy := map[types.UID]bool{}
	for _, k := range h.r.Workers.Keys() {
		busy[k.UID] = true
	}
	gone := func(uid types.UID) bool { return !live[uid] && !busy[uid] && !h.r.Workers.Has(uid) }

	var errs []error
	for uid, key := range left.runtime {
		if gone(uid) {
			log.FromContext(ctx).Info("Found runtime objects of a pod gone from the API server", "pod", klog.KRef(key.Namespace, key.Name), "podUID", uid)
			h.r.Workers.Gone(key, nil)
		}
	}
	// The rest belongs to pods with nothing in the runtime any more.
	clean := func(uid types.UID) bool { _, inRuntime := left.runtime[uid]; return gone(uid) && !inRuntime }
	for _, uid := range left.dirs {
		if clean(uid) {
			if err := h.dirs.TearDown(ctx, uid); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, uid := range left.ckpts {
		if clean(uid) {
			if err := h.r.Store.RemoveCheckpoint(checkpointKey(uid)); err != nil {
				errs = append(errs, fmt.Errorf("removing checkpoint of gone pod %s: %w", uid, err))
			}
		}
	}
	for uid, dir := range left.logDirs {
		if clean(uid) {
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, fmt.Errorf("removing log directory of gone pod %s: %w", uid, err))
			}
		}
	}
	for _, uid := range append(left.admitted, left.probed...) {
		if gone(uid) {
			h.r.release(uid)
		}
	}
	h.r.written.Range(func(k, _ any) bool {
		if uid := k.(types.UID); gone(uid) {
			h.r.written.Delete(uid)
		}
		return true
	})
	h.r.deleted.Range(func(k, _ any) bool {
		if uid := k.(types.UID); gone(uid) {
			h.r.deleted.Delete(uid)
		}
		return true
	})
	return errors.Join(errs...)
}

// read lists what the node holds of pods: runtime objects nodelet owns,
// pod directories, checkpoints, log directories, admission slots and probe
// workers.
func (h *housekeeper) read(ctx context.Context) (leftovers, error) {
	left := leftovers{runtime: map[types.UID]podworkers.Key{}, logDirs: map[types.UID]string{}}
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
	rt := h.r.Runtime
	sandboxes, err := rt.ListPodSandboxes(ctx, nil)
	if err != nil {
		return left, err
	}
	for _, sb := range sandboxes {
		add(sb.Labels)
	}
	containers, err := rt.ListContainers(ctx, nil)
	if err != nil {
		return left, err
	}
	for _, c := range containers {
		add(c.Labels)
	}
	if left.dirs, err = h.dirs.ListPodDirs(); err != nil {
		return left, err
	}
	keys, err := h.r.Store.ListCheckpoints()
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
	for _, e := range entries {
		// <namespace>_<name>_<uid>: a UID holds no underscore.
		if i := strings.LastIndexByte(e.Name(), '_'); e.IsDir() && i > 0 {
			left.logDirs[types.UID(e.Name()[i+1:])] = filepath.Join(h.logsDir, e.Name())
		}
	}
	left.admitted = h.r.Admit.UIDs()
	left.probed = h.r.Prober.PodUIDs()
	return left, nil
}

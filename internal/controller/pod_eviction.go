package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/internal/eviction"
	"github.com/nodelet/nodelet/internal/kuberuntime/planner"
	"github.com/nodelet/nodelet/internal/nodeinfo"
	"github.com/nodelet/nodelet/internal/stats"
	"github.com/nodelet/nodelet/internal/volume"
)

// setupEviction adds the eviction manager to mgr: it measures the node's
// signals, hands the pods it evicts to the pod reconciler, and tells
// admission and the node reconciler the node's pressure conditions.
func setupEviction(mgr ctrl.Manager, d *Deps, r *PodReconciler, volumes *volume.Manager) error {
	cfg := d.Config
	summary := &stats.Provider{
		NodeName: cfg.NodeName, Pods: mgr.GetClient(), Runtime: d.Runtime, Host: nodeinfo.OSHost{},
		RootDir: cfg.RootDir, PodLogsDir: cfg.PodLogsDir, Volumes: d.VolumeStats(),
	}
	m, err := eviction.New(eviction.Options{
		Config:    cfg,
		Host:      nodeinfo.OSHost{},
		ImageFs:   d.Runtime,
		Stats:     summary,
		Volumes:   volumes,
		Pods:      mgr.GetClient(),
		PodLister: r.shared,
		Evictor:   r,
		Reclaimer: engineReclaimer{d},
		Recorder:  r.Recorder,
		Clock:     clock.RealClock{},
		Log:       mgr.GetLogger().WithName("eviction"),
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(m); err != nil {
		return fmt.Errorf("adding the eviction manager: %w", err)
	}
	r.Admit.Pressure = func() []corev1.NodeConditionType {
		conds, _ := m.Conditions()
		return conds
	}
	d.eviction = m
	return nil
}

// engineReclaimer is the pod engine's garbage collectors (set up after
// the eviction manager), for the eviction manager; without them nothing is
// reclaimed.
type engineReclaimer struct{ d *Deps }

func (e engineReclaimer) collectors() *GarbageCollectors {
	if e.d.engine == nil {
		return nil
	}
	return e.d.engine.gc
}

func (e engineReclaimer) DeleteAllUnusedContainers(ctx context.Context) error {
	if gc := e.collectors(); gc != nil && gc.Containers != nil {
		return gc.Containers.DeleteAllUnusedContainers(ctx)
	}
	return nil
}

func (e engineReclaimer) DeleteUnusedImages(ctx context.Context) (int64, error) {
	if gc := e.collectors(); gc != nil && gc.Images != nil {
		return gc.Images.DeleteUnusedImages(ctx)
	}
	return 0, nil
}

// Evict hands the eviction manager's decision (or the node shutdown
// manager's) to the pod's sync, which stops the pod for good and reports it
// Failed with the eviction's reason (Evicted unless it names another). It
// reports false when the pod was evicted already.
func (r *PodReconciler) Evict(pod *corev1.Pod, ev planner.Eviction) bool {
	if _, loaded := r.evictions.LoadOrStore(pod.UID, &ev); loaded {
		return false
	}
	r.Workers.Update(pod)
	return true
}

// Evicted reports whether the eviction manager evicted the pod and its
// status is not terminal yet.
func (r *PodReconciler) Evicted(uid types.UID) bool {
	_, ok := r.evictions.Load(uid)
	return ok
}

// eviction is the pod's eviction, nil when it was not evicted.
func (r *PodReconciler) eviction(uid types.UID) *planner.Eviction {
	if v, ok := r.evictions.Load(uid); ok {
		return v.(*planner.Eviction)
	}
	return nil
}

// nodePressure is the node's pressure as the eviction manager reports it,
// for the node reconciler; ok is false when there is no eviction manager
// (the pod controller is off) or it has not looked at the node yet.
func nodePressure(d *Deps) (p nodeinfo.Pressure, ok bool) {
	if d.eviction == nil {
		return p, false
	}
	return d.eviction.Pressure()
}

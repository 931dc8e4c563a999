package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/gc"
	"github.com/nodelet/nodelet/internal/kuberuntime/planner"
)

// GarbageCollectors are the node's container and image GC, which the
// eviction manager calls first when the node is short of disk
// (DeleteAllUnusedContainers, DeleteUnusedImages).
type GarbageCollectors struct {
	Containers *gc.ContainerGC
	Images     *gc.ImageGC
}

// setupGarbageCollection adds container GC and image GC to mgr, and keeps
// them in d's pod engine (podEngine.gc) for the eviction manager. Container
// GC removes through the pod reconciler's executor, the one place that
// removes containers with their logs; a pod is live while the API server
// has it or its worker runs.
func setupGarbageCollection(mgr ctrl.Manager, d *Deps, r *PodReconciler) error {
	cfg := d.Config
	eng, err := podEngineFor(mgr, d)
	if err != nil {
		return err
	}
	log := mgr.GetLogger().WithName("gc")
	containers := &gc.ContainerGC{
		Runtime:   d.Runtime,
		Collector: r.Exec,
		Policy:    containerPolicy(cfg),
		Period:    positive(cfg.ContainerGC.Period.Duration, time.Minute),
		Ready:     mgr.GetCache().WaitForCacheSync,
		Clock:     clock.RealClock{},
		Log:       log.WithName("containers"),
		Live: func(ctx context.Context) (map[types.UID]bool, error) {
			pods, err := r.shared.ListPods(ctx)
			if err != nil {
				return nil, fmt.Errorf("listing this node's pods: %w", err)
			}
			live := make(map[types.UID]bool, len(pods))
			for _, pod := range pods {
				live[pod.UID] = true
			}
			for _, k := range r.Workers.Keys() {
				live[k.UID] = true
			}
			for uid := range r.Static.UIDs() {
				live[uid] = true
			}
			return live, nil
		},
	}
	images := &gc.ImageGC{
		Runtime: d.Runtime,
		Policy: gc.ImagePolicy{
			HighThresholdPercent: int(ptr.Deref(cfg.ImageGCHighThresholdPercent, v1alpha1.DefaultImageGCHighThreshold)),
			LowThresholdPercent:  int(ptr.Deref(cfg.ImageGCLowThresholdPercent, v1alpha1.DefaultImageGCLowThreshold)),
			MinAge:               cfg.ImageMinimumGCAge.Duration,
			MaxAge:               cfg.ImageMaximumGCAge.Duration,
		},
		Period: positive(cfg.ImageGCPeriod.Duration, 5*time.Minute),
		// As the kubelet's --pod-infra-container-image: kept from GC;
		// empty, the runtime's own sandbox image is.
		SandboxImage: cfg.PodInfraContainerImage,
		Recorder:     eng.recorder,
		// The kubelet's reference to its Node in events.
		Node:  &corev1.ObjectReference{Kind: "Node", Name: cfg.NodeName, UID: types.UID(cfg.NodeName)},
		Clock: clock.RealClock{},
		Log:   log.WithName("images"),
		VolumeImages: func(ctx context.Context) ([]string, error) {
			pods, err := r.shared.ListPods(ctx)
			if err != nil {
				return nil, fmt.Errorf("listing this node's pods: %w", err)
			}
			return volumeImages(pods), nil
		},
	}
	if records := eng.pullRecords; records != nil {
		images.Listed = records.Reconcile
		images.Removed = records.Forget
	}
	for _, run := range []manager.Runnable{containers, images} {
		if err := mgr.Add(run); err != nil {
			return fmt.Errorf("adding garbage collection: %w", err)
		}
	}
	eng.gc = &GarbageCollectors{Containers: containers, Images: images}
	return nil
}

// volumeImages are the references of the image volumes of pods that have
// not finished, which image GC must keep.
func volumeImages(pods []*corev1.Pod) []string {
	var refs []string
	for _, pod := range pods {
		if p := pod.Status.Phase; p == corev1.PodSucceeded || p == corev1.PodFailed {
			continue
		}
		for _, vol := range pod.Spec.Volumes {
			if vol.Image != nil {
				refs = append(refs, vol.Image.Reference)
			}
		}
	}
	return refs
}

// containerPolicy is the containerGC section of cfg.
func containerPolicy(cfg *v1alpha1.NodeletConfiguration) gc.ContainerPolicy {
	p := gc.ContainerPolicy{MinAge: cfg.ContainerGC.MinimumGCAge.Duration, MaxPerPodContainer: 1, MaxContainers: -1}
	if n := cfg.ContainerGC.MaxPerPodContainer; n != nil {
		p.MaxPerPodContainer = int(*n)
	}
	if n := cfg.ContainerGC.MaxContainers; n != nil {
		p.MaxContainers = int(*n)
	}
	return p
}

// garbagePolicy is what a pod's worker keeps of its pod's dead containers
// at now: the containerGC policy's per-container part.
func garbagePolicy(cfg *v1alpha1.NodeletConfiguration, now time.Time) planner.GarbagePolicy {
	if cfg == nil {
		return planner.DefaultGarbagePolicy(now)
	}
	p := containerPolicy(cfg)
	return planner.GarbagePolicy{MinAge: p.MinAge, MaxPerPodContainer: p.MaxPerPodContainer, Now: now}
}

// positive is d, or def when d is not positive (a configuration that was
// not defaulted).
func positive(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

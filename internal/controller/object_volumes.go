package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodelet/nodelet/internal/ctrlqueue"
	"github.com/nodelet/nodelet/internal/executor"
	"github.com/nodelet/nodelet/internal/objectstore"
	"github.com/nodelet/nodelet/internal/volume"
)

// objectVolumesReconciler is the ConfigMap and Secret reconcilers' common
// part. Its requests name a referenced object that changed (the store's
// change feed); it rewrites, atomically, every volume of every local pod
// that projects the object, directly or as a projected source, and
// enqueues those of the pods whose start may have waited for it. Containers
// are not restarted: their environment keeps the values it had at start.
// A deleted object empties the optional sources that show it; a volume
// that requires it keeps its files and gets a FailedMount Event, as with
// the kubelet, until the object is created again.
type objectVolumesReconciler struct {
	kind   objectstore.Kind
	pods   client.Reader
	engine *podEngine
	// projecting names the volumes of pod that project the object name.
	projecting func(pod *corev1.Pod, name string) []string
}

// setupObjectVolumesController registers r as the controller name fed by
// the store's changes of r.kind.
func setupObjectVolumesController(mgr ctrl.Manager, name string, r *objectVolumesReconciler) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WatchesRawSource(r.engine.store.Source(r.kind)).
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true), NewQueue: ctrlqueue.New}).
		Complete(r)
}

func (r *objectVolumesReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var errs []error
	for _, key := range r.engine.store.PodsReferencing(r.kind, req.Namespace, req.Name) {
		pod := &corev1.Pod{}
		if err := r.pods.Get(ctx, key, pod); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("reading pod %s: %w", key, err))
			}
			continue
		}
		if err := r.updatePod(ctx, pod, req.Name); err != nil {
			errs = append(errs, err)
		}
	}
	return ctrl.Result{}, errors.Join(errs...)
}

// updatePod writes the object to pod's volumes and enqueues the pod when
// its sync may be waiting for it.
func (r *objectVolumesReconciler) updatePod(ctx context.Context, pod *corev1.Pod, name string) error {
	if waitsForObjects(pod, r.engine.volumes.IsSetUp(pod.UID)) {
		r.engine.pods.Enqueue(client.ObjectKeyFromObject(pod))
	}
	volumes := r.projecting(pod, name)
	if len(volumes) == 0 {
		return nil
	}
	err := r.engine.volumes.Update(ctx, pod, volumes)
	if err == nil {
		log.FromContext(ctx).V(1).Info("Updated volumes", "pod", klog.KObj(pod), "kind", r.kind, "volumes", volumes)
		return nil
	}
	messages, retry := volumeUpdateFailures(err)
	for _, m := range messages {
		r.engine.recorder.Event(pod, corev1.EventTypeWarning, executor.EventFailedMount, m)
	}
	if retry != nil {
		return fmt.Errorf("writing %s %s to the volumes of pod %s: %w", r.kind, name, klog.KObj(pod), retry)
	}
	log.FromContext(ctx).Info("Volumes keep their content until a missing object is created again",
		"pod", klog.KObj(pod), "kind", r.kind, "object", name, "volumes", volumes)
	return nil
}

// volumeUpdateFailures turns the error of a volume update into the
// messages of the FailedMount Events the kubelet records for it, one per
// failed volume, and the error to retry with: nil when every failed volume
// lacks a required ConfigMap or Secret that was deleted. Such a volume
// keeps its files, as the kubelet's does, and retrying cannot help: the
// object's creation is itself a change the store feeds, which rewrites it.
func volumeUpdateFailures(err error) (messages []string, retry error) {
	if err == nil {
		return nil, nil
	}
	failed := volume.SetUpErrors(err)
	if len(failed) == 0 {
		return nil, err
	}
	for _, e := range failed {
		messages = append(messages, e.Error())
		if !e.MissingObject() {
			retry = err
		}
	}
	return messages, retry
}

// waitsForObjects says whether a sync of pod may do something new when a
// referenced object changes: its volumes are not all set up yet, or not all
// its containers run (one may wait for an env object or a pull secret, and
// the reported status may lag behind). A pod whose containers all run would
// gain nothing (volumes are rewritten here, environments are fixed at
// start), so it is not enqueued: 100 pods sharing an object updated 100
// times a second are not synced 10,000 times a second.
func waitsForObjects(pod *corev1.Pod, volumesSetUp bool) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if !volumesSetUp || len(pod.Status.ContainerStatuses) < len(pod.Spec.Containers) {
		return true
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running == nil {
			return true
		}
	}
	return false
}

var _ reconcile.Reconciler = &objectVolumesReconciler{}

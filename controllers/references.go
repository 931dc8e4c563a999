package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/nodelet/nodelet/internal/objectstore"
)

// referenceReconciler brings a changed ConfigMap or Secret to the pods of
// this node that reference it: it asks the pod controller to sync each of
// them, and the sync rewrites their volumes from the store's new content
// with the atomic writer. Containers are not restarted, and environment
// variables keep the values they were started with, as in Kubernetes.
type referenceReconciler struct {
	kind   objectstore.Kind
	store  *objectstore.Store
	events chan<- event.TypedGenericEvent[*corev1.Pod]
}

// Reconcile enqueues the pods that reference the object named by req.
func (r *referenceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	for _, nn := range r.store.PodsReferencing(r.kind, req.Namespace, req.Name) {
		pod := &corev1.Pod{}
		pod.Namespace, pod.Name = nn.Namespace, nn.Name
		select {
		case r.events <- event.TypedGenericEvent[*corev1.Pod]{Object: pod}:
		case <-ctx.Done():
			return ctrl.Result{}, fmt.Errorf("enqueueing pods referencing %s %s: %w", r.kind, req.NamespacedName, ctx.Err())
		}
	}
	return ctrl.Result{}, nil
}

// setupReferenceController registers the reconciler of one kind of
// referenced object, fed by the store's change feed.
func setupReferenceController(mgr ctrl.Manager, d *Deps, name string, kind objectstore.Kind) error {
	store, _, err := d.referencedObjects(mgr)
	if err != nil {
		return err
	}
	r := &referenceReconciler{kind: kind, store: store, events: d.podEventsChannel()}
	err = ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WatchesRawSource(store.Source(kind)).
		WithOptions(controller.Options{
			// Several agents may share a process (tests, simulations).
			SkipNameValidation: ptr.To(true),
		}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("building the %s controller: %w", name, err)
	}
	return nil
}

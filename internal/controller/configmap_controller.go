package controller

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/internal/objectstore"
	"github.com/nodelet/nodelet/internal/volume"
)

// setupConfigMapController wires the ConfigMap reconciler: a ConfigMap that
// local pods reference changed (the object store's per-name watches), so
// every configMap and projected volume showing it is rewritten atomically.
// Turned off (--controllers=*,-configmap), volumes keep the content they
// were set up with.
func setupConfigMapController(mgr ctrl.Manager, d *Deps) error {
	eng, err := podEngineFor(mgr, d)
	if err != nil {
		return err
	}
	return setupObjectVolumesController(mgr, "configmap", &objectVolumesReconciler{
		kind:       objectstore.KindConfigMap,
		pods:       mgr.GetClient(),
		engine:     eng,
		projecting: volume.VolumesProjectingConfigMap,
	})
}

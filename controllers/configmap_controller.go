package controllers

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/internal/objectstore"
)

// setupConfigMapController registers the ConfigMap reconciler: a change of
// a ConfigMap a local pod references reaches the pod's volumes at once.
// Disabled (--controllers=*,-configmap), ConfigMap volumes are rewritten
// only at the pods' periodic syncs.
func setupConfigMapController(mgr ctrl.Manager, d *Deps) error {
	return setupReferenceController(mgr, d, "configmap", objectstore.KindConfigMap)
}

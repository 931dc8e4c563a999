package controllers

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/internal/objectstore"
)

// setupSecretController registers the Secret reconciler: a change of a
// Secret a local pod references reaches the pod's volumes at once.
// Disabled (--controllers=*,-secret), Secret volumes are rewritten only at
// the pods' periodic syncs.
func setupSecretController(mgr ctrl.Manager, d *Deps) error {
	return setupReferenceController(mgr, d, "secret", objectstore.KindSecret)
}

package controller

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/internal/objectstore"
	"github.com/nodelet/nodelet/internal/volume"
)

// setupSecretController wires the Secret reconciler: a Secret that local
// pods reference changed, so every secret and projected volume showing it
// is rewritten atomically (on tmpfs; its content is never logged). Turned
// off (--controllers=*,-secret), volumes keep the content they were set up
// with.
func setupSecretController(mgr ctrl.Manager, d *Deps) error {
	eng, err := podEngineFor(mgr, d)
	if err != nil {
		return err
	}
	return setupObjectVolumesController(mgr, "secret", &objectVolumesReconciler{
		kind:       objectstore.KindSecret,
		pods:       mgr.GetClient(),
		engine:     eng,
		projecting: volume.VolumesProjectingSecret,
	})
}

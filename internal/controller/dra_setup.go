package controller

import (
	"path/filepath"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/internal/dra"
	"github.com/nodelet/nodelet/internal/features"
)

// draDriversFor returns the registry of DRA drivers, made on first use:
// the plugin watcher fills it, the claims manager calls its drivers. It
// deletes this node's ResourceSlices of drivers gone from the node, as
// the Node authorizer allows a node. With the ResourceHealthStatus gate
// on, it watches the drivers' health streams, and a change of a device's
// health writes the status of the pods using it again.
func draDriversFor(mgr ctrl.Manager, d *Deps) *dra.Drivers {
	if d.draDrivers == nil {
		opts := dra.DriversOptions{
			Slices: &dra.APISlices{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Node: d.Config.NodeName},
			Logger: mgr.GetLogger().WithName("dra"),
		}
		if features.Enabled(features.ResourceHealthStatus) {
			updates := resourceUpdatesFor(d, mgr.GetLogger().WithName("pod"))
			d.draHealth = dra.NewHealth(mgr.GetLogger().WithName("dra"), updates.DevicesChanged)
			opts.Health = d.draHealth
		}
		d.draDrivers = dra.NewDrivers(opts)
	}
	return d.draDrivers
}

// claimsFor returns the manager of the node's ResourceClaims, made on
// first use, with its state in <rootDir>/dra_manager_state. Claims change
// just before their pod starts: it reads them from the API server, by
// name, as the Node authorizer allows.
func claimsFor(mgr ctrl.Manager, d *Deps) *dra.Manager {
	if d.claims == nil {
		drivers := draDriversFor(mgr, d)
		d.claims = dra.NewManager(dra.Options{
			Reader:            mgr.GetAPIReader(),
			Drivers:           drivers,
			ExtendedResources: features.Enabled(features.DRAExtendedResource),
			StatePath:         filepath.Join(d.Config.RootDir, dra.CheckpointName),
			Health:            d.draHealth,
			HealthMessages:    features.Enabled(features.ResourceHealthStatusMessage),
			Logger:            mgr.GetLogger().WithName("dra"),
		})
		if d.resourceUpdates != nil {
			d.resourceUpdates.setClaims(d.claims.PodsUsing)
		}
	}
	return d.claims
}

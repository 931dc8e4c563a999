package controller

import (
	"context"
	"fmt"
	"path/filepath"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/nodelet/nodelet/internal/csi"
	"github.com/nodelet/nodelet/internal/ctrlqueue"
)

// setupCSI registers CSI and DRA drivers, and device plugins that do not
// use kubelet.sock, as the kubelet does: the plugin
// watcher on <rootDir>/plugins_registry runs without the API server (a
// driver registered while it is unreachable is usable at once), and the
// writer of the node's CSINode, node ID annotation and topology labels and
// the deletion of the ResourceSlices of DRA drivers gone from the node run
// with the manager and retry until the API server takes the writes.
func setupCSI(mgr ctrl.Manager, deps *Deps) error {
	cfg := deps.Config
	nodeInfo := csi.NewNodeInfo(cfg.NodeName, mgr.GetClient(), mgr.GetAPIReader())
	if err := mgr.Add(nodeInfo); err != nil {
		return fmt.Errorf("adding the CSINode writer: %w", err)
	}
	refresher, err := setupCSIAllocatable(mgr, deps, nodeInfo)
	if err != nil {
		return err
	}
	drivers := draDriversFor(mgr, deps)
	devices, err := devicesFor(mgr, deps)
	if err != nil {
		return err
	}
	watcher := csi.NewWatcher(csi.WatcherOptions{
		Dir:       filepath.Join(cfg.RootDir, csi.PluginsRegistryDir),
		Registry:  csiDriversFor(deps),
		Installer: csi.Installers{nodeInfo, refresher},
		Handlers:  map[string]csi.PluginHandler{registerapi.DRAPlugin: drivers, registerapi.DevicePlugin: devices},
	})
	if err := deps.local(mgr).Add(watcher); err != nil {
		return fmt.Errorf("adding the plugin registration watcher: %w", err)
	}
	if err := mgr.Add(drivers); err != nil {
		return fmt.Errorf("adding the DRA drivers' ResourceSlice cleanup: %w", err)
	}
	return nil
}

// csiDriversFor returns the registry of CSI drivers, made on first use:
// the plugin watcher fills it and the volume publisher reads it.
func csiDriversFor(d *Deps) *csi.Registry {
	if d.csiDrivers == nil {
		d.csiDrivers = csi.NewRegistry()
	}
	return d.csiDrivers
}

// setupCSIAllocatable runs the refresh of the CSINode's allocatable counts
// (nodeAllocatableUpdatePeriodSeconds, MutableCSINodeAllocatableCount), and
// tells the volumes-in-use tracker each driver's attachRequired: a
// controller on the CSIDriver objects (a cluster-wide watch, which the Node
// authorizer allows) and on the refresher's own events (registrations,
// ResourceExhausted attachments), requeued every driver's period.
func setupCSIAllocatable(mgr ctrl.Manager, deps *Deps, nodeInfo *csi.NodeInfo) (*csi.AllocatableRefresher, error) {
	c := mgr.GetClient()
	inUse := volumesInUseFor(deps)
	refresher := csi.NewAllocatableRefresher(csi.AllocatableOptions{
		Registry:  csiDriversFor(deps),
		Installer: nodeInfo,
		CSIDriver: func(ctx context.Context, name string) (*storagev1.CSIDriver, error) {
			d := &storagev1.CSIDriver{}
			return d, c.Get(ctx, types.NamespacedName{Name: name}, d)
		},
	})
	err := ctrl.NewControllerManagedBy(mgr).
		Named("csi_allocatable").
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true), NewQueue: ctrlqueue.New}).
		For(&storagev1.CSIDriver{}).
		WatchesRawSource(source.Channel(refresher.Events(), &handler.EnqueueRequestForObject{})).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			// A driver that stops needing attachment takes its volumes
			// out of the Node's volumesInUse, as the kubelet's do.
			d := &storagev1.CSIDriver{}
			switch err := c.Get(ctx, req.NamespacedName, d); {
			case apierrors.IsNotFound(err):
				inUse.DriverChanged(req.Name, nil)
			case err != nil:
				return reconcile.Result{}, fmt.Errorf("getting CSIDriver %s: %w", req.Name, err)
			default:
				inUse.DriverChanged(req.Name, d)
			}
			after, err := refresher.Reconcile(ctx, req.Name)
			return reconcile.Result{RequeueAfter: after}, err
		}))
	if err != nil {
		return nil, fmt.Errorf("setting up the CSINode allocatable refresh: %w", err)
	}
	deps.csiAllocatable = refresher
	return refresher, nil
}

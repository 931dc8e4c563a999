package controller

import (
	"fmt"
	"path/filepath"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/internal/csi"
)

// setupCSI registers CSI drivers as the kubelet does: the plugin watcher on
// <rootDir>/plugins_registry runs without the API server (a driver
// registered while it is unreachable is usable at once), and the writer of
// the node's CSINode, node ID annotation and topology labels runs with the
// manager and retries until the API server takes the writes.
func setupCSI(mgr ctrl.Manager, deps *Deps) error {
	cfg := deps.Config
	nodeInfo := csi.NewNodeInfo(cfg.NodeName, mgr.GetClient(), mgr.GetAPIReader())
	if err := mgr.Add(nodeInfo); err != nil {
		return fmt.Errorf("adding the CSINode writer: %w", err)
	}
	watcher := csi.NewWatcher(csi.WatcherOptions{
		Dir:       filepath.Join(cfg.RootDir, csi.PluginsRegistryDir),
		Registry:  csiDriversFor(deps),
		Installer: nodeInfo,
	})
	if err := deps.local(mgr).Add(watcher); err != nil {
		return fmt.Errorf("adding the plugin registration watcher: %w", err)
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

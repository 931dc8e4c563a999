package controller

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/internal/features"
	"github.com/nodelet/nodelet/internal/shutdown"
)

// setupShutdown adds the node shutdown manager when graceful node shutdown
// is configured (shutdownGracePeriod or shutdownGracePeriodByPodPriority,
// with the GracefulNodeShutdown gate): it stops the pods through the pod
// reconciler's eviction path, refuses new pods at admission and makes the
// node NotReady while the node shuts down. It runs without the API
// server, as static pods must stop too. logind's drop-in goes under
// hostRoot, and the system bus is DBUS_SYSTEM_BUS_ADDRESS, else logind's
// usual socket.
func setupShutdown(mgr ctrl.Manager, d *Deps, r *PodReconciler) error {
	if !features.Enabled(features.GracefulNodeShutdown) {
		return nil
	}
	cfg := d.Config
	periods := shutdown.Periods(cfg, features.Enabled(features.GracefulNodeShutdownBasedOnPodPriority))
	if len(periods) == 0 {
		return nil
	}
	opts := shutdown.Options{
		NodeName:      cfg.NodeName,
		Periods:       periods,
		BusAddress:    os.Getenv("DBUS_SYSTEM_BUS_ADDRESS"),
		LogindConfDir: filepath.Join(cfg.HostRoot, shutdown.DefaultLogindConfDir),
		ActivePods:    r.Admit.Pods,
		Running:       func(uid types.UID) bool { return r.Admit.Admitted(uid) },
		Stopper:       r,
		Recorder:      r.Recorder,
		Log:           mgr.GetLogger().WithName("shutdown"),
	}
	if d.nodeKick != nil {
		// The node reconciler, set up before, writes the Ready condition
		// at once.
		opts.NodeChanged = kickNode(d)
	}
	m, err := shutdown.New(opts)
	if err != nil {
		return err
	}
	if err := d.local(mgr).Add(m); err != nil {
		return fmt.Errorf("adding the node shutdown manager: %w", err)
	}
	r.Admit.ShuttingDown = m.ShuttingDown
	d.shutdown = m
	return nil
}

// shutdownProblems is why the node is not Ready because it shuts down,
// for the node reconciler: none without a node shutdown manager.
func shutdownProblems(d *Deps) []string {
	if d.shutdown == nil {
		return nil
	}
	return d.shutdown.Problems()
}

package controller

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/component-base/tracing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/checkpoint"
	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/csi"
	"github.com/nodelet/nodelet/internal/deviceplugin"
	"github.com/nodelet/nodelet/internal/dra"
	"github.com/nodelet/nodelet/internal/eviction"
	"github.com/nodelet/nodelet/internal/shutdown"
	"github.com/nodelet/nodelet/internal/volumestats"
)

// Deps is what the reconcilers are built from. internal/app (and the hollow
// mode, once per hollow node) fills its exported fields once; the
// unexported ones are filled by the setup functions as they run.
type Deps struct {
	// Config is the effective configuration.
	Config *v1alpha1.NodeletConfiguration
	// Runtime is the container runtime; nil reports it as down.
	Runtime cri.Runtime
	// Checkpoints stores per-pod state; required by the pod controller.
	Checkpoints checkpoint.Manager
	// Local runs what must not wait for the API server (the static pod
	// path); nil adds those runnables to the manager too.
	Local Runner
	// TracerProvider, when set, traces each pod sync (a syncPod span, the
	// CRI calls under it); nil traces nothing.
	TracerProvider tracing.TracerProvider

	// engine is what the pod, ConfigMap and Secret reconcilers share,
	// built by the first of them set up (see podEngineFor).
	engine *podEngine
	// eviction is the eviction manager, set up with the pod reconciler.
	eviction *eviction.Manager
	// shutdown is the node shutdown manager, set up with the pod
	// reconciler when graceful node shutdown is configured; nil otherwise.
	shutdown *shutdown.Manager
	// volumesInUse tracks the volumes the node's status lists in use, and
	// nodeKick asks the node reconciler for a status write (see
	// volumesInUseFor and nodeKickFor).
	volumesInUse *csi.InUse
	nodeKick     chan event.GenericEvent
	// volumeStats measures the pods' volumes (setupVolumeStats).
	volumeStats *volumestats.Calculator
	// csiDrivers are the registered CSI drivers (see csiDriversFor).
	csiDrivers *csi.Registry
	// csiAllocatable refreshes the CSINode's allocatable counts; nil when
	// the csi reconciler is off (see setupCSIAllocatable).
	csiAllocatable *csi.AllocatableRefresher
	// devices is the device plugin manager (see devicesFor).
	devices *deviceplugin.Manager
	// draDrivers are the registered DRA drivers and claims the node's
	// ResourceClaims (see draDriversFor and claimsFor).
	draDrivers *dra.Drivers
	claims     *dra.Manager
	// draHealth is the DRA devices' health, and resourceUpdates turns
	// device health changes into pod status writes; both nil with the
	// ResourceHealthStatus gate off (see draDriversFor and
	// resourceUpdatesFor).
	draHealth       *dra.Health
	resourceUpdates *resourceUpdates
}

// Runner runs runnables: agent.Local, or the manager itself.
type Runner interface {
	Add(manager.Runnable) error
}

// local is where runnables that must not wait for the API server go.
func (d *Deps) local(mgr ctrl.Manager) Runner {
	if d.Local != nil {
		return d.Local
	}
	return mgr
}

// SetupFunc registers one reconciler (and any runnables it needs) with mgr.
type SetupFunc func(mgr ctrl.Manager, deps *Deps) error

// Registry maps a reconciler's name, as --controllers spells it, to its
// setup function.
type Registry map[string]SetupFunc

// Default is every reconciler nodelet has. Add a line here to add one.
var Default = Registry{
	"configmap": setupConfigMapController,
	"csi":       setupCSI,
	"node":      setupNodeController,
	"pod":       setupPodController,
	"podcidr":   setupPodCIDR,
	"secret":    setupSecretController,
}

// disabledEffects says what turning a reconciler off changes, for the log.
var disabledEffects = map[string]string{
	"configmap": "live ConfigMap updates are off: running pods keep the ConfigMap content their volumes were set up with",
	"csi":       "CSI and DRA drivers are not registered: pods' CSI volumes fail to mount as their driver is unknown, pods with ResourceClaims do not start",
	"podcidr":   "pod CIDRs are not handed to the runtime: a runtime that waits for one keeps its network not ready",
	"secret":    "live Secret updates are off: running pods keep the Secret content their volumes were set up with",
}

// Names returns the registered names, sorted.
func (r Registry) Names() []string {
	names := make([]string, 0, len(r))
	for n := range r {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Resolve turns a --controllers list into the sorted names to run. "*"
// adds every registered reconciler, "name" adds one, "-name" removes one;
// later entries win over earlier ones ("*,-secret" runs all but secret). An
// unknown name is an error naming it and the known ones.
func (r Registry) Resolve(spec []string) (enabled []string, err error) {
	on := map[string]bool{}
	for _, item := range spec {
		item = strings.TrimSpace(item)
		if item == "*" {
			for n := range r {
				on[n] = true
			}
			continue
		}
		name, disable := strings.CutPrefix(item, "-")
		if _, ok := r[name]; !ok {
			return nil, fmt.Errorf("unknown controller %q in --controllers (known: %s)", item, strings.Join(r.Names(), ", "))
		}
		on[name] = !disable
	}
	for _, n := range r.Names() {
		if on[n] {
			enabled = append(enabled, n)
		}
	}
	return enabled, nil
}

// Setup resolves spec and calls the setup function of every enabled
// reconciler. Disabled ones are logged.
func (r Registry) Setup(mgr ctrl.Manager, deps *Deps, spec []string) error {
	enabled, err := r.Resolve(spec)
	if err != nil {
		return err
	}
	log := mgr.GetLogger().WithName("controllers")
	for _, name := range r.Names() {
		if !slices.Contains(enabled, name) {
			if effect, ok := disabledEffects[name]; ok {
				log.Info("Controller is disabled", "controller", name, "effect", effect)
			} else {
				log.Info("Controller is disabled", "controller", name)
			}
			continue
		}
		if err := r[name](mgr, deps); err != nil {
			return fmt.Errorf("setting up controller %q: %w", name, err)
		}
		log.V(1).Info("Controller is set up", "controller", name)
	}
	return nil
}

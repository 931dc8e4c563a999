package controllers

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/checkpoint"
	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/objectstore"
)

// Deps is what the reconcilers are built from. main fills it once.
type Deps struct {
	// Config is the effective configuration.
	Config *v1alpha1.NodeletConfiguration
	// Runtime is the container runtime; nil reports it as down.
	Runtime cri.Runtime
	// Checkpoints stores per-pod state; required by the pod controller.
	Checkpoints checkpoint.Manager

	// Shared by the reconcilers that need them, made on first use.
	objects   *objectstore.Store
	services  *objectstore.ServiceWatcher
	podEvents chan event.TypedGenericEvent[*corev1.Pod]
}

// referencedObjects returns the store of the ConfigMaps and Secrets this
// node's pods reference and the watcher of the Services their environment
// needs, made and added to mgr on first use.
func (d *Deps) referencedObjects(mgr ctrl.Manager) (*objectstore.Store, *objectstore.ServiceWatcher, error) {
	if d.objects != nil {
		return d.objects, d.services, nil
	}
	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, nil, fmt.Errorf("creating the client of referenced objects: %w", err)
	}
	store, err := objectstore.New(cs, objectstore.Options{
		Strategy: d.Config.ConfigMapAndSecretChangeDetectionStrategy,
		CacheTTL: d.Config.ConfigMapAndSecretCacheTTL.Duration,
		Logger:   mgr.GetLogger().WithName("objectstore"),
	})
	if err != nil {
		return nil, nil, err
	}
	services := objectstore.NewServiceWatcher(cs, 0, mgr.GetLogger().WithName("services"))
	for _, r := range []manager.Runnable{store, services} {
		if err := mgr.Add(r); err != nil {
			return nil, nil, fmt.Errorf("adding the referenced-object store: %w", err)
		}
	}
	d.objects, d.services = store, services
	return store, services, nil
}

// podEventsChannel is the channel on which reconcilers other than the pod
// controller ask for pods to be synced.
func (d *Deps) podEventsChannel() chan event.TypedGenericEvent[*corev1.Pod] {
	if d.podEvents == nil {
		d.podEvents = make(chan event.TypedGenericEvent[*corev1.Pod], 1024)
	}
	return d.podEvents
}

// SetupFunc registers one reconciler (and any runnables it needs) with mgr.
type SetupFunc func(mgr ctrl.Manager, deps *Deps) error

// Registry maps a reconciler's name, as --controllers spells it, to its
// setup function.
type Registry map[string]SetupFunc

// Default is every reconciler nodelet has. Add a line here to add one.
var Default = Registry{
	"configmap": setupConfigMapController,
	"node":      setupNodeController,
	"pod":       setupPodController,
	"secret":    setupSecretController,
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
			log.Info("Controller is disabled", "controller", name)
			continue
		}
		if err := r[name](mgr, deps); err != nil {
			return fmt.Errorf("setting up controller %q: %w", name, err)
		}
		log.V(1).Info("Controller is set up", "controller", name)
	}
	return nil
}

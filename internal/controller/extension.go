package controller

import (
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/internal/objectstore"
)

// With returns a copy of r with setup registered as name. The name must be
// a lower-case DNS label that r does not hold yet, so that --controllers
// can spell it and "-name" disables it.
func (r Registry) With(name string, setup SetupFunc) (Registry, error) {
	if len(validation.IsDNS1123Label(name)) != 0 {
		return nil, fmt.Errorf("reconciler name %q: must be a lower-case DNS label (a-z, 0-9, '-')", name)
	}
	if _, ok := r[name]; ok {
		return nil, fmt.Errorf("reconciler name %q is registered already", name)
	}
	if setup == nil {
		return nil, fmt.Errorf("reconciler %q has no setup function", name)
	}
	out := maps.Clone(r)
	out[name] = setup
	return out, nil
}

// Shared is what the built-in reconcilers share and lend to reconcilers
// registered from outside: the referenced-object store, read the way
// volumes and environments read it, and the Event recorder.
type Shared struct {
	// Objects reads the ConfigMaps and Secrets this node's pods reference.
	Objects objectstore.Reader
	// Recorder records core/v1 Events as the "nodelet" component.
	Recorder record.EventRecorder
}

// SharedFor returns what d's reconcilers share, building it (and adding
// its runnables to mgr) the first time.
func SharedFor(mgr ctrl.Manager, d *Deps) (Shared, error) {
	eng, err := podEngineFor(mgr, d)
	if err != nil {
		return Shared{}, err
	}
	return Shared{Objects: eng.store.ExistingReader(), Recorder: eng.recorder}, nil
}

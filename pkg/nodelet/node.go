package nodelet

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/controller"
	"github.com/nodelet/nodelet/internal/objectstore"
)

// Node is the context of one node that a reconciler's Setup receives. Its
// methods are safe for concurrent use, and what they return is shared:
// do not modify it, but for Config's copy.
type Node struct {
	name        string
	mgr         ctrl.Manager
	cfg         *v1alpha1.NodeletConfiguration
	runtime     Runtime
	checkpoints *Checkpoints
	objects     ObjectReader
	recorder    record.EventRecorder
	log         logr.Logger
}

func newNode(mgr ctrl.Manager, d *controller.Deps, name string) (*Node, error) {
	if d.Runtime == nil {
		return nil, errors.New("no container runtime")
	}
	shared, err := controller.SharedFor(mgr, d)
	if err != nil {
		return nil, err
	}
	checkpoints, err := OpenCheckpoints(filepath.Join(d.Config.RootDir, "extensions", name, "checkpoints"))
	if err != nil {
		return nil, fmt.Errorf("opening the checkpoints of %s: %w", name, err)
	}
	return &Node{
		name:        d.Config.NodeName,
		mgr:         mgr,
		cfg:         d.Config,
		runtime:     ownedRuntime{rt: d.Runtime},
		checkpoints: checkpoints,
		objects:     objectReader{r: shared.Objects},
		recorder:    shared.Recorder,
		log:         mgr.GetLogger().WithName(name),
	}, nil
}

// NodeName is the name of this node's Node object.
func (n *Node) NodeName() string { return n.name }

// Manager is the node-scoped manager (see the package documentation for
// what its cache and client can read).
func (n *Node) Manager() ctrl.Manager { return n.mgr }

// Config returns a copy of nodelet's effective configuration.
func (n *Node) Config() *v1alpha1.NodeletConfiguration { return n.cfg.DeepCopy() }

// Runtime is the container runtime, reads and images only, restricted to
// what this nodelet made.
func (n *Node) Runtime() Runtime { return n.runtime }

// Checkpoints is the reconciler's own checkpoint store.
func (n *Node) Checkpoints() *Checkpoints { return n.checkpoints }

// Objects reads the ConfigMaps and Secrets this node's pods reference.
func (n *Node) Objects() ObjectReader { return n.objects }

// EventRecorder records core/v1 Events (what kubectl describe shows) from
// the "nodelet" component.
func (n *Node) EventRecorder() record.EventRecorder { return n.recorder }

// Logger is nodelet's logger, named after the reconciler.
func (n *Node) Logger() logr.Logger { return n.log }

// ErrNotReferenced is returned (wrapped) by ObjectReader for an object that
// no pod of this node references: the Node authorizer lets a node read no
// other.
var ErrNotReferenced = objectstore.ErrNotRegistered

// ObjectReader reads ConfigMaps and Secrets by name. A deleted object is a
// NotFound error (apierrors.IsNotFound); while the API server cannot be
// reached the last content seen is returned. Returned objects are copies the
// caller owns.
type ObjectReader interface {
	ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
}

// objectReader hides the store's reader behind the interface, so that no
// other method of it can be reached by a type assertion.
type objectReader struct{ r objectstore.Reader }

func (o objectReader) ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	return o.r.ConfigMap(ctx, namespace, name)
}

func (o objectReader) Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	return o.r.Secret(ctx, namespace, name)
}

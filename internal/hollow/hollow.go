package hollow

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeruntime "k8s.io/cri-api/pkg/apis/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/agent"
	"github.com/nodelet/nodelet/internal/checkpoint"
	"github.com/nodelet/nodelet/internal/controller"
	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/csi"
)

// callLogTrimPeriod is how often the fakes' record of calls is emptied: it
// grows by every CRI call (the relister's every second) and nothing here
// reads it.
const callLogTrimPeriod = time.Minute

// Options say which hollow nodes to run and how they reach the API server.
type Options struct {
	// Nodes are the names of the nodes to run.
	Nodes []string
	// RootDir holds a directory of each node's state (RootDir/<node>).
	RootDir string
	// Credentials returns the client configuration node authenticates
	// with: its own, as system:node:<node>, for the Node authorizer to
	// treat it as the node it is.
	Credentials func(node string) (*rest.Config, error)
	// Mutate, when set, changes every node's configuration before it is
	// defaulted (see NodeConfig).
	Mutate func(*v1alpha1.NodeletConfiguration)
	// Controllers are the reconcilers to run, as --controllers spells
	// them; empty runs every one of controller.Default.
	Controllers []string
}

// Node is one hollow node: a nodelet manager over a fake runtime.
type Node struct {
	// Name is the node's name.
	Name string
	// Config is its effective configuration.
	Config *v1alpha1.NodeletConfiguration
	// Manager is its manager; its client reads the node's own cache.
	Manager ctrl.Manager
	// Runtime and Images are its fake container runtime.
	Runtime *fakeruntime.FakeRuntimeService
	Images  *fakeruntime.FakeImageService

	local *agent.Local
}

// Fleet is a set of hollow nodes in this process.
type Fleet struct {
	Nodes []*Node
}

// New builds the hollow nodes of opts; Run runs them. Nothing connects to
// the API server yet.
func New(opts Options) (*Fleet, error) {
	if opts.Credentials == nil {
		return nil, errors.New("hollow nodes need credentials")
	}
	controllers := opts.Controllers
	if len(controllers) == 0 {
		controllers = []string{"*"}
	}
	f := &Fleet{}
	for _, name := range opts.Nodes {
		n, err := newNode(opts, name, controllers)
		if err != nil {
			return nil, err
		}
		f.Nodes = append(f.Nodes, n)
	}
	return f, nil
}

// newNode builds one hollow node the way nodelet's start-up does, with
// the fakes for a runtime.
func newNode(opts Options, name string, controllers []string) (*Node, error) {
	cfg, err := NodeConfig(opts.RootDir, name, opts.Mutate)
	if err != nil {
		return nil, err
	}
	restCfg, err := opts.Credentials(name)
	if err != nil {
		return nil, fmt.Errorf("credentials of hollow node %s: %w", name, err)
	}
	n := &Node{
		Name:    name,
		Config:  cfg,
		Runtime: fakeruntime.NewFakeRuntimeService(),
		Images:  fakeruntime.NewFakeImageService(),
		local:   &agent.Local{},
	}
	// The fake reports no conditions of its own: a runtime without them is
	// not ready, and neither would the node be.
	n.Runtime.FakeStatus = &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: true},
	}}
	rt, err := cri.New(n.Runtime, n.Images, cri.Options{NodeName: name, RuntimeRequestTimeout: cfg.RuntimeRequestTimeout.Duration})
	if err != nil {
		return nil, fmt.Errorf("runtime of hollow node %s: %w", name, err)
	}
	store, err := checkpoint.NewFileStore(filepath.Join(cfg.RootDir, "checkpoints"))
	if err != nil {
		return nil, fmt.Errorf("checkpoint store of hollow node %s: %w", name, err)
	}
	n.Manager, err = agent.NewManager(restCfg, cfg)
	if err != nil {
		return nil, err
	}
	deps := &controller.Deps{Config: cfg, Runtime: rt, Checkpoints: store, Local: localRunner{n.local}}
	if err := controller.Default.Setup(n.Manager, deps, controllers); err != nil {
		return nil, fmt.Errorf("setting up hollow node %s: %w", name, err)
	}
	if err := n.local.Add(trimCalls{n}); err != nil {
		return nil, err
	}
	return n, nil
}

// Run runs every node until ctx ends and returns their errors. A node that
// fails stops alone: the others keep running.
func (f *Fleet) Run(ctx context.Context) error {
	log := ctrl.Log.WithName("hollow")
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, n := range f.Nodes {
		wg.Go(func() {
			if err := agent.Run(ctx, n.local, n.Manager, n.Name); err != nil {
				log.Error(err, "Hollow node stopped with an error", "node", n.Name)
				mu.Lock()
				errs = append(errs, fmt.Errorf("hollow node %s: %w", n.Name, err))
				mu.Unlock()
			}
		})
	}
	log.Info("Started hollow nodes", "count", len(f.Nodes))
	wg.Wait()
	return errors.Join(errs...)
}

// localRunner adds a node's local runnables to its agent.Local, except
// the CSI plugin watcher: no driver registers on a hollow node, and each
// watcher holds an inotify instance, of which a user has 128 by default
// (fs.inotify.max_user_instances) for a whole machine. The node's CSINode
// writer, which talks to the API server, runs as on any node.
type localRunner struct{ local *agent.Local }

// Add adds r unless it is the plugin watcher.
func (l localRunner) Add(r manager.Runnable) error {
	if _, ok := r.(*csi.Watcher); ok {
		return nil
	}
	return l.local.Add(r)
}

// trimCalls empties the fakes' record of calls now and then.
type trimCalls struct{ n *Node }

// Start trims until ctx ends.
func (t trimCalls) Start(ctx context.Context) error {
	_ = wait.PollUntilContextCancel(ctx, callLogTrimPeriod, false, func(context.Context) (bool, error) {
		t.n.Runtime.Lock()
		t.n.Runtime.Called = nil
		t.n.Runtime.Unlock()
		t.n.Images.Lock()
		t.n.Images.Called = nil
		t.n.Images.Unlock()
		return false, nil
	})
	return nil
}

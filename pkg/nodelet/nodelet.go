package nodelet

import (
	"fmt"
	"os"

	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodelet/nodelet/internal/app"
	"github.com/nodelet/nodelet/internal/controller"
	"github.com/nodelet/nodelet/internal/ctrlqueue"
)

// Reconciler is a reconciler added to nodelet from outside.
type Reconciler struct {
	// Name is how the controllers field and --controllers spell it: a
	// lower-case DNS label that no other reconciler has (the built-in ones
	// are configmap, csi, node, pod, podcidr and secret).
	Name string
	// Setup registers the reconciler with n.Manager(). It is called once,
	// before the manager starts, and only when the reconciler is enabled; an
	// error stops nodelet before it starts.
	Setup func(n *Node) error
}

// Run runs nodelet with the command-line arguments args (os.Args[1:]) and
// the built-in reconcilers plus extra, and returns the exit code for
// os.Exit: 0 after a clean stop (a signal, --help, --version), 2 for
// invalid flags, configuration or reconciler names, 1 otherwise.
func Run(args []string, extra ...Reconciler) int {
	reg, err := registry(extra)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nodelet: %v\n", err)
		return 2
	}
	return app.Run(args, reg)
}

// NewQueue is the work queue of nodelet's own controllers, for
// controller.Options NewQueue: controller-runtime's workqueue metrics, and
// no wake-up while the controller has nothing to process (the default
// queue updates its unfinished-work gauges twice a second regardless).
func NewQueue(controllerName string, rateLimiter workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return ctrlqueue.New(controllerName, rateLimiter)
}

// registry returns the built-in reconcilers plus extra.
func registry(extra []Reconciler) (controller.Registry, error) {
	reg := controller.Default
	for _, r := range extra {
		var err error
		if reg, err = reg.With(r.Name, setupFunc(r)); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// setupFunc adapts r's Setup to the registry's.
func setupFunc(r Reconciler) controller.SetupFunc {
	if r.Setup == nil {
		return nil
	}
	return func(mgr ctrl.Manager, d *controller.Deps) error {
		n, err := newNode(mgr, d, r.Name)
		if err != nil {
			return err
		}
		return r.Setup(n)
	}
}

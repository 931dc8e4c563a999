package controller

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/nodelet/nodelet/internal/podcidr"
)

// Retry delays of a failed pod CIDR update: the runtime may be starting.
const (
	podCIDRRetryBase = 200 * time.Millisecond
	podCIDRRetryMax  = 30 * time.Second
	// podCIDRStatusDelay is how long after a pod CIDR reached the runtime
	// the node status is refreshed: the runtime loads the CNI config it
	// wrote from it asynchronously, and only then reports its network ready.
	podCIDRStatusDelay = time.Second
)

// setupPodCIDR hands the node's pod CIDRs to the runtime: the configured
// podCIDR at once (also without an API server), the Node's spec.podCIDRs
// once the Node has them.
func setupPodCIDR(mgr ctrl.Manager, deps *Deps) error {
	cfg := deps.Config
	log := mgr.GetLogger().WithName("podcidr").WithValues("node", cfg.NodeName)
	if deps.Runtime == nil {
		log.Info("No container runtime: pod CIDRs are not handed to one")
		return nil
	}
	updater := podcidr.NewUpdater(deps.Runtime, cfg.PodCIDR, log)
	if cfg.PodCIDR != "" {
		if err := deps.local(mgr).Add(&configuredPodCIDR{updater: updater, log: log}); err != nil {
			return fmt.Errorf("adding the configured pod CIDR runnable: %w", err)
		}
	}
	r := &PodCIDRReconciler{Client: mgr.GetClient(), NodeName: cfg.NodeName, Updater: updater}
	// The node reconciler, set up before this one when it is enabled,
	// owns the channel that asks it for a status write.
	if deps.nodeKick != nil {
		kick := deps.nodeKick
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: cfg.NodeName}}
		r.StatusKick = func() {
			select {
			case kick <- event.GenericEvent{Object: node}:
			default: // a write is already asked for
			}
		}
	}
	return r.SetupWithManager(mgr)
}

// PodCIDRReconciler hands the pod CIDRs of this node's Node to the runtime
// (podcidr.Updater), once per value, retrying with back-off on errors.
type PodCIDRReconciler struct {
	// Client reads the Node from the manager's cache.
	Client   client.Client
	NodeName string
	Updater  *podcidr.Updater
	// StatusKick, when set, asks the node reconciler for a status write
	// (called shortly after a pod CIDR reached the runtime, whose network
	// then becomes ready).
	StatusKick func()
}

// SetupWithManager watches this node's Node (the cache holds no other),
// reacting to its creation and to changes of its pod CIDRs.
func (r *PodCIDRReconciler) SetupWithManager(mgr ctrl.Manager) error {
	err := ctrl.NewControllerManagedBy(mgr).
		Named("podcidr").
		For(&corev1.Node{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return e.ObjectOld.GetUID() != e.ObjectNew.GetUID() ||
					!slices.Equal(podcidr.FromNode(e.ObjectOld.(*corev1.Node)), podcidr.FromNode(e.ObjectNew.(*corev1.Node)))
			},
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		})).
		WithOptions(backoffOptions(podCIDRRetryBase, podCIDRRetryMax)).
		Complete(r)
	if err != nil {
		return fmt.Errorf("building pod CIDR controller: %w", err)
	}
	return nil
}

// Reconcile sends the Node's pod CIDRs to the runtime when they were not
// sent yet; an error is retried with back-off.
func (r *PodCIDRReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Name != r.NodeName {
		return ctrl.Result{}, nil
	}
	node := &corev1.Node{}
	if err := r.Client.Get(ctx, req.NamespacedName, node); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	sent, err := r.Updater.SetNode(ctx, podcidr.FromNode(node))
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("handing the pod CIDRs of node %s to the runtime: %w", node.Name, err)
	}
	if sent && r.StatusKick != nil {
		time.AfterFunc(podCIDRStatusDelay, r.StatusKick)
	}
	return ctrl.Result{}, nil
}

// configuredPodCIDR hands the configured podCIDR to the runtime when
// nodelet starts, before and without the API server, as the kubelet does
// with its podCIDR; it retries with back-off until the runtime takes it,
// then returns.
type configuredPodCIDR struct {
	updater *podcidr.Updater
	log     logr.Logger
}

// Start implements manager.Runnable.
func (c *configuredPodCIDR) Start(ctx context.Context) error {
	backoff := wait.Backoff{Duration: podCIDRRetryBase, Factor: 2, Cap: podCIDRRetryMax, Steps: math.MaxInt32}
	for {
		_, err := c.updater.Sync(ctx)
		if err == nil {
			return nil
		}
		c.log.Error(err, "Pod CIDR update failed")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff.Step()):
		}
	}
}

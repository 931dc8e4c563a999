package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/ctrlqueue"
	"github.com/nodelet/nodelet/internal/lease"
	"github.com/nodelet/nodelet/internal/metrics"
	"github.com/nodelet/nodelet/internal/nodeinfo"
)

// nodeRetryBase is the first retry delay after a failed node reconcile;
// retries double up to the status update frequency.
const nodeRetryBase = 200 * time.Millisecond

// minNodeReconcileTimeout is the least time one node reconcile may take; a
// hung API or runtime call must not stop status updates for longer.
const minNodeReconcileTimeout = 15 * time.Second

// setupNodeController registers the node reconciler and the node lease
// runnable.
func setupNodeController(mgr ctrl.Manager, deps *Deps) error {
	cfg := deps.Config
	metrics.NodeName.WithLabelValues(cfg.NodeName).Set(1)
	if err := nodeinfo.ValidateNodeLabels(cfg.NodeLabels); err != nil {
		return fmt.Errorf("validating node labels: %w", err)
	}
	var rt nodeinfo.Runtime
	if deps.Runtime != nil {
		rt = deps.Runtime
	}
	observer, err := nodeinfo.NewObserver(cfg, nodeinfo.OSHost{}, rt)
	if err != nil {
		return fmt.Errorf("creating node observer: %w", err)
	}
	r := &NodeReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Config:    cfg,
		Observer:  observer,
		Clock:     clock.RealClock{},
		Pressure:  func() (nodeinfo.Pressure, bool) { return nodePressure(deps) },
		Problems:  func() []string { return shutdownProblems(deps) },
	}
	r.VolumesInUse = volumesInUseFor(deps)
	r.Kick = nodeKickFor(deps)
	devices, err := devicesFor(mgr, deps)
	if err != nil {
		return err
	}
	r.Devices = devices.Resources
	r.Recorder = mgr.GetEventRecorderFor("nodelet") //nolint:staticcheck // the core/v1 events kubectl describe shows
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	// The kubelet's Starting event, once the manager runs.
	if err := mgr.Add(manager.RunnableFunc(func(context.Context) error {
		r.Recorder.Event(nodeRef(cfg.NodeName), corev1.EventTypeNormal, nodeinfo.EventStarting, "Starting nodelet.")
		return nil
	})); err != nil {
		return fmt.Errorf("adding the start event: %w", err)
	}
	leaseLog := mgr.GetLogger().WithName("lease").WithValues("node", cfg.NodeName)
	if err := mgr.Add(lease.New(lease.Options{
		NodeName:        cfg.NodeName,
		DurationSeconds: cfg.NodeLeaseDurationSeconds,
		Client:          mgr.GetClient(),
		NodeReader:      mgr.GetClient(),
		Logger:          &leaseLog,
		// The kubelet bounds its heartbeat requests the same way.
		AttemptTimeout: min(cfg.NodeStatusUpdateFrequency.Duration,
			time.Duration(cfg.NodeLeaseDurationSeconds)*time.Second),
	})); err != nil {
		return fmt.Errorf("adding node lease runnable: %w", err)
	}
	return nil
}

// NodeReconciler registers this agent's Node and keeps its status: it
// creates the Node when it is missing (again after someone deletes it),
// adopts an existing one by adding the labels nodelet owns, and patches the
// status every NodeStatusUpdateFrequency when it changed, or when
// NodeStatusReportFrequency passed since the last write.
type NodeReconciler struct {
	// Client is the manager's client; it reads the Node from the cache.
	Client client.Client
	// APIReader reads the Node from the API server when the cache is behind.
	APIReader client.Reader
	Config    *v1alpha1.NodeletConfiguration
	Observer  *nodeinfo.Observer
	Clock     clock.PassiveClock
	// Pressure, when set and ok, gives the pressure conditions (the
	// eviction manager's, with their transition period) in place of the
	// observer's instant evaluation of the hard thresholds.
	Pressure func() (p nodeinfo.Pressure, ok bool)
	// VolumesInUse, when set, gives the status's volumesInUse and learns
	// what each status write listed.
	VolumesInUse VolumesInUseTracker
	// Kick, when set, asks for a status write now (a volume became in use,
	// the node shuts down).
	Kick <-chan event.GenericEvent
	// Problems, when set, adds to the runtime's the reasons the node is
	// not Ready (the node shutdown manager's).
	Problems func() []string
	// Devices, when set, gives the device plugins' resources: their
	// capacity and allocatable, and those to drop from the status.
	Devices func() (capacity, allocatable corev1.ResourceList, removed []corev1.ResourceName)
	// Recorder, when set, records the kubelet's Node events of condition
	// changes (NodeReady, NodeHasSufficientMemory, ...).
	Recorder record.EventRecorder

	// adoptedUID is the Node object whose labels were last reconciled;
	// labels are added once per Node object so that an admin may remove
	// them afterwards. Reconcile is never run concurrently for the one key.
	adoptedUID types.UID
}

// VolumesInUseTracker is what the node reconciler needs of the volumes in
// use (csi.InUse).
type VolumesInUseTracker interface {
	// List returns the volumes in use, sorted; with an error, those it
	// could read.
	List() ([]corev1.UniqueVolumeName, error)
	// MarkReported records what the Node's status lists in use.
	MarkReported([]corev1.UniqueVolumeName)
}

// SetupWithManager watches this node's Node (the cache holds no other), is
// kicked once at start so a missing Node gets registered, and reacts only
// to the Node's deletion: the status is refreshed on a timer, updates carry
// nothing to act on, and a create is either nodelet's own (whose event,
// arriving before the cache has the status just written, would cause a
// second write) or noticed by the next tick.
func (r *NodeReconciler) SetupWithManager(mgr ctrl.Manager) error {
	name := r.Config.NodeName
	kick := source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		return nil
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("node").
		For(&corev1.Node{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false },
			UpdateFunc: func(e event.UpdateEvent) bool { return e.ObjectOld.GetUID() != e.ObjectNew.GetUID() },
		})).
		WatchesRawSource(kick)
	if r.Kick != nil {
		b = b.WatchesRawSource(source.Channel(r.Kick, &handler.EnqueueRequestForObject{}))
	}
	opts := backoffOptions(nodeRetryBase, r.Config.NodeStatusUpdateFrequency.Duration)
	opts.ReconciliationTimeout = max(2*r.Config.NodeStatusUpdateFrequency.Duration, minNodeReconcileTimeout)
	if err := b.WithOptions(opts).Complete(r); err != nil {
		return fmt.Errorf("building node controller: %w", err)
	}
	return nil
}

// backoffOptions are the options of a controller that retries a failed
// request with per-item exponential back-off from base to ceiling. Several
// agents may share a process (tests, simulations), so the controller's
// name is not checked for uniqueness.
func backoffOptions(base, ceiling time.Duration) controller.Options {
	return controller.Options{
		RateLimiter:        workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](base, ceiling),
		SkipNameValidation: ptr.To(true),
		NewQueue:           ctrlqueue.New,
	}
}

// Reconcile registers or adopts the Node, then writes its status if due.
func (r *NodeReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Name != r.Config.NodeName {
		return ctrl.Result{}, nil
	}
	node, err := r.ensureNode(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.ensureLabels(ctx, node); err != nil {
		return ctrl.Result{}, err
	}
	next, err := r.updateStatus(ctx, node)
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

// ensureNode returns the Node, creating it when it does not exist.
func (r *NodeReconciler) ensureNode(ctx context.Context) (*corev1.Node, error) {
	key := types.NamespacedName{Name: r.Config.NodeName}
	node := &corev1.Node{}
	err := r.Client.Get(ctx, key, node)
	if err == nil {
		return node, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading node %s: %w", key.Name, err)
	}
	node = nodeinfo.NewNode(r.Config)
	node.Status = corev1.NodeStatus{}
	err = r.Client.Create(ctx, node)
	if apierrors.IsAlreadyExists(err) {
		// The cache is behind the API server: read the Node there.
		node = &corev1.Node{}
		if err := r.APIReader.Get(ctx, key, node); err != nil {
			return nil, fmt.Errorf("reading existing node %s: %w", key.Name, err)
		}
		return node, nil
	}
	if err != nil {
		return nil, fmt.Errorf("registering node %s: %w", key.Name, err)
	}
	r.adoptedUID = node.UID
	log.FromContext(ctx).Info("Registered node", "node", key.Name, "nodeUID", node.UID)
	return node, nil
}

// ensureLabels adds the labels and annotations nodelet owns to a Node it
// did not create in this process (one registered earlier, or re-created by
// someone else), once per Node object, with a merge patch of those only;
// labels, annotations and taints others set are left alone.
func (r *NodeReconciler) ensureLabels(ctx context.Context, node *corev1.Node) error {
	if node.UID == r.adoptedUID {
		return nil
	}
	want := nodeinfo.Labels(r.Config.NodeName, r.Config.NodeLabels)
	orig := node.DeepCopy()
	changed := false
	for k, v := range want {
		if node.Labels[k] != v {
			if node.Labels == nil {
				node.Labels = map[string]string{}
			}
			node.Labels[k] = v
			changed = true
		}
	}
	for k, v := range nodeinfo.Annotations() {
		if node.Annotations[k] != v {
			if node.Annotations == nil {
				node.Annotations = map[string]string{}
			}
			node.Annotations[k] = v
			changed = true
		}
	}
	if changed {
		if err := r.Client.Patch(ctx, node, client.MergeFrom(orig)); err != nil {
			return fmt.Errorf("adding nodelet's labels to node %s: %w", node.Name, err)
		}
	}
	r.adoptedUID = node.UID
	log.FromContext(ctx).Info("Adopted existing node", "node", node.Name, "nodeUID", node.UID, "labelsAdded", changed)
	return nil
}

// updateStatus observes the node and patches its status when it changed or
// a report is due. It returns when to look again: the update frequency, or
// sooner when the next report is due sooner.
func (r *NodeReconciler) updateStatus(ctx context.Context, node *corev1.Node) (time.Duration, error) {
	update, report := r.Config.NodeStatusUpdateFrequency.Duration, r.Config.NodeStatusReportFrequency.Duration
	observed := r.Observer.Observe(ctx)
	if r.Pressure != nil {
		if p, ok := r.Pressure(); ok {
			observed.Pressure = p
		}
	}
	if r.Problems != nil {
		observed.RuntimeProblems = append(observed.RuntimeProblems, r.Problems()...)
	}
	if r.VolumesInUse != nil {
		observed.VolumesInUse, observed.VolumesInUseKnown = r.volumesInUse(ctx, node), true
	}
	if r.Devices != nil {
		addDevices(&observed, r.Devices)
	}
	now := r.Clock.Now()
	status, changed := nodeinfo.ComputeStatus(node.Status, observed, now)
	due, wait := nodeinfo.ReportDue(node.Status, report, now)
	if !changed && !due {
		r.markReported(status)
		return min(update, wait), nil
	}
	patched := node.DeepCopy()
	patched.Status = status
	if err := r.Client.Status().Patch(ctx, patched, client.StrategicMergeFrom(node)); err != nil {
		return 0, fmt.Errorf("patching status of node %s: %w", node.Name, err)
	}
	r.markReported(status)
	if r.Recorder != nil {
		for _, e := range nodeinfo.ConditionEvents(node.Name, node.Status.Conditions, status.Conditions) {
			r.Recorder.Event(nodeRef(node.Name), e.Type, e.Reason, e.Message)
		}
	}
	metrics.NodeStatusPatches.Inc()
	log.FromContext(ctx).V(1).Info("Patched node status", "node", node.Name, "changed", changed,
		"ready", readyStatus(status))
	return min(update, report), nil
}

// volumesInUse lists the volumes in use; when some records cannot be
// read, the volumes the status lists now are kept too, so that none is
// dropped (and detached) for an unreadable record.
func (r *NodeReconciler) volumesInUse(ctx context.Context, node *corev1.Node) []corev1.UniqueVolumeName {
	names, err := r.VolumesInUse.List()
	if err == nil {
		return names
	}
	log.FromContext(ctx).Error(err, "Unable to read every volume in use, keeping those the node status lists")
	for _, n := range node.Status.VolumesInUse {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// markReported tells the tracker what the status (as written, or found
// already so) lists in use.
func (r *NodeReconciler) markReported(status corev1.NodeStatus) {
	if r.VolumesInUse != nil {
		r.VolumesInUse.MarkReported(status.VolumesInUse)
	}
}

// nodeRef is the Node as the kubelet names it in its events: the node's
// name for its UID too, so that they do not depend on which Node object
// the name has.
func nodeRef(name string) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", Name: name, UID: types.UID(name)}
}

func readyStatus(s corev1.NodeStatus) corev1.ConditionStatus {
	for _, c := range s.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

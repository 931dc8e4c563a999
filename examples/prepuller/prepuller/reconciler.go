package prepuller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/nodelet/nodelet/pkg/nodelet"
)

// Name is the reconciler's name: how nodelet's --controllers and the
// configuration's controllers field spell it ("-prepuller" turns it off),
// the name of its controller and of its checkpoint directory.
const Name = "prepuller"

// The Event reasons, the kubelet's for image pulls.
const (
	EventPulling = "Pulling"
	EventPulled  = "Pulled"
	EventFailed  = "Failed"
	// EventInspectFailed: an entry of the annotation is no image reference.
	EventInspectFailed = "InspectFailed"
)

// stateKey is the checkpoint that holds State.
const stateKey = "state"

// Reconciler returns the pre-puller as a reconciler for nodelet.Run.
func Reconciler(opts Options) nodelet.Reconciler {
	return nodelet.Reconciler{
		Name:  Name,
		Setup: func(n *nodelet.Node) error { return Setup(n, opts) },
	}
}

// Setup registers the pre-puller with n's manager: a controller for this
// node's Node (the only Node the manager's cache holds).
func Setup(n *nodelet.Node, opts Options) error {
	r := &reconciler{
		client:   n.Manager().GetClient(),
		images:   n.Runtime(),
		store:    n.Checkpoints(),
		recorder: n.EventRecorder(),
		clock:    clock.RealClock{},
		nodeName: n.NodeName(),
		opts:     opts.withDefaults(),
	}
	err := ctrl.NewControllerManagedBy(n.Manager()).
		For(&corev1.Node{}, builder.WithPredicates(annotationChanged())).
		Named(Name).
		WithOptions(controller.Options{
			// One Node, one worker; pulls run one after another.
			MaxConcurrentReconciles: 1,
			// Several nodelets may share a process (tests do).
			SkipNameValidation: ptr.To(true),
			// nodelet's queue: no wake-ups while there is nothing to do.
			NewQueue: nodelet.NewQueue,
		}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the %s controller: %w", Name, err)
	}
	return nil
}

// annotationChanged lets through the Node's creation and the changes of
// its annotation, not every status heartbeat nodelet writes (nor this
// reconciler's own condition): the re-check every interval is RequeueAfter's.
func annotationChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetAnnotations()[Annotation] != e.ObjectNew.GetAnnotations()[Annotation]
		},
		DeleteFunc: func(event.DeleteEvent) bool { return false },
	}
}

// imageService is what the pre-puller asks of the container runtime;
// nodelet.Runtime has it.
type imageService interface {
	ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec) (*runtimeapi.Image, error)
	PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
}

// checkpointStore keeps State across restarts; *nodelet.Checkpoints is one.
type checkpointStore interface {
	Save(key string, value any) error
	Load(key string, out any) error
}

type reconciler struct {
	client   client.Client
	images   imageService
	store    checkpointStore
	recorder record.EventRecorder
	clock    clock.PassiveClock
	nodeName string
	opts     Options

	// lastAnnotation is the annotation value seen last, so that its
	// invalid entries are reported once per value, not at every look.
	lastAnnotation *string
}

// scope is what one Reconcile works on.
type scope struct {
	node    *corev1.Node
	images  []string
	invalid []InvalidImage
	present map[string]bool
	state   State
	// dirty says that state differs from the checkpoint.
	dirty bool
}

// Reconcile brings the node's images to what its annotation names and
// reports how far that got.
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Name != r.nodeName {
		return ctrl.Result{}, nil
	}
	node := &corev1.Node{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: r.nodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			// nodelet registers its Node again; its creation brings us back.
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("reading node %s: %w", r.nodeName, err)
	}
	s := &scope{node: node, present: map[string]bool{}}
	annotation := node.Annotations[Annotation]
	s.images, s.invalid = ParseImages(annotation)

	var err error
	if s.state, err = r.loadState(ctx); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.observe(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	r.reportInvalid(ctx, s, annotation)
	if err := r.pull(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	var pruned bool
	s.state, pruned = Prune(s.state, s.images, s.present)
	if s.dirty || pruned {
		if err := r.store.Save(stateKey, s.state); err != nil {
			return ctrl.Result{}, fmt.Errorf("checkpointing the pull back-off: %w", err)
		}
	}
	if err := r.report(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: RequeueAfter(s.images, s.present, s.state, r.clock.Now(), r.opts.Interval)}, nil
}

// reportInvalid records an Event for each invalid entry of a new
// annotation value.
func (r *reconciler) reportInvalid(ctx context.Context, s *scope, annotation string) {
	if r.lastAnnotation != nil && *r.lastAnnotation == annotation {
		return
	}
	r.lastAnnotation = &annotation
	for _, bad := range s.invalid {
		log.FromContext(ctx).Info("Ignoring invalid image reference", "image", bad.Image, "reason", bad.Reason)
		r.recorder.Eventf(s.node, corev1.EventTypeWarning, EventInspectFailed,
			"Failed to apply default image tag %q: %s", bad.Image, bad.Reason)
	}
}

// loadState reads the checkpointed back-off. None (the first run) or a
// corrupt one (set aside by the store) starts from nothing: at worst an
// image is retried sooner.
func (r *reconciler) loadState(ctx context.Context) (State, error) {
	var st State
	err := r.store.Load(stateKey, &st)
	switch {
	case err == nil:
	case errors.Is(err, nodelet.ErrCheckpointNotFound):
	case errors.Is(err, nodelet.ErrCorruptCheckpoint):
		log.FromContext(ctx).Info("Discarded a corrupt pull back-off checkpoint", "error", err.Error())
	default:
		return State{}, fmt.Errorf("reading the pull back-off checkpoint: %w", err)
	}
	if st.Failures == nil {
		st.Failures = map[string]Failure{}
	}
	return st, nil
}

// observe asks the runtime which images are present. An image the runtime
// calls an invalid argument joins the invalid entries, so that it does not
// hold up the others. A runtime that does not answer fails the round (and
// controller-runtime retries it with back-off) before anything is pulled
// or reported.
func (r *reconciler) observe(ctx context.Context, s *scope) error {
	valid := s.images[:0:0]
	for _, image := range s.images {
		img, err := r.images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: pullRef(image)})
		if err != nil && status.Code(err) == codes.InvalidArgument {
			s.invalid = append(s.invalid, InvalidImage{Image: image, Reason: runtimeMessage(err)})
			continue
		}
		if err != nil {
			return fmt.Errorf("checking image %q: %w", image, err)
		}
		s.present[image] = img != nil
		valid = append(valid, image)
	}
	s.images = valid
	return nil
}

// pull pulls the images the plan says to, one after another, and records
// the outcome in s.
func (r *reconciler) pull(ctx context.Context, s *scope) error {
	plan := PlanPulls(s.images, s.present, s.state, r.clock.Now())
	logger := log.FromContext(ctx)
	for image, until := range plan.BackingOff {
		logger.V(1).Info("Back-off pulling image", "image", image, "until", until)
	}
	for _, image := range plan.Pull {
		r.recorder.Eventf(s.node, corev1.EventTypeNormal, EventPulling, "Pulling image %q", image)
		start := r.clock.Now()
		pullCtx, cancel := context.WithTimeout(ctx, r.opts.PullTimeout)
		_, err := r.images.PullImage(pullCtx, &runtimeapi.ImageSpec{Image: pullRef(image)}, nil, nil)
		cancel()
		if err != nil && ctx.Err() != nil {
			// Stopping: not the image's failure.
			return fmt.Errorf("pulling image %q: %w", image, ctx.Err())
		}
		now := r.clock.Now()
		s.dirty = true
		if err != nil {
			msg := runtimeMessage(err)
			f := RecordFailure(s.state.Failures[image], now, msg)
			s.state.Failures[image] = f
			r.recorder.Eventf(s.node, corev1.EventTypeWarning, EventFailed, "Failed to pull image %q: %s", image, msg)
			logger.Info("Failed to pull image", "image", image, "error", msg, "failures", f.Count, "backoff", f.Backoff.Duration)
			continue
		}
		delete(s.state.Failures, image)
		s.present[image] = true
		took := now.Sub(start).Round(time.Millisecond)
		r.recorder.Eventf(s.node, corev1.EventTypeNormal, EventPulled, "Successfully pulled image %q in %s", image, took)
		logger.Info("Pulled image", "image", image, "duration", took)
	}
	return nil
}

// runtimeMessage is the runtime's own error under err (the gRPC status,
// "rpc error: code = NotFound desc = ..."), as the kubelet words a failed
// pull, or err's text when there is none.
func runtimeMessage(err error) string {
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		if st := se.GRPCStatus(); st != nil {
			return st.Err().Error()
		}
	}
	return err.Error()
}

// report writes the ImagesPrePulled condition when it changed, with a
// strategic-merge patch of that condition alone.
func (r *reconciler) report(ctx context.Context, s *scope) error {
	old := FindCondition(s.node.Status.Conditions, ConditionType)
	want := DesiredCondition(s.images, s.invalid, s.present)
	if !NeedsUpdate(old, want) {
		return nil
	}
	if want != nil {
		c := WithTimes(*want, old, r.clock.Now())
		want = &c
	}
	data, err := ConditionPatch(want)
	if err != nil {
		return err
	}
	if err := r.client.Status().Patch(ctx, s.node, client.RawPatch(types.StrategicMergePatchType, data)); err != nil {
		return fmt.Errorf("patching the %s condition of node %s: %w", ConditionType, s.node.Name, err)
	}
	if want == nil {
		log.FromContext(ctx).Info("Removed node condition", "type", ConditionType)
		return nil
	}
	log.FromContext(ctx).Info("Set node condition", "type", ConditionType, "status", want.Status, "reason", want.Reason, "message", want.Message)
	return nil
}

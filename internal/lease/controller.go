package lease

import (
	"github.com/nodelet/nodelet/internal/metrics"

	"context"
	"fmt"
	"math"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// RenewIntervalFraction is the part of the lease duration after which the
// lease is renewed, the kubelet's value.
const RenewIntervalFraction = 0.25

// Back-off after a failed renewal, as the kubelet's lease controller.
const (
	initialBackoff = 200 * time.Millisecond
	maxBackoff     = 7 * time.Second
)

// RenewInterval is how often a lease of durationSeconds is renewed.
func RenewInterval(durationSeconds int32) time.Duration {
	return time.Duration(RenewIntervalFraction * float64(time.Duration(durationSeconds)*time.Second))
}

// Options configure a Controller.
type Options struct {
	// NodeName is the node whose lease is kept, and the holder identity.
	NodeName string
	// DurationSeconds is the lease's leaseDurationSeconds.
	DurationSeconds int32
	// Client reads and writes the Lease. It must not serve Leases from a
	// cache: a node may not list or watch them.
	Client client.Client
	// NodeReader finds the Node to own the lease; a cached reader is fine.
	NodeReader client.Reader
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Logger defaults to the one in Start's context.
	Logger *logr.Logger
	// AttemptTimeout bounds one renewal, so that a hung API server cannot
	// stall renewals forever. Defaults to the lease duration.
	AttemptTimeout time.Duration
}

// Controller renews one node's lease until its context ends. It is a
// manager.Runnable that runs without leader election.
type Controller struct {
	opts     Options
	key      types.NamespacedName
	interval time.Duration
	// latest is the lease as last written; nil means read it first.
	latest *coordinationv1.Lease
}

var (
	_ manager.Runnable               = &Controller{}
	_ manager.LeaderElectionRunnable = &Controller{}
)

// New returns a Controller for opts.
func New(opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.AttemptTimeout <= 0 {
		opts.AttemptTimeout = time.Duration(opts.DurationSeconds) * time.Second
	}
	return &Controller{
		opts:     opts,
		key:      types.NamespacedName{Namespace: corev1.NamespaceNodeLease, Name: opts.NodeName},
		interval: RenewInterval(opts.DurationSeconds),
	}
}

// NeedLeaderElection is false: every node renews its own lease.
func (c *Controller) NeedLeaderElection() bool { return false }

// Start renews the lease every renew interval, retrying failures with a
// back-off from 200ms doubling to 7s, until ctx ends. It returns nil.
func (c *Controller) Start(ctx context.Context) error {
	logger := log.FromContext(ctx)
	if c.opts.Logger != nil {
		logger = *c.opts.Logger
	}
	logger = logger.WithValues("lease", c.key.String())
	ctx = log.IntoContext(ctx, logger)
	logger.Info("Starting node lease renewal", "renewInterval", c.interval)
	backoff := newBackoff()
	for {
		start := c.opts.Clock.Now()
		attemptCtx, cancel := context.WithTimeout(ctx, c.opts.AttemptTimeout)
		err := c.renew(attemptCtx)
		cancel()
		metrics.LeaseRenewDuration.Observe(c.opts.Clock.Since(start).Seconds())
		next := c.interval
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			metrics.LeaseRenewFailures.Inc()
			next = backoff.Step()
			logger.Error(err, "Failed to renew node lease", "retryIn", next)
		default:
			backoff = newBackoff()
			logger.V(1).Info("Renewed node lease")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.opts.Clock.After(next):
		}
	}
}

func newBackoff() wait.Backoff {
	return wait.Backoff{Duration: initialBackoff, Factor: 2, Cap: maxBackoff, Steps: math.MaxInt32}
}

// renew updates the lease last written, or reads (and creates if missing)
// it when there is none or the last update failed.
func (c *Controller) renew(ctx context.Context) error {
	current := c.latest
	c.latest = nil
	if current == nil {
		current = &coordinationv1.Lease{}
		err := c.opts.Client.Get(ctx, c.key, current)
		if apierrors.IsNotFound(err) {
			return c.create(ctx)
		}
		if err != nil {
			return fmt.Errorf("getting lease %s: %w", c.key, err)
		}
	}
	lease := current.DeepCopy()
	c.fill(ctx, lease)
	if err := c.opts.Client.Update(ctx, lease); err != nil {
		return fmt.Errorf("updating lease %s: %w", c.key, err)
	}
	c.latest = lease
	return nil
}

func (c *Controller) create(ctx context.Context) error {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: c.key.Namespace, Name: c.key.Name}}
	c.fill(ctx, lease)
	if err := c.opts.Client.Create(ctx, lease); err != nil {
		return fmt.Errorf("creating lease %s: %w", c.key, err)
	}
	c.latest = lease
	return nil
}

// fill sets what the lease must say now: holder, duration, renew time and,
// when the Node can be read, an owner reference to it.
func (c *Controller) fill(ctx context.Context, lease *coordinationv1.Lease) {
	lease.Spec.HolderIdentity = ptr.To(c.opts.NodeName)
	lease.Spec.LeaseDurationSeconds = ptr.To(c.opts.DurationSeconds)
	lease.Spec.RenewTime = ptr.To(metav1.NewMicroTime(c.opts.Clock.Now()))
	if c.opts.NodeReader == nil {
		return
	}
	node := &corev1.Node{}
	if err := c.opts.NodeReader.Get(ctx, types.NamespacedName{Name: c.opts.NodeName}, node); err != nil {
		// No Node yet (or not readable now): the next renewal sets it.
		log.FromContext(ctx).V(1).Info("Node not readable for the lease owner reference", "node", c.opts.NodeName, "err", err)
		return
	}
	lease.OwnerReferences = withNodeOwner(lease.OwnerReferences, node)
}

// withNodeOwner replaces any Node owner reference in refs with one to node.
func withNodeOwner(refs []metav1.OwnerReference, node *corev1.Node) []metav1.OwnerReference {
	out := make([]metav1.OwnerReference, 0, len(refs)+1)
	for _, r := range refs {
		if r.APIVersion == "v1" && r.Kind == "Node" {
			continue
		}
		out = append(out, r)
	}
	return append(out, metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID})
}

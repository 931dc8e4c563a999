package runtimestate

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Defaults of NetworkOptions.
const (
	// DefaultMaxAge is how old a read of the runtime's status may be for
	// a pod's sync to act on it. The kubelet reads it every 5 s; a second
	// keeps a held pod's start close to the runtime turning ready, for at
	// most one Status call a second while pods ask.
	DefaultMaxAge = time.Second
	// DefaultTimeout bounds one Status call: syncs wait for it.
	DefaultTimeout = 2 * time.Second
)

// StatusReader reads the runtime's conditions; cri.Runtime implements it.
type StatusReader interface {
	// Status returns the runtime's conditions (RuntimeReady, NetworkReady).
	Status(ctx context.Context) (*runtimeapi.RuntimeStatus, error)
}

// NetworkError reports why the runtime's network cannot give a sandbox its
// network, given its status, in the words the kubelet and the Node's
// Ready condition use: "container runtime network not ready:
// NetworkReady=false reason:<reason> message:<message>". It is nil when the
// NetworkReady condition is true, and when st is nil: a runtime whose
// status is not known holds no pod (its sandbox creation says what is
// wrong).
func NetworkError(st *runtimeapi.RuntimeStatus) error {
	if st == nil {
		return nil
	}
	for _, c := range st.GetConditions() {
		if c.GetType() != runtimeapi.NetworkReady {
			continue
		}
		if c.GetStatus() {
			return nil
		}
		return fmt.Errorf("container runtime network not ready: %s=false reason:%s message:%s",
			c.GetType(), c.GetReason(), c.GetMessage())
	}
	return fmt.Errorf("container runtime network not ready: %s condition is missing", runtimeapi.NetworkReady)
}

// NetworkOptions configure a Network.
type NetworkOptions struct {
	// MaxAge is how old the status acted on may be (DefaultMaxAge when 0).
	MaxAge time.Duration
	// Timeout bounds one Status call (DefaultTimeout when 0).
	Timeout time.Duration
	// Clock dates the reads; nil is the real clock.
	Clock clock.PassiveClock
	// Logger logs failed reads at V(1); the zero Logger discards.
	Logger logr.Logger
}

// Network is the runtime's network state as last read. It is safe for
// concurrent use.
type Network struct {
	rt   StatusReader
	opts NetworkOptions

	// mu is held across a read, so concurrent callers wait for the one
	// read (bounded by Timeout) instead of making their own.
	mu sync.Mutex
	// status is the last status read (nil: none yet); readAt is when the
	// last read was tried, whether or not it succeeded.
	status *runtimeapi.RuntimeStatus
	readAt time.Time
}

// NewNetwork returns a Network reading rt's status.
func NewNetwork(rt StatusReader, opts NetworkOptions) *Network {
	if opts.MaxAge <= 0 {
		opts.MaxAge = DefaultMaxAge
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Network{rt: rt, opts: opts}
}

// Err returns NetworkError of the runtime's status, read again when the
// last read was tried more than MaxAge ago. A read that fails keeps the
// last status (as the kubelet keeps its network state when the runtime
// does not answer) and is not tried again before MaxAge passed, so a
// runtime that is down is not asked once per pod.
func (n *Network) Err(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if now := n.opts.Clock.Now(); n.readAt.IsZero() || now.Sub(n.readAt) >= n.opts.MaxAge {
		if err := n.read(ctx); err == nil || ctx.Err() == nil {
			// A read cut short by the caller's end says nothing of the
			// runtime: the next caller tries again.
			n.readAt = n.opts.Clock.Now()
		}
	}
	return NetworkError(n.status)
}

// read reads the runtime's status into n.status; n.mu is held. A failure
// is logged here and returned only to say the read failed.
func (n *Network) read(ctx context.Context) error {
	readCtx, cancel := context.WithTimeout(ctx, n.opts.Timeout)
	defer cancel()
	st, err := n.rt.Status(readCtx)
	if err != nil {
		n.opts.Logger.V(1).Info("Unable to read the runtime's status, keeping the last one", "err", err)
		return err
	}
	n.status = st
	return nil
}

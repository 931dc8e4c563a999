package shutdown

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/kuberuntime/planner"
)

// The kubelet's Node event of a shutdown, and its Ready condition's
// message while the node shuts down.
const (
	// EventShutdown is the reason of the Node events of a shutdown and of
	// its cancellation.
	EventShutdown = "Shutdown"
	// MessageShutdownEvent and MessageShutdownCancelled are their
	// messages.
	MessageShutdownEvent     = "Shutdown manager detected shutdown event"
	MessageShutdownCancelled = "Shutdown manager detected shutdown cancellation"
	// ProblemShuttingDown is why the node is not Ready while it shuts
	// down.
	ProblemShuttingDown = "node is shutting down"
)

const (
	// reconnectPeriod is the wait before connecting again to a bus that
	// went away, as the kubelet's.
	reconnectPeriod = time.Second
	// podPoll is how often the pods of a group are looked at while they
	// stop.
	podPoll = 100 * time.Millisecond
	// reloadPolls and firstReloadPoll: after logind is told to reload its
	// configuration, InhibitDelayMaxUSec is read again up to reloadPolls
	// times, waiting firstReloadPoll, then twice as long each time, as the
	// kubelet does.
	reloadPolls     = 5
	firstReloadPoll = 100 * time.Millisecond
)

// PodStopper stops pods for good: the pod reconciler.
type PodStopper interface {
	// Evict hands the pod's stop to its sync; it reports false when the
	// pod was being stopped so already.
	Evict(pod *v1.Pod, ev planner.Eviction) bool
}

// Options configure a Manager.
type Options struct {
	// NodeName names the Node of the events.
	NodeName string
	// Periods are the shutdown grace periods (Periods); at least one.
	Periods []Period
	// BusAddress is the D-Bus address of the system bus, where logind
	// is; empty: DBUS_SYSTEM_BUS_ADDRESS, else
	// unix:path=/var/run/dbus/system_bus_socket.
	BusAddress string
	// LogindConfDir is where the drop-in that raises logind's
	// InhibitDelayMaxSec is written; empty: DefaultLogindConfDir.
	LogindConfDir string
	// ActivePods returns the pods admitted to the node that have not
	// finished.
	ActivePods func() []*v1.Pod
	// Running reports whether a pod has not finished: it still runs, or
	// its final status is not written yet.
	Running func(uid types.UID) bool
	// Stopper stops the pods.
	Stopper PodStopper
	// NodeChanged, when set, asks for a Node status write now.
	NodeChanged func()
	// Recorder records the Node's events; nil records none.
	Recorder record.EventRecorder
	// Clock is the time; nil is the real one.
	Clock clock.Clock
	Log   logr.Logger
}

// Manager is the node shutdown manager: a runnable that holds logind's
// shutdown back with a delay inhibitor lock and, when logind announces the
// shutdown, stops the node's pods group by group before it lets go (see
// the package documentation). Its state says whether the node is shutting
// down, for admission and the Node's Ready condition.
type Manager struct {
	opts Options

	mu           sync.Mutex
	shuttingDown bool

	// bus and lock belong to Start's goroutine.
	bus  *logind
	lock *inhibitLock
}

// New returns a Manager; it connects to logind once started.
func New(opts Options) (*Manager, error) {
	switch {
	case len(opts.Periods) == 0:
		return nil, errors.New("node shutdown manager: no shutdown grace period")
	case opts.ActivePods == nil || opts.Running == nil || opts.Stopper == nil:
		return nil, errors.New("node shutdown manager: ActivePods, Running and Stopper are required")
	}
	if opts.LogindConfDir == "" {
		opts.LogindConfDir = DefaultLogindConfDir
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Manager{opts: opts}, nil
}

// NeedLeaderElection is false: every node handles its own shutdown.
func (m *Manager) NeedLeaderElection() bool { return false }

// ShuttingDown reports whether logind announced a shutdown that was not
// cancelled since.
func (m *Manager) ShuttingDown() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.shuttingDown
}

// Problems is why the node is not Ready because of a shutdown: none
// unless it is shutting down.
func (m *Manager) Problems() []string {
	if m.ShuttingDown() {
		return []string{ProblemShuttingDown}
	}
	return nil
}

// Start connects to logind, takes the inhibitor lock and handles logind's
// shutdown announcements until ctx ends, connecting again when the bus
// goes away. When logind cannot be reached at the start, or does not let
// the lock delay the shutdown for the whole grace period, the manager logs
// why and does nothing more, as the kubelet does: the node then shuts down
// without waiting for its pods.
func (m *Manager) Start(ctx context.Context) error {
	events, err := m.connect(ctx)
	if err != nil {
		m.opts.Log.Error(err, "Unable to watch the node for shutdown events: the node will shut down without stopping its pods first")
		return nil
	}
	defer m.disconnect()
	for {
		select {
		case <-ctx.Done():
			return nil
		case active, ok := <-events:
			if !ok {
				m.opts.Log.Info("Lost the connection to logind, connecting again")
				if events = m.reconnect(ctx); events == nil {
					return nil
				}
				continue
			}
			m.handle(ctx, active)
		}
	}
}

// connect connects to the bus, raises logind's InhibitDelayMaxUSec to the
// grace period when it is shorter, subscribes to PrepareForShutdown and
// takes the inhibitor lock (releasing the one of an earlier connection).
func (m *Manager) connect(ctx context.Context) (<-chan bool, error) {
	bus, err := dialLogind(m.opts.BusAddress)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = bus.Close()
		}
	}()
	if err := m.ensureInhibitDelay(ctx, bus); err != nil {
		return nil, err
	}
	// Subscribed first, so that no announcement made once the lock is
	// held goes unseen.
	events, err := bus.Watch()
	if err != nil {
		return nil, err
	}
	lock, err := bus.Inhibit(ctx)
	if err != nil {
		return nil, err
	}
	m.replaceLock(lock)
	m.bus, ok = bus, true
	m.opts.Log.Info("Watching the node for shutdown events", "shutdownGracePeriod", Total(m.opts.Periods), "periods", m.opts.Periods)
	return events, nil
}

// reconnect closes the lost connection and connects again every
// reconnectPeriod until it works; nil when ctx ended first. The lock
// taken before stays held meanwhile.
func (m *Manager) reconnect(ctx context.Context) <-chan bool {
	_ = m.bus.Close()
	m.bus = nil
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-m.opts.Clock.After(reconnectPeriod):
		}
		events, err := m.connect(ctx)
		if err == nil {
			return events
		}
		m.opts.Log.Error(err, "Unable to watch the node for shutdown events")
	}
}

// disconnect releases the lock and closes the connection: nodelet stops.
func (m *Manager) disconnect() {
	m.replaceLock(nil)
	if m.bus != nil {
		_ = m.bus.Close()
		m.bus = nil
	}
}

// replaceLock releases the lock held, if any, and keeps lock instead.
func (m *Manager) replaceLock(lock *inhibitLock) {
	if err := m.lock.Release(); err != nil {
		m.opts.Log.Error(err, "Unable to release the shutdown inhibitor lock")
	}
	m.lock = lock
}

// ensureInhibitDelay makes logind's InhibitDelayMaxUSec at least the
// grace period, as the kubelet does: when it is shorter, it writes the
// drop-in, has logind reload, and reads the value again until it is long
// enough or reloadPolls reads have passed.
func (m *Manager) ensureInhibitDelay(ctx context.Context, bus *logind) error {
	want := Total(m.opts.Periods)
	cur, err := bus.InhibitDelayMax(ctx)
	if err != nil {
		return err
	}
	if cur >= want {
		return nil
	}
	m.opts.Log.Info("Raising logind's InhibitDelayMaxSec to the shutdown grace period", "current", cur, "shutdownGracePeriod", want,
		"dropIn", filepath.Join(m.opts.LogindConfDir, LogindDropIn))
	if err := WriteInhibitDelay(m.opts.LogindConfDir, want); err != nil {
		return err
	}
	if err := bus.Reload(ctx); err != nil {
		return err
	}
	wait := firstReloadPoll
	for range reloadPolls {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.opts.Clock.After(wait):
		}
		if cur, err = bus.InhibitDelayMax(ctx); err != nil {
			return err
		}
		if cur >= want {
			return nil
		}
		wait *= 2
	}
	return fmt.Errorf("%w: %v after the reload, want %v", errDelayTooShort, cur, want)
}

// handle acts on one PrepareForShutdown: on a shutdown, the node turns
// NotReady and refuses new pods, its pods stop group by group, then the
// lock is released and the machine may go down. On a cancellation, pods
// are admitted again and the lock is taken again for the next shutdown.
func (m *Manager) handle(ctx context.Context, active bool) {
	msg := MessageShutdownCancelled
	if active {
		msg = MessageShutdownEvent
	}
	m.opts.Log.Info("Node shutdown event", "shuttingDown", active)
	if m.opts.Recorder != nil {
		ref := &v1.ObjectReference{Kind: "Node", Name: m.opts.NodeName, UID: types.UID(m.opts.NodeName)}
		m.opts.Recorder.Event(ref, v1.EventTypeNormal, EventShutdown, msg)
	}
	m.mu.Lock()
	m.shuttingDown = active
	m.mu.Unlock()
	if m.opts.NodeChanged != nil {
		m.opts.NodeChanged()
	}
	if !active {
		lock, err := m.bus.Inhibit(ctx)
		if err != nil {
			m.opts.Log.Error(err, "Unable to take the shutdown inhibitor lock again after the shutdown was cancelled")
			return
		}
		m.replaceLock(lock)
		return
	}
	m.stopPods(ctx, m.opts.ActivePods())
	m.replaceLock(nil)
	m.opts.Log.Info("Released the shutdown inhibitor lock: the node may shut down")
}

// stopPods stops the pods group by group, from the lowest priority up:
// each pod of a group with the smaller of its own grace period and the
// group's, then waits for the group's pods to finish, for the group's
// period at most, before the next group. Empty groups take no time.
func (m *Manager) stopPods(ctx context.Context, pods []*v1.Pod) {
	for _, g := range GroupPods(m.opts.Periods, pods) {
		if len(g.Pods) == 0 {
			continue
		}
		for _, pod := range g.Pods {
			ev := Eviction(pod, g.Period)
			m.opts.Log.Info("Stopping pod for the node shutdown", "pod", klog.KObj(pod), "podUID", pod.UID,
				"priority", g.Priority, "gracePeriodSeconds", ev.GracePeriodSeconds)
			m.opts.Stopper.Evict(pod, ev)
		}
		if m.waitStopped(ctx, g) {
			m.opts.Log.Info("Pods of a shutdown group stopped", "priority", g.Priority, "pods", len(g.Pods))
		} else {
			m.opts.Log.Info("Pods of a shutdown group not stopped within its grace period, going on", "priority", g.Priority,
				"gracePeriodSeconds", g.GracePeriodSeconds, "running", m.running(g.Pods))
		}
	}
}

// waitStopped waits until no pod of g runs, for g's period at most; it
// reports whether they all stopped.
func (m *Manager) waitStopped(ctx context.Context, g Group) bool {
	deadline := m.opts.Clock.NewTimer(time.Duration(g.GracePeriodSeconds) * time.Second)
	defer deadline.Stop()
	for {
		if len(m.running(g.Pods)) == 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C():
			return len(m.running(g.Pods)) == 0
		case <-m.opts.Clock.After(podPoll):
		}
	}
}

// running returns the pods that still run.
func (m *Manager) running(pods []*v1.Pod) []klog.ObjectRef {
	var out []klog.ObjectRef
	for _, p := range pods {
		if m.opts.Running(p.UID) {
			out = append(out, klog.KObj(p))
		}
	}
	return out
}

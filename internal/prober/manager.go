package prober

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodelet/nodelet/internal/metrics"

	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

// ProbeType names a kind of probe the way the kubelet's events and metrics
// do.
type ProbeType string

// The probe types.
const (
	Startup   ProbeType = "Startup"
	Readiness ProbeType = "Readiness"
	Liveness  ProbeType = "Liveness"
)

// Defaults of the probe fields, as the API server sets them.
const (
	defaultPeriodSeconds    = 10
	defaultTimeoutSeconds   = 1
	defaultSuccessThreshold = 1
	defaultFailureThreshold = 3
)

// Event reasons, the kubelet's.
const (
	EventUnhealthy    = "Unhealthy"
	EventProbeWarning = "ProbeWarning"
)

// DefaultChannelCapacity is the capacity of the events channel when
// Options.ChannelCapacity is zero.
const DefaultChannelCapacity = 1000

// Options configure a Manager.
type Options struct {
	// Clock drives initial delays and periods. Nil means the real clock.
	Clock clock.Clock
	// Logger logs probe failures (V(1)) and errors. The zero value means
	// controller-runtime's logger named "prober".
	Logger logr.Logger
	// ChannelCapacity is the capacity of the events channel. Zero means
	// DefaultChannelCapacity.
	ChannelCapacity int
}

// Manager runs the probes of the containers of this node's pods. Create it
// with New, add it to the controller manager (it stops every worker when
// the manager stops), call Sync from the pod reconciler and watch Events.
// It is safe for concurrent use.
type Manager struct {
	clock    clock.Clock
	log      logr.Logger
	recorder record.EventRecorder
	probe    probeFunc
	events   chan event.TypedGenericEvent[*corev1.Pod]

	// ctx is the parent of every worker's context; Stop cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex // guards the fields below
	pods    map[types.UID]*podProbes
	stopped bool
}

// podProbes is the probing state of one pod.
type podProbes struct {
	podIP   string // the pod's status IP, for a sandbox that reports none
	workers map[workerKey]*worker
	results map[ProbeType]map[string]bool // by container ID
}

func newPodProbes(pod *corev1.Pod) *podProbes {
	return &podProbes{
		podIP:   pod.Status.PodIP,
		workers: map[workerKey]*worker{},
		results: map[ProbeType]map[string]bool{Startup: {}, Readiness: {}, Liveness: {}},
	}
}

// workerKey names one worker of a pod.
type workerKey struct {
	containerID string
	probeType   ProbeType
}

var (
	_ manager.Runnable               = (*Manager)(nil)
	_ manager.LeaderElectionRunnable = (*Manager)(nil)
)

// New returns a Manager that runs exec probes through runner (a
// cri.Runtime) and records probe events with recorder (nil for none).
func New(runner CommandRunner, recorder record.EventRecorder, opts Options) (*Manager, error) {
	if runner == nil {
		return nil, errors.New("creating prober: a command runner is required")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = log.Log.WithName("prober")
	}
	if opts.ChannelCapacity <= 0 {
		opts.ChannelCapacity = DefaultChannelCapacity
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{
		clock:    opts.Clock,
		log:      opts.Logger,
		recorder: recorder,
		probe:    newHandlers(runner).run,
		events:   make(chan event.TypedGenericEvent[*corev1.Pod], opts.ChannelCapacity),
		ctx:      ctx,
		cancel:   cancel,
		pods:     map[types.UID]*podProbes{},
	}, nil
}

// Events returns the channel on which the Manager sends a pod whenever one
// of its probe results changed. Each event's object is a pod stub with only
// Name, Namespace and UID set.
func (m *Manager) Events() <-chan event.TypedGenericEvent[*corev1.Pod] {
	return m.events
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every node
// probes its own pods.
func (m *Manager) NeedLeaderElection() bool { return false }

// Start waits for ctx to end, then stops every worker. It implements
// manager.Runnable; workers run from the first Sync whether or not Start
// was called.
func (m *Manager) Start(ctx context.Context) error {
	<-ctx.Done()
	m.Stop()
	return nil
}

// Stop stops every worker and waits for them to return. Sync does nothing
// afterwards.
func (m *Manager) Stop() {
	m.mu.Lock()
	m.stopped = true
	for uid, pp := range m.pods {
		m.stopAll(pp)
		delete(m.pods, uid)
	}
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
}

// Sync makes the pod's workers match its running containers: it starts a
// worker for every probe of every running instance (regular containers and
// restartable init containers) that has none, and stops the workers, and
// drops the results, of instances no longer running. A pod that is being
// deleted or has finished keeps no workers. rt is the pod's runtime as the
// caller just observed it; neither argument is modified or kept.
func (m *Manager) Sync(pod *corev1.Pod, rt state.PodRuntime) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return
	}
	pp := m.pods[pod.UID]
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		if pp != nil {
			m.stopAll(pp)
			delete(m.pods, pod.UID)
		}
		return
	}
	want := wantedWorkers(pod, rt)
	if pp == nil {
		if len(want) == 0 {
			return
		}
		pp = newPodProbes(pod)
		m.pods[pod.UID] = pp
	}
	pp.podIP = pod.Status.PodIP
	for key, w := range pp.workers {
		if _, ok := want[key]; !ok {
			m.stopWorker(pp, w)
		}
	}
	for key, spec := range want {
		if _, ok := pp.workers[key]; ok {
			continue
		}
		m.startWorker(pod, pp, key, spec)
	}
}

// workerSpec is what a new worker is made from.
type workerSpec struct {
	container *corev1.Container
	inst      state.Container
	podIP     string
}

// wantedWorkers returns a worker spec for every probe of every running
// container instance of the pod.
func wantedWorkers(pod *corev1.Pod, rt state.PodRuntime) map[workerKey]workerSpec {
	ips := map[string]string{}
	for _, sb := range rt.Sandboxes {
		if len(sb.IPs) > 0 {
			ips[sb.ID] = sb.IPs[0]
		}
	}
	want := map[workerKey]workerSpec{}
	add := func(c *corev1.Container) {
		for _, inst := range rt.Containers {
			if inst.Name != c.Name || inst.State != state.ContainerRunning || inst.ID == "" {
				continue
			}
			for _, t := range []ProbeType{Startup, Readiness, Liveness} {
				if probeOf(c, t) != nil {
					want[workerKey{inst.ID, t}] = workerSpec{container: c, inst: inst, podIP: ips[inst.SandboxID]}
				}
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	return want
}

// Forget stops the pod's workers and drops its results. Call it when the
// pod is gone from the node.
func (m *Manager) Forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pp := m.pods[uid]; pp != nil {
		m.stopAll(pp)
		delete(m.pods, uid)
	}
	// A gone pod's series would otherwise be exported for ever.
	metrics.ProbeTotal.DeletePartialMatch(prometheus.Labels{"pod_uid": string(uid)})
}

// PodUIDs returns the pods that have probe workers.
func (m *Manager) PodUIDs() []types.UID {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Collect(maps.Keys(m.pods))
}

// Results returns the pod's latest probe results by container ID. A
// readiness probe starts out failed and a liveness probe succeeded; a
// startup probe has no result until it has one. The maps are the caller's.
func (m *Manager) Results(uid types.UID) state.ProbeResults {
	m.mu.Lock()
	defer m.mu.Unlock()
	pp := m.pods[uid]
	if pp == nil {
		return state.ProbeResults{}
	}
	return state.ProbeResults{
		Startup:   maps.Clone(pp.results[Startup]),
		Liveness:  maps.Clone(pp.results[Liveness]),
		Readiness: maps.Clone(pp.results[Readiness]),
	}
}

// startWorker starts the worker for key. m.mu is held.
func (m *Manager) startWorker(pod *corev1.Pod, pp *podProbes, key workerKey, spec workerSpec) {
	w := m.newWorker(pod, pp, key, spec)
	ctx, cancel := context.WithCancel(m.ctx)
	w.cancel = cancel
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		w.loop(ctx)
	}()
}

// newWorker registers the worker for key with its initial result. m.mu is
// held.
func (m *Manager) newWorker(pod *corev1.Pod, pp *podProbes, key workerKey, spec workerSpec) *worker {
	c := spec.container.DeepCopy()
	w := &worker{
		m:          m,
		uid:        pod.UID,
		key:        key,
		container:  c,
		probe:      probeOf(c, key.probeType),
		startedAt:  spec.inst.StartedAt,
		podIP:      spec.podIP,
		hasStartup: c.StartupProbe != nil,
		wake:       make(chan struct{}, 1),
		ref: &corev1.ObjectReference{
			Kind:       "Pod",
			APIVersion: "v1",
			Namespace:  pod.Namespace,
			Name:       pod.Name,
			UID:        pod.UID,
			FieldPath:  fieldPath(pod, c.Name),
		},
		log: m.log.WithValues("pod", klog.KObj(pod), "podUID", pod.UID, "container", c.Name, "containerID", key.containerID, "probe", key.probeType),
	}
	if w.startedAt.IsZero() {
		w.startedAt = spec.inst.CreatedAt
	}
	switch key.probeType {
	case Readiness:
		pp.results[Readiness][key.containerID] = false
	case Liveness:
		pp.results[Liveness][key.containerID] = true
	}
	w.cancel = func() {}
	pp.workers[key] = w
	return w
}

// stopWorker stops a worker and drops its result. m.mu is held.
func (m *Manager) stopWorker(pp *podProbes, w *worker) {
	w.cancel()
	delete(pp.workers, w.key)
	delete(pp.results[w.key.probeType], w.key.containerID)
}

func (m *Manager) stopAll(pp *podProbes) {
	for _, w := range pp.workers {
		m.stopWorker(pp, w)
	}
}

// setResult records a worker's result and reports whether it changed. A
// stopped worker records nothing.
func (m *Manager) setResult(w *worker, ok bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	pp := m.pods[w.uid]
	if pp == nil || pp.workers[w.key] != w {
		return false
	}
	old, found := pp.results[w.key.probeType][w.key.containerID]
	pp.results[w.key.probeType][w.key.containerID] = ok
	return !found || old != ok
}

// started reports whether the container's startup probe has succeeded.
func (m *Manager) started(uid types.UID, containerID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	pp := m.pods[uid]
	return pp != nil && pp.results[Startup][containerID]
}

// wakeSiblings makes the container's other workers probe now, after its
// startup probe succeeded.
func (m *Manager) wakeSiblings(w *worker) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pp := m.pods[w.uid]
	if pp == nil {
		return
	}
	for key, o := range pp.workers {
		if key.containerID == w.key.containerID && o != w {
			select {
			case o.wake <- struct{}{}:
			default:
			}
		}
	}
}

// podIP returns the pod's status IP, for probes of a sandbox without one.
func (m *Manager) podIP(uid types.UID) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pp := m.pods[uid]; pp != nil {
		return pp.podIP
	}
	return ""
}

// notify sends the pod on the events channel, waiting for room unless ctx
// ends first.
func (m *Manager) notify(ctx context.Context, w *worker) {
	p := &corev1.Pod{}
	p.Namespace, p.Name, p.UID = w.ref.Namespace, w.ref.Name, w.uid
	select {
	case m.events <- event.TypedGenericEvent[*corev1.Pod]{Object: p}:
	case <-ctx.Done():
	}
}

func (m *Manager) event(w *worker, eventtype, reason, messageFmt string, args ...any) {
	if m.recorder != nil {
		m.recorder.Eventf(w.ref, eventtype, reason, messageFmt, args...)
	}
}

func probeOf(c *corev1.Container, t ProbeType) *corev1.Probe {
	switch t {
	case Startup:
		return c.StartupProbe
	case Readiness:
		return c.ReadinessProbe
	default:
		return c.LivenessProbe
	}
}

// fieldPath names a container within its pod's spec, for events.
func fieldPath(pod *corev1.Pod, container string) string {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == container {
			return "spec.initContainers{" + container + "}"
		}
	}
	return "spec.containers{" + container + "}"
}

func valueOr(v, def int32) int32 {
	if v <= 0 {
		return def
	}
	return v
}

package eviction

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/kuberuntime/planner"
	"github.com/nodelet/nodelet/internal/metrics"
	"github.com/nodelet/nodelet/internal/nodeinfo"
	"github.com/nodelet/nodelet/internal/podcache"
	"github.com/nodelet/nodelet/internal/volumestats"
)

// podCleanupTimeout bounds how long a round waits for the pod it evicted
// to stop before the next round measures again (the kubelet's).
const podCleanupTimeout = 30 * time.Second

// podCleanupPoll is how often that wait looks.
const podCleanupPoll = 500 * time.Millisecond

// NodeReclaimer frees node-level resources before pods are evicted for
// disk pressure: dead containers, then unused images.
type NodeReclaimer interface {
	DeleteAllUnusedContainers(ctx context.Context) error
	DeleteUnusedImages(ctx context.Context) (int64, error)
}

// Evictor stops an evicted pod: the pod reconciler. Evict hands the
// eviction to the pod's sync (which plans the stop and reports the pod
// Failed with reason Evicted) and reports false when the pod was evicted
// already. Evicted reports whether it was.
type Evictor interface {
	Evict(pod *v1.Pod, ev planner.Eviction) bool
	Evicted(uid types.UID) bool
}

// VolumePaths says where a pod's emptyDir volumes live.
type VolumePaths interface {
	EmptyDirPath(uid types.UID, name string) string
}

// Options are what a Manager works with. Reclaimer may be nil (nothing is
// reclaimed before evicting); Stats, Volumes and ImageFs may be nil too
// (pods' usage, emptyDir usage and the image filesystem are then unknown).
// DiskUsage measures an emptyDir volume (nil: volumestats.DiskUsage).
// Pods reads a pod an eviction waits for; PodLister lists the node's pods
// at each round (nil: through Pods).
type Options struct {
	Config    *v1alpha1.NodeletConfiguration
	Host      nodeinfo.Host
	ImageFs   ImageFs
	Stats     StatsSource
	Volumes   VolumePaths
	DiskUsage func(dir string) (volumestats.Usage, error)
	Pods      client.Reader
	PodLister podcache.Lister
	Evictor   Evictor
	Reclaimer NodeReclaimer
	Recorder  record.EventRecorder
	Clock     clock.WithTicker
	Log       logr.Logger
}

// Manager is the eviction manager: a runnable that looks at the node every
// evictionMonitoringInterval.
type Manager struct {
	opts     Options
	cfg      Config
	interval time.Duration
	localFS  bool

	// once remembers what the rounds logged for each active pod.
	once podOnce

	mu       sync.Mutex
	state    State
	decision Decision
	observed bool
}

// New returns a Manager for the defaulted configuration in opts; bad
// thresholds are reported here, once.
func New(opts Options) (*Manager, error) {
	c := opts.Config
	ts, err := ParseThresholds(c.EvictionHard, c.EvictionSoft, c.EvictionSoftGracePeriod, c.EvictionMinimumReclaim)
	if err != nil {
		return nil, fmt.Errorf("parsing eviction thresholds: %w", err)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Host == nil {
		opts.Host = nodeinfo.OSHost{}
	}
	if opts.DiskUsage == nil {
		opts.DiskUsage = volumestats.DiskUsage
	}
	if opts.PodLister == nil {
		opts.PodLister = podcache.FromReader(opts.Pods)
	}
	return &Manager{
		opts: opts,
		cfg: Config{Thresholds: ts, TransitionPeriod: c.EvictionPressureTransitionPeriod.Duration,
			MaxPodGracePeriod: int64(c.EvictionMaxPodGracePeriod)},
		interval: c.EvictionMonitoringInterval.Duration,
		localFS:  c.LocalStorageCapacityIsolation == nil || *c.LocalStorageCapacityIsolation,
	}, nil
}

// Conditions returns the pressure conditions the node reports now, and
// whether the manager has looked at the node yet.
func (m *Manager) Conditions() ([]v1.NodeConditionType, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]v1.NodeConditionType(nil), m.decision.Conditions...), m.observed
}

// Pressure is Conditions as nodeinfo's Pressure, and whether the manager
// has looked at the node yet.
func (m *Manager) Pressure() (nodeinfo.Pressure, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.decision
	return nodeinfo.Pressure{
		Memory: d.HasCondition(v1.NodeMemoryPressure),
		Disk:   d.HasCondition(v1.NodeDiskPressure),
		PID:    d.HasCondition(v1.NodePIDPressure),
	}, m.observed
}

// NeedLeaderElection is false: every node runs its own.
func (m *Manager) NeedLeaderElection() bool { return false }

// Start runs a round every evictionMonitoringInterval until ctx ends.
func (m *Manager) Start(ctx context.Context) error {
	t := m.opts.Clock.NewTicker(m.interval)
	defer t.Stop()
	for {
		m.Synchronize(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// Synchronize is one round: measure, evict pods past their local storage
// limits, decide the thresholds met and the conditions, reclaim node-level
// resources for a disk signal, and evict at most one pod.
func (m *Manager) Synchronize(ctx context.Context) {
	logger := m.opts.Log
	obs, at := m.observe(ctx)
	pods, err := m.activePods(ctx)
	if err != nil {
		logger.Error(err, "Unable to list the pods to evict")
	} else {
		m.once.retain(pods)
	}
	// The runtime's stats are read only when something needs them: a pod
	// with an ephemeral-storage limit, or a threshold met.
	var usage []PodUsage
	withStats := false
	if m.localFS && len(pods) > 0 {
		withStats = slices.ContainsFunc(pods, hasEphemeralLimit)
		usage = m.podUsage(ctx, pods, withStats)
		if m.evictLocalStorage(ctx, usage, at) {
			return
		}
	}

	m.mu.Lock()
	var d Decision
	m.state, d = Decide(m.cfg, m.state, obs, at)
	m.decision, m.observed = d, true
	m.mu.Unlock()
	if len(d.Met) == 0 {
		return
	}
	t := d.Met[0]
	logger.Info("Eviction threshold met", "signal", t.Signal, "soft", t.Soft,
		"available", obs[t.Signal].Available, "threshold", t.Value.Of(obs[t.Signal].Capacity))
	if m.opts.Recorder != nil {
		m.opts.Recorder.Event(m.nodeRef(), v1.EventTypeWarning, EventThresholdMet, ThresholdMetEventMessage(t))
	}
	if t.Signal.Disk() && m.reclaim(ctx, t) {
		return
	}
	if !withStats {
		usage = m.podUsage(ctx, pods, true)
	}
	m.evictOne(ctx, t, obs[t.Signal], usage, at)
}

// observe measures every signal it can; one it cannot is left out (and
// meets no threshold).
func (m *Manager) observe(ctx context.Context) (Observations, time.Time) {
	logger := m.opts.Log
	obs := Observations{}
	now := m.opts.Clock.Now()
	if o, err := observeMemory(m.opts.Host); err == nil {
		obs[SignalMemoryAvailable] = o
	} else {
		logger.V(1).Info("Unable to measure memory.available", "err", err)
	}
	if o, err := observePIDs(m.opts.Host); err == nil {
		obs[SignalPIDAvailable] = o
	} else {
		logger.V(1).Info("Unable to measure pid.available", "err", err)
	}
	nodefs, err := m.opts.Host.Statfs(m.opts.Config.RootDir)
	if err != nil {
		logger.V(1).Info("Unable to measure nodefs", "err", err)
		return obs, now
	}
	fsObservations(nodefs, SignalNodeFsAvailable, SignalNodeFsInodesFree, obs)
	imagefs := nodefs
	if m.opts.ImageFs != nil {
		if info, err := m.opts.ImageFs.ImageFsInfo(ctx); err == nil {
			if mp := imageFsMountpoint(info); mp != "" {
				if f, err := m.opts.Host.Statfs(mp); err == nil {
					imagefs = f
				}
			}
		} else {
			logger.V(1).Info("Unable to measure imagefs, taking nodefs for it", "err", err)
		}
	}
	fsObservations(imagefs, SignalImageFsAvailable, SignalImageFsInodesFree, obs)
	return obs, now
}

// activePods are the pods of this node that run and are not evicted yet.
func (m *Manager) activePods(ctx context.Context) ([]*v1.Pod, error) {
	pods, err := m.opts.PodLister.ListPods(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	var out []*v1.Pod
	for _, p := range pods {
		if p.Spec.NodeName != m.opts.Config.NodeName || planner.PodFinished(p) || m.opts.Evictor.Evicted(p.UID) {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// hasEphemeralLimit reports whether a container of the pod limits its
// local ephemeral storage.
func hasEphemeralLimit(pod *v1.Pod) bool {
	limits := func(c v1.Container) bool {
		_, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]
		return ok
	}
	return slices.ContainsFunc(pod.Spec.InitContainers, limits) || slices.ContainsFunc(pod.Spec.Containers, limits)
}

// podUsage measures what the pods use: their disk-backed emptyDir volumes
// and, withStats, the stats summary.
func (m *Manager) podUsage(ctx context.Context, pods []*v1.Pod, withStats bool) []PodUsage {
	byUID := map[types.UID]*statsapi.PodStats{}
	if withStats && m.opts.Stats != nil {
		if s, err := m.opts.Stats.Summary(ctx, false); err == nil {
			for i := range s.Pods {
				byUID[types.UID(s.Pods[i].PodRef.UID)] = &s.Pods[i]
			}
		} else {
			m.opts.Log.V(1).Info("Unable to read the pods' stats", "err", err)
		}
	}
	out := make([]PodUsage, 0, len(pods))
	for _, p := range pods {
		out = append(out, usageFromStats(p, byUID[p.UID], m.volumeUsage(p, withStats)))
	}
	return out
}

// volumeUsage measures the pod's disk-backed emptyDir volumes: all of
// them, or only those with a sizeLimit. A walk that could not count every
// entry gives a volume past any limit, logged once for the pod's volume.
func (m *Manager) volumeUsage(pod *v1.Pod, all bool) map[string]VolumeUsage {
	if m.opts.Volumes == nil {
		return nil
	}
	out := map[string]VolumeUsage{}
	for _, vol := range pod.Spec.Volumes {
		if vol.EmptyDir == nil || vol.EmptyDir.Medium == v1.StorageMediumMemory || (!all && vol.EmptyDir.SizeLimit == nil) {
			continue
		}
		path := m.opts.Volumes.EmptyDirPath(pod.UID, vol.Name)
		u, err := m.opts.DiskUsage(path)
		switch {
		case errors.Is(err, volumestats.ErrIncomplete):
			if m.once.first(pod.UID, "incomplete/"+vol.Name) {
				m.opts.Log.Info("EmptyDir usage not fully counted, taking it as past any limit", "pod", klog.KObj(pod),
					"podUID", pod.UID, "volume", vol.Name, "path", path, "countedBytes", u.Bytes, "countedInodes", u.Inodes, "err", err)
			}
			out[vol.Name] = VolumeUsage{Usage: u, Incomplete: true}
		case err != nil:
			m.opts.Log.V(1).Info("Unable to measure an emptyDir volume", "pod", klog.KObj(pod), "volume", vol.Name, "err", err)
		default:
			out[vol.Name] = VolumeUsage{Usage: u}
		}
	}
	return out
}

// evictLocalStorage evicts every pod past a local storage limit; it
// reports whether it evicted any.
func (m *Manager) evictLocalStorage(ctx context.Context, usage []PodUsage, at time.Time) bool {
	evicted := false
	for _, pu := range usage {
		signal, msg := LocalStorageViolation(pu)
		if msg == "" {
			continue
		}
		if m.evict(ctx, pu.Pod, signal, msg, 1, at) {
			evicted = true
		}
	}
	return evicted
}

// reclaim frees node-level resources for a disk threshold and reports
// whether that resolved it.
func (m *Manager) reclaim(ctx context.Context, t Threshold) bool {
	r := m.opts.Reclaimer
	if r == nil {
		return false
	}
	logger := m.opts.Log
	if err := r.DeleteAllUnusedContainers(ctx); err != nil {
		logger.Error(err, "Unable to remove dead containers to reclaim disk")
	}
	freed, err := r.DeleteUnusedImages(ctx)
	if err != nil {
		logger.Error(err, "Unable to remove unused images to reclaim disk")
	}
	obs, _ := m.observe(ctx)
	if len(Met([]Threshold{t}, obs, true)) == 0 {
		logger.Info("Reclaimed node-level resources, no pod evicted", "signal", t.Signal, "imageBytesFreed", freed)
		return true
	}
	return false
}

// evictOne evicts the first pod in the signal's ranking that may be
// evicted (see evict).
func (m *Manager) evictOne(ctx context.Context, t Threshold, o Observation, usage []PodUsage, at time.Time) {
	for _, pu := range Rank(t.Signal, usage) {
		grace := GracePeriodSeconds(t, planner.GracePeriodSeconds(pu.Pod), m.cfg.MaxPodGracePeriod)
		if m.evict(ctx, pu.Pod, t.Signal, Message(t, o, pu), grace, at) {
			return
		}
	}
	m.opts.Log.Info("No pod to evict", "signal", t.Signal)
}

// evict hands the pod's eviction to its sync, records it, and waits a
// while for the pod to stop so that the next round measures without it.
// A critical pod (admission.CriticalPod) is never evicted, for a node
// signal or for its local storage limits, as the kubelet never evicts one:
// evict reports false, and says so in the log once for the pod.
func (m *Manager) evict(ctx context.Context, pod *v1.Pod, signal Signal, msg string, grace int64, at time.Time) bool {
	if admission.CriticalPod(pod) {
		if m.once.first(pod.UID, "critical/"+string(signal)) {
			m.opts.Log.Info("Not evicting a critical pod", "pod", klog.KObj(pod), "podUID", pod.UID, "signal", signal, "message", msg)
		}
		return false
	}
	if !m.opts.Evictor.Evict(pod, planner.Eviction{Message: msg, GracePeriodSeconds: grace}) {
		return false
	}
	m.opts.Log.Info("Evicting pod", "pod", klog.KObj(pod), "podUID", pod.UID, "signal", signal, "gracePeriodSeconds", grace, "message", msg)
	if m.opts.Recorder != nil {
		m.opts.Recorder.Event(pod, v1.EventTypeWarning, Reason, msg)
	}
	metrics.Evictions.WithLabelValues(string(signal)).Inc()
	metrics.EvictionStatsAge.WithLabelValues(string(signal)).Observe(m.opts.Clock.Since(at).Seconds())
	m.waitForCleanup(ctx, pod)
	return true
}

// waitForCleanup waits until the pod is terminal or gone, or
// podCleanupTimeout passed.
func (m *Manager) waitForCleanup(ctx context.Context, pod *v1.Pod) {
	deadline := m.opts.Clock.Now().Add(podCleanupTimeout)
	for m.opts.Clock.Now().Before(deadline) {
		var p v1.Pod
		err := m.opts.Pods.Get(ctx, client.ObjectKeyFromObject(pod), &p)
		if err != nil || p.UID != pod.UID || p.Status.Phase == v1.PodFailed || p.Status.Phase == v1.PodSucceeded {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-m.opts.Clock.After(podCleanupPoll):
		}
	}
	m.opts.Log.Info("Evicted pod not stopped in time, measuring again", "pod", klog.KObj(pod), "timeout", podCleanupTimeout)
}

func (m *Manager) nodeRef() *v1.ObjectReference {
	name := m.opts.Config.NodeName
	return &v1.ObjectReference{Kind: "Node", Name: name, UID: types.UID(name)}
}

// podOnce remembers, for each pod, the conditions logged already, so that
// one that lasts round after round is logged once. Only the rounds use it.
type podOnce struct {
	seen map[types.UID]map[string]bool
}

// first reports whether key is new for the pod, and remembers it.
func (o *podOnce) first(uid types.UID, key string) bool {
	if o.seen == nil {
		o.seen = map[types.UID]map[string]bool{}
	}
	keys := o.seen[uid]
	if keys == nil {
		keys = map[string]bool{}
		o.seen[uid] = keys
	}
	if keys[key] {
		return false
	}
	keys[key] = true
	return true
}

// retain forgets the pods not among pods.
func (o *podOnce) retain(pods []*v1.Pod) {
	if len(o.seen) == 0 {
		return
	}
	active := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		active[p.UID] = true
	}
	for uid := range o.seen {
		if !active[uid] {
			delete(o.seen, uid)
		}
	}
}

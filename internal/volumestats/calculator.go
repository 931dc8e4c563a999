package volumestats

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/podcache"
)

// Measure is what a CSI driver reports of one volume.
type Measure struct {
	FsInfo
	// Abnormal is the volume condition the driver reported; nil when it
	// reports none.
	Abnormal *bool
	// Message is the driver's word on the condition.
	Message string
}

// CSIMeasurer reads the numbers of a KindCSI volume from its driver
// (NodeGetVolumeStats). It returns an error for a driver that cannot
// report them; the volume is then left out, as the kubelet leaves it out.
type CSIMeasurer interface {
	VolumeStats(ctx context.Context, pod *v1.Pod, v PodVolume) (Measure, error)
}

// VolumeStats is the latest measure of one volume.
type VolumeStats struct {
	statsapi.VolumeStats
	// LocalEphemeral volumes count towards the pod's ephemeral storage
	// (see IsLocalEphemeral).
	LocalEphemeral bool
	// Abnormal is the volume condition its CSI driver last reported; nil
	// when the driver reports none.
	Abnormal *bool
}

// PodStats is the latest measure of a pod's volumes, in the order of its
// spec.
type PodStats struct {
	UID       types.UID
	Namespace string
	Name      string
	Volumes   []VolumeStats
}

// Calculator measures the volumes of the node's pods in the background and
// caches the results. It is a controller-runtime Runnable; its methods are
// safe for concurrent use.
type Calculator struct {
	// NodeName selects the pods (spec.nodeName) that are measured.
	NodeName string
	// Pods lists the pods, from the manager's node-scoped cache: the
	// cache's own objects, which the calculator only reads.
	Pods podcache.Lister
	// Volumes says where each volume is and how to measure it.
	Volumes VolumeSource
	// CSI measures KindCSI volumes; nil leaves them out.
	CSI CSIMeasurer
	// Period is volumeStatsAggPeriod: how often the pods are listed and
	// each pod's volumes measured. Zero or less disables the Calculator.
	Period time.Duration
	// Clock stamps the measures (default: the real clock).
	Clock clock.PassiveClock
	// Log is the logger of the loops (default: discard).
	Log logr.Logger

	mu   sync.Mutex
	pods map[types.UID]*podLoop
	// incomplete are the volumes, by pod, whose walk was logged as
	// incomplete already.
	incomplete map[types.UID]map[string]bool
	// sched is the scheduler of the measures, started by the first Sync;
	// measures counts the measures in flight.
	sched    *scheduler
	measures sync.WaitGroup
	// wakeAt is when the scheduler looks at the pods again by its timer;
	// zero when it waits for a poke only.
	wakeAt time.Time
}

// measureTick is the grid the measures are scheduled on: the pods that
// fall due within the same second are measured at one wake of the
// scheduler, not at one each.
const measureTick = time.Second

// scheduler is the one goroutine that starts each pod's measure when it is
// due: wake asks it to look at the pods again, done is closed when it has
// returned.
type scheduler struct {
	wake chan struct{}
	done chan struct{}
}

// podLoop is one pod's place in the schedule and its latest result. pod,
// next and measuring are guarded by Calculator.mu.
type podLoop struct {
	pod    *v1.Pod
	latest atomic.Pointer[PodStats]
	// next is when the pod is measured next; measuring says a measure is
	// in flight.
	next      time.Time
	measuring bool
}

// NeedLeaderElection is false: every node measures its own pods.
func (c *Calculator) NeedLeaderElection() bool { return false }

// Start lists the node's pods every Period, adding them to and dropping
// them from the schedule, until ctx ends; then it waits for the measures
// in flight and returns.
func (c *Calculator) Start(ctx context.Context) error {
	if c.Period <= 0 {
		c.Log.Info("Volume stats collection disabled")
		return nil
	}
	defer c.stopAll()
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		pods, err := c.Pods.ListPods(ctx)
		if err != nil {
			c.Log.V(1).Info("Unable to list pods for volume stats", "err", err)
			return
		}
		c.Sync(ctx, pods)
	}, c.Period)
	return nil
}

// Sync schedules a measure at once of each pod of the node in pods not
// measured yet, hands the others their pod's newest object, and forgets
// the pods not in pods. Measures run until ctx ends (that of the first
// Sync).
func (c *Calculator) Sync(ctx context.Context, pods []*v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pods == nil {
		c.pods = map[types.UID]*podLoop{}
	}
	seen := map[types.UID]bool{}
	now := time.Now()
	for _, pod := range pods {
		if pod.Spec.NodeName != c.NodeName {
			continue
		}
		seen[pod.UID] = true
		if l, ok := c.pods[pod.UID]; ok {
			l.pod = pod
			continue
		}
		c.pods[pod.UID] = &podLoop{pod: pod, next: now}
	}
	for uid := range c.pods {
		if !seen[uid] {
			delete(c.pods, uid)
			delete(c.incomplete, uid)
		}
	}
	if c.sched == nil {
		c.sched = &scheduler{wake: make(chan struct{}, 1), done: make(chan struct{})}
		go c.schedule(ctx, c.sched)
	}
	c.pokeLocked()
}

// pokeLocked wakes the scheduler; c.mu is held.
func (c *Calculator) pokeLocked() {
	if c.sched == nil {
		return
	}
	select {
	case c.sched.wake <- struct{}{}:
	default:
	}
}

// schedule starts the measures that are due, each on a goroutine of its
// own for as long as it measures (a walk of a large directory must not
// hold the others), and sleeps until the next is due, a Sync or a measure
// ends, or ctx ends.
func (c *Calculator) schedule(ctx context.Context, s *scheduler) {
	defer close(s.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		after := c.startDue(ctx)
		var fire <-chan time.Time
		if after > 0 {
			timer.Reset(after)
			fire = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-fire:
		}
	}
}

// startDue starts the measures that are due and returns how long until
// the next one is, zero when none is scheduled.
func (c *Calculator) startDue(ctx context.Context) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ctx.Err() != nil {
		return 0
	}
	now := time.Now()
	var after time.Duration
	defer func() {
		c.wakeAt = time.Time{}
		if after > 0 {
			c.wakeAt = now.Add(after)
		}
	}()
	for _, l := range c.pods {
		if l.measuring {
			continue
		}
		if d := l.next.Sub(now); d > 0 {
			if after == 0 || d < after {
				after = d
			}
			continue
		}
		l.measuring = true
		pod := l.pod
		c.measures.Add(1)
		go func() {
			defer c.measures.Done()
			s := c.MeasurePod(ctx, pod)
			l.latest.Store(&s)
			c.mu.Lock()
			defer c.mu.Unlock()
			l.measuring = false
			// Every period after the last measure ended, with a jitter
			// of up to one period, as the kubelet's calculators, on the
			// next whole second. The scheduler needs to know only when
			// that comes before it looks again anyway.
			at := time.Now().Add(wait.Jitter(c.Period, 1.0))
			if tick := at.Truncate(measureTick); tick.Before(at) {
				at = tick.Add(measureTick)
			}
			l.next = at
			if c.wakeAt.IsZero() || at.Before(c.wakeAt) {
				c.pokeLocked()
			}
		}()
	}
	return after
}

// stopAll waits for the scheduler and the measures in flight, whose
// context has ended, and forgets every pod.
func (c *Calculator) stopAll() {
	c.mu.Lock()
	s := c.sched
	c.mu.Unlock()
	if s != nil {
		<-s.done
	}
	c.measures.Wait()
	c.mu.Lock()
	c.pods = nil
	c.incomplete = nil
	c.sched = nil
	c.mu.Unlock()
}

// PodVolumeStats returns the latest measure of the pod's volumes, or false
// before its first one (or when the pod is not measured).
func (c *Calculator) PodVolumeStats(uid types.UID) (PodStats, bool) {
	c.mu.Lock()
	l, ok := c.pods[uid]
	c.mu.Unlock()
	if !ok {
		return PodStats{}, false
	}
	s := l.latest.Load()
	if s == nil {
		return PodStats{}, false
	}
	return *s, true
}

// ListPodVolumeStats returns the latest measure of every pod measured so
// far, ordered by namespace and name.
func (c *Calculator) ListPodVolumeStats() []PodStats {
	c.mu.Lock()
	out := make([]PodStats, 0, len(c.pods))
	for _, l := range c.pods {
		if s := l.latest.Load(); s != nil {
			out = append(out, *s)
		}
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// MeasurePod measures the pod's volumes once. Volumes that are not
// measured (KindNone, KindCSI without a CSIMeasurer), whose path does not
// exist yet, or whose measure failed are left out.
func (c *Calculator) MeasurePod(ctx context.Context, pod *v1.Pod) PodStats {
	out := PodStats{UID: pod.UID, Namespace: pod.Namespace, Name: pod.Name}
	specs := map[string]*v1.Volume{}
	for i := range pod.Spec.Volumes {
		specs[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	for _, pv := range c.Volumes.PodVolumes(pod) {
		m, err := c.measure(ctx, pod, pv)
		if err != nil {
			c.Log.V(4).Info("Unable to measure a volume", "pod", klog.KObj(pod), "podUID", pod.UID, "volume", pv.Name, "err", err)
			continue
		}
		if m == nil {
			continue
		}
		vs := VolumeStats{
			VolumeStats: statsapi.VolumeStats{
				Name: pv.Name,
				FsStats: statsapi.FsStats{
					Time:           metav1.NewTime(c.now()),
					CapacityBytes:  ptr.To(m.CapacityBytes),
					AvailableBytes: ptr.To(m.AvailableBytes),
					UsedBytes:      ptr.To(m.UsedBytes),
					Inodes:         ptr.To(m.Inodes),
					InodesFree:     ptr.To(m.InodesFree),
					InodesUsed:     ptr.To(m.InodesUsed),
				},
			},
			Abnormal: m.Abnormal,
		}
		if pv.PVC != nil {
			vs.PVCRef = &statsapi.PVCReference{Name: pv.PVC.Name, Namespace: pv.PVC.Namespace}
		}
		if spec := specs[pv.Name]; spec != nil {
			vs.LocalEphemeral = IsLocalEphemeral(spec)
		}
		out.Volumes = append(out.Volumes, vs)
	}
	return out
}

// measure measures one volume; nil, nil for one that is not measured.
func (c *Calculator) measure(ctx context.Context, pod *v1.Pod, pv PodVolume) (*Measure, error) {
	switch pv.Metrics {
	case KindDu, KindStatfs:
		if _, err := os.Lstat(pv.Path); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil
			}
			return nil, fmt.Errorf("checking %s: %w", pv.Path, err)
		}
		f, err := Statfs(pv.Path)
		if err != nil {
			return nil, err
		}
		if pv.Metrics == KindDu {
			u, err := DiskUsage(pv.Path)
			if err != nil && !errors.Is(err, ErrIncomplete) {
				return nil, fmt.Errorf("measuring %s: %w", pv.Path, err)
			}
			if err != nil {
				// What was counted is a lower bound, better shown than
				// nothing; limits are enforced by the eviction manager's
				// own walk, which takes an incomplete one as past them.
				c.logIncomplete(pod, pv, err)
			}
			f.UsedBytes, f.InodesUsed = uint64(max(u.Bytes, 0)), uint64(max(u.Inodes, 0))
		}
		return &Measure{FsInfo: f}, nil
	case KindCSI:
		if c.CSI == nil {
			return nil, nil
		}
		m, err := c.CSI.VolumeStats(ctx, pod, pv)
		if err != nil {
			return nil, err
		}
		return &m, nil
	default:
		return nil, nil
	}
}

// logIncomplete says, once for each volume of a pod, that its walk did
// not count every entry.
func (c *Calculator) logIncomplete(pod *v1.Pod, pv PodVolume, err error) {
	c.mu.Lock()
	first := !c.incomplete[pod.UID][pv.Name]
	// Only a pod in the schedule is remembered: Sync forgets it with it.
	if _, scheduled := c.pods[pod.UID]; first && scheduled {
		if c.incomplete == nil {
			c.incomplete = map[types.UID]map[string]bool{}
		}
		if c.incomplete[pod.UID] == nil {
			c.incomplete[pod.UID] = map[string]bool{}
		}
		c.incomplete[pod.UID][pv.Name] = true
	}
	c.mu.Unlock()
	if first {
		c.Log.Info("Volume usage not fully counted, reporting a lower bound", "pod", klog.KObj(pod), "podUID", pod.UID,
			"volume", pv.Name, "path", pv.Path, "err", err)
	}
}

func (c *Calculator) now() time.Time {
	if c.Clock == nil {
		return time.Now()
	}
	return c.Clock.Now()
}

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
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	// Pods lists the pods, from the manager's node-scoped cache.
	Pods client.Reader
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
}

// podLoop is one pod's measuring loop and its latest result.
type podLoop struct {
	pod    atomic.Pointer[v1.Pod]
	latest atomic.Pointer[PodStats]
	cancel context.CancelFunc
	done   chan struct{}
}

// NeedLeaderElection is false: every node measures its own pods.
func (c *Calculator) NeedLeaderElection() bool { return false }

// Start lists the node's pods every Period, starting and stopping their
// measuring loops, until ctx ends; then it stops every loop and returns.
func (c *Calculator) Start(ctx context.Context) error {
	if c.Period <= 0 {
		c.Log.Info("Volume stats collection disabled")
		return nil
	}
	defer c.stopAll()
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		list := &v1.PodList{}
		if err := c.Pods.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			c.Log.V(1).Info("Unable to list pods for volume stats", "err", err)
			return
		}
		c.Sync(ctx, list.Items)
	}, c.Period)
	return nil
}

// Sync starts a measuring loop for each pod of the node in pods that has
// none, hands the loops of the others their pod's newest object, and stops
// the loops of pods not in pods. Loops run until ctx ends or their pod is
// gone.
func (c *Calculator) Sync(ctx context.Context, pods []v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pods == nil {
		c.pods = map[types.UID]*podLoop{}
	}
	seen := map[types.UID]bool{}
	for i := range pods {
		pod := &pods[i]
		if pod.Spec.NodeName != c.NodeName {
			continue
		}
		seen[pod.UID] = true
		if l, ok := c.pods[pod.UID]; ok {
			l.pod.Store(pod)
			continue
		}
		c.pods[pod.UID] = c.startLoop(ctx, pod)
	}
	for uid, l := range c.pods {
		if !seen[uid] {
			l.cancel()
			delete(c.pods, uid)
		}
	}
}

func (c *Calculator) startLoop(ctx context.Context, pod *v1.Pod) *podLoop {
	ctx, cancel := context.WithCancel(ctx)
	l := &podLoop{cancel: cancel, done: make(chan struct{})}
	l.pod.Store(pod)
	go func() {
		defer close(l.done)
		wait.JitterUntilWithContext(ctx, func(ctx context.Context) {
			s := c.MeasurePod(ctx, l.pod.Load())
			l.latest.Store(&s)
		}, c.Period, 1.0, true)
	}()
	return l
}

// stopAll stops every loop and waits for them.
func (c *Calculator) stopAll() {
	c.mu.Lock()
	loops := c.pods
	c.pods = nil
	c.mu.Unlock()
	for _, l := range loops {
		l.cancel()
		<-l.done
	}
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
			if err != nil {
				return nil, fmt.Errorf("measuring %s: %w", pv.Path, err)
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

func (c *Calculator) now() time.Time {
	if c.Clock == nil {
		return time.Now()
	}
	return c.Clock.Now()
}

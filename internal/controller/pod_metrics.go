package controller

import (
	"context"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/metrics"
)

// podMetrics keeps what pod start times need between reconciles and
// records into internal/metrics.
type podMetrics struct {
	mu        sync.Mutex
	firstSeen map[types.UID]time.Time
	started   map[types.UID]bool
}

// newPodMetrics returns the pod reconciler's metric state and makes
// scrapes report this node's pods and containers (with several agents in
// one process, the last one set up).
func newPodMetrics(reader client.Reader, rt cri.Runtime) *podMetrics {
	lister := cri.BriefOf(rt)
	metrics.SetStateSource(func(ctx context.Context) metrics.State {
		return readState(ctx, reader, lister)
	})
	return &podMetrics{firstSeen: map[types.UID]time.Time{}, started: map[types.UID]bool{}}
}

// seen records when a pod was first seen.
func (m *podMetrics) seen(uid types.UID, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.firstSeen[uid]; !ok && !m.started[uid] {
		m.firstSeen[uid] = now
	}
}

// observeStart records the start duration the first time every container
// of the pod runs.
func (m *podMetrics) observeStart(pod *corev1.Pod, status corev1.PodStatus, now time.Time) {
	if status.Phase != corev1.PodRunning || len(status.ContainerStatuses) == 0 {
		return
	}
	for _, cs := range status.ContainerStatuses {
		if cs.State.Running == nil {
			return
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	first, ok := m.firstSeen[pod.UID]
	if !ok || m.started[pod.UID] {
		return
	}
	m.started[pod.UID] = true
	delete(m.firstSeen, pod.UID)
	metrics.PodStartDuration.Observe(now.Sub(first).Seconds())
}

// uids lists the pods something is kept of.
func (m *podMetrics) uids() []types.UID {
	m.mu.Lock()
	defer m.mu.Unlock()
	uids := make([]types.UID, 0, len(m.firstSeen)+len(m.started))
	for uid := range m.firstSeen {
		uids = append(uids, uid)
	}
	for uid := range m.started {
		uids = append(uids, uid)
	}
	return uids
}

// forget drops what is kept of a pod that is gone.
func (m *podMetrics) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.firstSeen, uid)
	delete(m.started, uid)
}

// readState counts the node's pods by phase (from the cache) and its
// owned sandboxes and containers (from the runtime's brief lists: a count
// needs only their states) for a scrape. A source that cannot be read
// leaves its metrics out of the scrape.
func readState(ctx context.Context, reader client.Reader, rt cri.BriefLister) metrics.State {
	var s metrics.State
	var pods corev1.PodList
	if err := reader.List(ctx, &pods, client.UnsafeDisableDeepCopy); err == nil {
		s.PodsByPhase = map[string]int{}
		for _, p := range []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed} {
			s.PodsByPhase[string(p)] = 0
		}
		for i := range pods.Items {
			s.PodsByPhase[string(pods.Items[i].Status.Phase)]++
		}
		s.PendingResizes, s.InProgressResizes = countResizes(pods.Items)
	}
	ready := runtimeapi.PodSandboxState_SANDBOX_READY
	if sandboxes, err := rt.ListPodSandboxes(ctx, &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: ready}}); err == nil {
		n := len(sandboxes)
		s.RunningPods = &n
	}
	if containers, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{}); err == nil {
		s.ContainersByState = map[string]int{"created": 0, "running": 0, "exited": 0, "unknown": 0}
		for _, ctr := range containers {
			switch ctr.State {
			case runtimeapi.ContainerState_CONTAINER_CREATED:
				s.ContainersByState["created"]++
			case runtimeapi.ContainerState_CONTAINER_RUNNING:
				s.ContainersByState["running"]++
			case runtimeapi.ContainerState_CONTAINER_EXITED:
				s.ContainersByState["exited"]++
			default:
				s.ContainersByState["unknown"]++
			}
		}
	}
	return s
}

// countResizes counts the pods with a pending resize, by reason and
// priority bucket, and those with a resize in progress, from their
// conditions.
func countResizes(pods []corev1.Pod) (map[metrics.PendingResize]int, *int) {
	pending := map[metrics.PendingResize]int{}
	inProgress := 0
	for i := range pods {
		for _, c := range pods[i].Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			switch c.Type {
			case corev1.PodResizePending:
				pending[metrics.PendingResize{Reason: strings.ToLower(c.Reason), PriorityBucket: metrics.PriorityBucket(pods[i].Spec.Priority)}]++
			case corev1.PodResizeInProgress:
				inProgress++
			}
		}
	}
	return pending, &inProgress
}

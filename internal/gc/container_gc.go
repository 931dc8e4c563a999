package gc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/metrics"
)

// LivePods tells which pods still exist: in the API server, or with a pod
// worker running. It is read after the runtime, so that a pod created
// meanwhile is never taken for gone.
type LivePods func(ctx context.Context) (map[types.UID]bool, error)

// Collector removes dead containers (with their log files) and sandboxes:
// the executor's CollectGarbage, the one place that removes them.
type Collector interface {
	CollectGarbage(ctx context.Context, g plan.Garbage) error
}

// ContainerGC removes dead containers and sandboxes of the node as the
// kubelet's container GC does (SelectContainers). It is a manager runnable:
// Start runs it every Period once Ready returns.
type ContainerGC struct {
	Runtime   cri.Runtime
	Live      LivePods
	Collector Collector
	Policy    ContainerPolicy
	Period    time.Duration
	// Ready blocks until the live pods can be read (the cache synced); it
	// returns false when ctx ended first.
	Ready func(ctx context.Context) bool
	Clock clock.Clock
	Log   logr.Logger

	// mu serialises runs: the periodic one and the eviction manager's.
	mu sync.Mutex
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (g *ContainerGC) NeedLeaderElection() bool { return false }

// Start collects every Period until ctx ends.
func (g *ContainerGC) Start(ctx context.Context) error {
	if g.Ready != nil && !g.Ready(ctx) {
		return nil
	}
	_ = wait.PollUntilContextCancel(ctx, g.Period, false, func(ctx context.Context) (bool, error) {
		if err := g.GarbageCollect(ctx); err != nil && ctx.Err() == nil {
			g.Log.Error(err, "Container garbage collection failed")
		}
		return false, nil
	})
	return nil
}

// GarbageCollect runs container GC once with the policy.
func (g *ContainerGC) GarbageCollect(ctx context.Context) error {
	return g.run(ctx, func(pods []PodObjects, now time.Time) map[types.UID]plan.Garbage {
		return SelectContainers(pods, g.Policy, now)
	})
}

// DeleteAllUnusedContainers removes every dead container and sandbox
// container GC may remove whatever the per-container and node limits: all
// but the newest dead instance of each container of a pod that still
// exists, and the newest sandbox of such a pod (SelectAllUnused). The
// eviction manager calls it first when the node is short of disk.
func (g *ContainerGC) DeleteAllUnusedContainers(ctx context.Context) error {
	return g.run(ctx, func(pods []PodObjects, now time.Time) map[types.UID]plan.Garbage {
		return SelectAllUnused(pods, g.Policy.MinAge, now)
	})
}

func (g *ContainerGC) run(ctx context.Context, sel func([]PodObjects, time.Time) map[types.UID]plan.Garbage) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	pods, err := g.read(ctx)
	if err != nil {
		return err
	}
	garbage := sel(pods, g.Clock.Now())
	var errs []error
	for _, uid := range slices.Sorted(maps.Keys(garbage)) {
		gb := garbage[uid]
		if err := g.logPaths(ctx, gb.Containers); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := g.Collector.CollectGarbage(ctx, gb); err != nil {
			errs = append(errs, fmt.Errorf("collecting garbage of pod %s: %w", uid, err))
			continue
		}
		metrics.ContainersGarbageCollected.Add(float64(len(gb.Containers)))
		metrics.SandboxesGarbageCollected.Add(float64(len(gb.Sandboxes)))
		g.Log.V(1).Info("Removed dead containers and sandboxes", "podUID", uid,
			"containers", len(gb.Containers), "sandboxes", len(gb.Sandboxes))
	}
	return errors.Join(errs...)
}

// logPaths fills in the log files of containers, which a list does not
// report; one already gone keeps none.
func (g *ContainerGC) logPaths(ctx context.Context, containers []state.Container) error {
	for i := range containers {
		st, err := g.Runtime.ContainerStatus(ctx, containers[i].ID)
		if cri.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading dead container %s: %w", containers[i].ID, err)
		}
		containers[i].LogPath = st.GetLogPath()
	}
	return nil
}

// read lists nodelet's sandboxes and containers by pod, then which pods
// are live.
func (g *ContainerGC) read(ctx context.Context) ([]PodObjects, error) {
	// The brief lists hold what GroupByPod reads, and hand out again the
	// objects of the relist before: no label or annotation of every
	// object decoded into new maps each period.
	lister := cri.BriefOf(g.Runtime)
	sandboxes, err := lister.ListPodSandboxes(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("listing sandboxes for garbage collection: %w", err)
	}
	containers, err := lister.ListContainers(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("listing containers for garbage collection: %w", err)
	}
	live, err := g.Live(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing live pods for garbage collection: %w", err)
	}
	return GroupByPod(sandboxes, containers, live), nil
}

// GroupByPod sorts listed sandboxes and containers into pods by their pod
// UID label (objects without one are left alone), sandboxes newest first,
// and marks the pods live holds.
func GroupByPod(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container, live map[types.UID]bool) []PodObjects {
	byUID := map[types.UID]*PodObjects{}
	pod := func(labels map[string]string) *PodObjects {
		uid := types.UID(labels[kubetypes.KubernetesPodUIDLabel])
		if uid == "" {
			return nil
		}
		p, ok := byUID[uid]
		if !ok {
			p = &PodObjects{UID: uid, Live: live[uid]}
			byUID[uid] = p
		}
		return p
	}
	for _, sb := range sandboxes {
		if p := pod(sb.GetLabels()); p != nil {
			p.Runtime.Sandboxes = append(p.Runtime.Sandboxes, state.Sandbox{
				ID:        sb.GetId(),
				Attempt:   sb.GetMetadata().GetAttempt(),
				Ready:     sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY,
				CreatedAt: time.Unix(0, sb.GetCreatedAt()),
			})
		}
	}
	for _, c := range containers {
		if p := pod(c.GetLabels()); p != nil {
			name := c.GetMetadata().GetName()
			if name == "" {
				name = c.GetLabels()[kubetypes.KubernetesContainerNameLabel]
			}
			p.Runtime.Containers = append(p.Runtime.Containers, state.Container{
				ID:        c.GetId(),
				Name:      name,
				Attempt:   c.GetMetadata().GetAttempt(),
				State:     containerState(c.GetState()),
				CreatedAt: time.Unix(0, c.GetCreatedAt()),
				SandboxID: c.GetPodSandboxId(),
			})
		}
	}
	out := make([]PodObjects, 0, len(byUID))
	for _, p := range byUID {
		slices.SortStableFunc(p.Runtime.Sandboxes, func(a, b state.Sandbox) int {
			return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.Attempt, a.Attempt), cmp.Compare(a.ID, b.ID))
		})
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b PodObjects) int { return cmp.Compare(a.UID, b.UID) })
	return out
}

func containerState(s runtimeapi.ContainerState) state.ContainerState {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return state.ContainerCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return state.ContainerRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return state.ContainerExited
	}
	return state.ContainerUnknown
}

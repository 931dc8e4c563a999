package executor

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/metrics"
)

// Resize updates the cgroups of the plan's running containers
// (plan.PodActions.ContainersToResize) to their allocated resources in
// place (CRI UpdateContainerResources), in the plan's order, and records
// what each runs with in st. pod is the allocated pod. Like the kubelet, it
// lowers no memory limit below what a container uses: such a plan fails
// before any update. The first failure stops the updates and is returned;
// its message is what the pod's PodResizeInProgress condition shows.
//
// With Cgroups, the pod's cgroup is brought to the pod's resources around
// the updates (grown before them, shrunk after), also when no container
// changes (pod-level resources), and adopted the first time a running pod
// is seen.
func (e *Executor) Resize(ctx context.Context, pod *v1.Pod, resizes []plan.ContainerResize, st *state.PodState, save SaveFunc) error {
	if e.Cgroups == nil {
		return e.resizeContainers(ctx, pod, resizes, st, save)
	}
	return e.Cgroups.ResizePod(pod, func() error { return e.resizeContainers(ctx, pod, resizes, st, save) })
}

func (e *Executor) resizeContainers(ctx context.Context, pod *v1.Pod, resizes []plan.ContainerResize, st *state.PodState, save SaveFunc) (err error) {
	if len(resizes) == 0 {
		return nil
	}
	start := e.now()
	defer func() {
		metrics.PodResizeDuration.WithLabelValues(strconv.FormatBool(err == nil)).Observe(float64(e.now().Sub(start).Milliseconds()))
	}()
	if err := e.checkMemoryUsage(ctx, pod, resizes); err != nil {
		return err
	}
	node, err := e.Node(ctx)
	if err != nil {
		return fmt.Errorf("reading the node for resources: %w", err)
	}
	var updated bool
	for _, r := range resizes {
		c := r.Spec(pod)
		// As the container was created: an update without memory.oom.group
		// or the swap and MemoryQoS settings would leave the runtime's
		// recorded resources without them.
		resources := criconfig.ContainerResources(pod, c, node.Allocatable, e.Resources)
		if err = e.Runtime.UpdateContainerResources(ctx, r.ID, resources); err != nil {
			break
		}
		st.RecordActuated(r.Name, r.ID, c.Resources)
		updated = true
		log.FromContext(ctx).V(1).Info("Resized container", "container", r.Name, "id", r.ID)
	}
	if updated {
		if serr := save(); serr != nil {
			return errors.Join(err, serr)
		}
	}
	return err
}

// checkMemoryUsage fails when a memory limit the plan lowers (or sets)
// would be below what its container uses now, with the kubelet's message.
func (e *Executor) checkMemoryUsage(ctx context.Context, pod *v1.Pod, resizes []plan.ContainerResize) error {
	var errs []error
	for _, r := range resizes {
		if !r.MemoryLimitDecrease {
			continue
		}
		limit := r.Spec(pod).Resources.Limits.Memory().Value()
		usage, err := e.memoryUsage(ctx, r.ID)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("unable to read memory usage of container %q: %w", r.Name, err))
		case usage >= uint64(limit):
			errs = append(errs, fmt.Errorf("attempting to set container %q memory limit (%d) below current usage (%d)", r.Name, limit, usage))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("cannot decrease memory limits: %w", errors.Join(errs...))
	}
	return nil
}

// memoryUsage reads a container's memory usage from the runtime's stats.
func (e *Executor) memoryUsage(ctx context.Context, id string) (uint64, error) {
	stats, err := e.Runtime.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{Id: id})
	if err != nil {
		return 0, err
	}
	for _, s := range stats {
		if s.GetAttributes().GetId() == id && s.GetMemory().GetUsageBytes() != nil {
			return s.GetMemory().GetUsageBytes().GetValue(), nil
		}
	}
	return 0, errors.New("the runtime reports no memory usage")
}

package executor

import (
	"context"
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

// Observed is what the runtime holds for one pod name: the instance with
// the pod's current UID, and any left by earlier pods of the same name.
type Observed struct {
	Runtime state.PodRuntime
	// Stale are sandboxes and containers of other UIDs, to be killed.
	StaleSandboxes  []*runtimeapi.PodSandbox
	StaleContainers []*runtimeapi.Container
}

// Observe lists the sandboxes and containers nodelet owns for the pod's
// namespace/name and reads the status of those that belong to the pod's
// UID; the others are stale. Containers are listed only when a sandbox is.
// The first Observe of each name in a process's first minute takes what
// one list of the whole node saw instead (see firstLook).
func (e *Executor) Observe(ctx context.Context, pod *v1.Pod) (*Observed, error) {
	namespace, name, uid := pod.Namespace, pod.Name, pod.UID
	sel := map[string]string{
		kubetypes.KubernetesPodNamespaceLabel: namespace,
		kubetypes.KubernetesPodNameLabel:      name,
	}
	var sandboxes []*runtimeapi.PodSandbox
	var containers []*runtimeapi.Container
	if seen, ok := e.firstLook.take(ctx, e.Runtime, e.now(), types.NamespacedName{Namespace: namespace, Name: name}); ok {
		sandboxes = seen.sandboxes
		if len(sandboxes) > 0 {
			containers = seen.containers
		}
	} else {
		var err error
		if sandboxes, err = e.Runtime.ListPodSandboxes(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel}); err != nil {
			return nil, fmt.Errorf("listing sandboxes of %s/%s: %w", namespace, name, err)
		}
		// A container lives in a sandbox, and a sandbox's removal removes
		// its containers: without a sandbox of the name there is none (a
		// pod's first sync).
		if len(sandboxes) > 0 {
			if containers, err = e.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel}); err != nil {
				return nil, fmt.Errorf("listing containers of %s/%s: %w", namespace, name, err)
			}
		}
	}
	obs := &Observed{}
	var sandboxIDs, containerIDs []string
	for _, sb := range sandboxes {
		if types.UID(sb.GetLabels()[kubetypes.KubernetesPodUIDLabel]) != uid {
			obs.StaleSandboxes = append(obs.StaleSandboxes, sb)
			continue
		}
		sandboxIDs = append(sandboxIDs, sb.GetId())
	}
	for _, c := range containers {
		if types.UID(c.GetLabels()[kubetypes.KubernetesPodUIDLabel]) != uid {
			obs.StaleContainers = append(obs.StaleContainers, c)
			continue
		}
		containerIDs = append(containerIDs, c.GetId())
	}
	sbStatuses, cStatuses, err := e.statuses(ctx, sandboxIDs, containerIDs)
	if err != nil {
		return nil, err
	}
	obs.Runtime = state.FromCRI(sbStatuses, cStatuses)
	e.fillTerminationMessages(pod, &obs.Runtime)
	return obs, nil
}

// Reobserve reads again the status of the pod's objects after a step of its
// sync that created or stopped some: the objects prev observed and those st
// records (the newest sandbox, each container's newest instance). It lists
// nothing. Only the pod's worker creates objects of its UID, so these are
// all of them, and an object removed meanwhile is left out. With objects of
// other UIDs in prev it observes afresh, as Observe.
func (e *Executor) Reobserve(ctx context.Context, pod *v1.Pod, prev *Observed, st *state.PodState) (*Observed, error) {
	if prev == nil || len(prev.StaleSandboxes) > 0 || len(prev.StaleContainers) > 0 {
		return e.Observe(ctx, pod)
	}
	sandboxIDs := make([]string, 0, len(prev.Runtime.Sandboxes)+1)
	for _, sb := range prev.Runtime.Sandboxes {
		sandboxIDs = append(sandboxIDs, sb.ID)
	}
	containerIDs := make([]string, 0, len(prev.Runtime.Containers)+len(st.Containers))
	for _, c := range prev.Runtime.Containers {
		containerIDs = append(containerIDs, c.ID)
	}
	if st.SandboxID != "" && !slices.Contains(sandboxIDs, st.SandboxID) {
		sandboxIDs = append(sandboxIDs, st.SandboxID)
	}
	for _, name := range slices.Sorted(maps.Keys(st.Containers)) {
		if a := st.Containers[name].Actuated; a != nil && a.ContainerID != "" && !slices.Contains(containerIDs, a.ContainerID) {
			containerIDs = append(containerIDs, a.ContainerID)
		}
	}
	sbStatuses, cStatuses, err := e.statuses(ctx, sandboxIDs, containerIDs)
	if err != nil {
		return nil, err
	}
	obs := &Observed{Runtime: state.FromCRI(sbStatuses, cStatuses)}
	e.fillTerminationMessages(pod, &obs.Runtime)
	return obs, nil
}

// statuses reads the status of each sandbox and container by ID, leaving
// out those the runtime no longer has.
func (e *Executor) statuses(ctx context.Context, sandboxIDs, containerIDs []string) ([]*runtimeapi.PodSandboxStatus, []*runtimeapi.ContainerStatus, error) {
	sandboxes := make([]*runtimeapi.PodSandboxStatus, 0, len(sandboxIDs))
	for _, id := range sandboxIDs {
		st, err := e.Runtime.PodSandboxStatus(ctx, id)
		if cri.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading status of sandbox %s: %w", id, err)
		}
		sandboxes = append(sandboxes, st)
	}
	containers := make([]*runtimeapi.ContainerStatus, 0, len(containerIDs))
	for _, id := range containerIDs {
		st, err := e.Runtime.ContainerStatus(ctx, id)
		if cri.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading status of container %s: %w", id, err)
		}
		containers = append(containers, st)
	}
	return sandboxes, containers, nil
}

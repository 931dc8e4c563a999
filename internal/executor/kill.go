package executor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/nomount"
)

// Terminate carries out one step of stopping every container and sandbox
// of a pod (tp, from the planner's PlanTermination), the one way nodelet
// kills a whole pod: each container of tp.Stop is stopped, after its
// preStop hook when tp.PreStop lists one, with what is left of the grace
// period (st.Terminating, which must hold the termination:
// PodState.BeginTermination); then tp.StopSandboxes. The containers stop
// in parallel, so that one hook does not eat another's grace period. rt is
// the pod's observed runtime (the IP an HTTP hook is sent to). Hooks that
// ran are recorded in st and saved. The containers of tp.Remove (created,
// never started) are removed first. A container or sandbox already gone
// is no error.
func (e *Executor) Terminate(ctx context.Context, pod *v1.Pod, rt state.PodRuntime, tp plan.TerminationPlan, st *state.PodState, save SaveFunc) error {
	hooks := map[string]plan.PreStopHook{}
	for _, h := range tp.PreStop {
		hooks[h.ContainerID] = h
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	stopOne := func(stop plan.ContainerStop) {
		if h, ok := hooks[stop.ContainerID]; ok {
			e.runPreStop(ctx, pod, rt, h.ContainerID, h.Name, h.Handler, h.Timeout)
			mu.Lock()
			st.RecordPreStopDone(h.ContainerID, e.now())
			mu.Unlock()
		}
		mu.Lock()
		timeout := st.Terminating.StopTimeout(e.now())
		mu.Unlock()
		if _, hadHook := hooks[stop.ContainerID]; !hadHook {
			timeout = stop.Timeout
		}
		e.Recorder.Eventf(pod, v1.EventTypeNormal, EventKilling, "Stopping container %s", stop.Name)
		if err := e.Runtime.StopContainer(ctx, stop.ContainerID, timeout); err != nil && !cri.IsNotFound(err) {
			mu.Lock()
			errs = append(errs, fmt.Errorf("stopping container %s: %w", stop.Name, err))
			mu.Unlock()
		}
	}
	for _, id := range tp.Remove {
		if err := e.Runtime.RemoveContainer(ctx, id); err != nil && !cri.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing container %s, created but never started: %w", id, err))
		}
	}
	// A pod of one container (most pods, and every pod of a burst's
	// teardown) stops it on the worker's goroutine: a goroutine per stop
	// would be another stack per pod for as long as its grace period.
	if len(tp.Stop) == 1 {
		stopOne(tp.Stop[0])
	} else {
		for _, stop := range tp.Stop {
			wg.Add(1)
			go func() {
				defer wg.Done()
				stopOne(stop)
			}()
		}
		wg.Wait()
	}
	if len(hooks) > 0 {
		// Ran hooks are recorded so that a restart does not run them again.
		if err := save(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, id := range tp.StopSandboxes {
		if err := e.stopSandbox(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// stopSandbox stops a sandbox and records that this process stopped it. A
// sandbox already gone is no error.
func (e *Executor) stopSandbox(ctx context.Context, id string) error {
	err := e.Runtime.StopPodSandbox(ctx, id)
	switch {
	case err == nil:
		e.stopped.Store(id, struct{}{})
	case !cri.IsNotFound(err):
		return fmt.Errorf("stopping sandbox %s: %w", id, err)
	}
	return nil
}

// removeSandbox removes a sandbox, stopping it first unless this process
// stopped it already and the runtime shows it not ready. The CRI asks for
// a stop before a removal, and a runtime's stop of a stopped sandbox is
// not free: containerd tears the pod's network down again, running the
// CNI plugins once more. A sandbox already gone is no error.
func (e *Executor) removeSandbox(ctx context.Context, sb state.Sandbox) error {
	if _, stopped := e.stopped.Load(sb.ID); !stopped || sb.Ready {
		if err := e.stopSandbox(ctx, sb.ID); err != nil {
			return err
		}
	}
	if err := e.Runtime.RemovePodSandbox(ctx, sb.ID); err != nil && !cri.IsNotFound(err) {
		return fmt.Errorf("removing sandbox %s: %w", sb.ID, err)
	}
	e.stopped.Delete(sb.ID)
	return nil
}

// killContainer runs the container's preStop hook, if any, then stops it
// with what is left of grace seconds.
func (e *Executor) killContainer(ctx context.Context, pod *v1.Pod, id, name, message string, hook *v1.LifecycleHandler, grace int64) error {
	start := e.now()
	if hook != nil {
		e.runPreStop(ctx, pod, state.PodRuntime{}, id, name, hook, grace)
	}
	left := grace - int64(e.now().Sub(start).Seconds())
	if left < state.MinimumGracePeriodSeconds {
		left = state.MinimumGracePeriodSeconds
	}
	// The plan's message is the kubelet's whole sentence ("Container c
	// failed liveness probe, will be restarted").
	msg := message
	if msg == "" {
		msg = "Stopping container " + name
	}
	e.Recorder.Event(pod, v1.EventTypeNormal, EventKilling, msg)
	if err := e.Runtime.StopContainer(ctx, id, left); err != nil && !cri.IsNotFound(err) {
		return fmt.Errorf("stopping container %s: %w", name, err)
	}
	return nil
}

// RemovePod removes every sandbox (and so every container) of a pod whose
// containers have all stopped, its volumes, its log directory and its cgroup.
func (e *Executor) RemovePod(ctx context.Context, pod *v1.Pod, rt state.PodRuntime) error {
	e.Gate.Forget(pod.UID)
	var errs []error
	for _, c := range rt.Containers {
		if err := e.Runtime.RemoveContainer(ctx, c.ID); err != nil && !cri.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing container %s: %w", c.Name, err))
			continue
		}
		e.forgetLog(ctx, c.ID, "")
	}
	for _, sb := range rt.Sandboxes {
		if err := e.removeSandbox(ctx, sb); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := e.Volumes.TearDown(ctx, pod.UID); err != nil {
		return fmt.Errorf("tearing down volumes: %w", err)
	}
	if err := nomount.RemoveAll(criconfig.PodLogDirectory(e.Sandbox.PodLogsDir, pod)); err != nil {
		return fmt.Errorf("removing pod log directory: %w", err)
	}
	if e.Cgroups != nil {
		// The sandboxes are gone: what is left in the cgroup is killed.
		if err := e.Cgroups.RemovePod(ctx, pod.UID); err != nil {
			return err
		}
	}
	if e.UserNamespaces != nil {
		// Nothing of the pod runs any more: its IDs may go to another.
		if err := e.UserNamespaces.Release(pod.UID); err != nil {
			return err
		}
	}
	return nil
}

// CollectGarbage removes what g (the planner's SelectGarbage) lists: dead
// containers, with their log files, and dead sandboxes. One already gone
// is no error.
func (e *Executor) CollectGarbage(ctx context.Context, g plan.Garbage) error {
	var errs []error
	for _, c := range g.Containers {
		if err := e.Runtime.RemoveContainer(ctx, c.ID); err != nil && !cri.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing dead container %s: %w", c.ID, err))
			continue
		}
		e.forgetLog(ctx, c.ID, c.LogPath)
		if c.LogPath == "" {
			continue
		}
		if err := os.Remove(c.LogPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing log of dead container %s: %w", c.ID, err))
		}
	}
	for _, id := range g.Sandboxes {
		if err := e.Runtime.RemovePodSandbox(ctx, id); err != nil && !cri.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing dead sandbox %s: %w", id, err))
			continue
		}
		e.stopped.Delete(id)
	}
	return errors.Join(errs...)
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

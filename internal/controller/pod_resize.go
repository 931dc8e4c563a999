package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
	"github.com/nodelet/nodelet/internal/kuberuntime/planner"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/metrics"
)

// deferredResizeRetryPeriod is how soon a pod whose resize was deferred is
// looked at again when no pod left or shrank meanwhile, the kubelet's
// first retry delay.
const deferredResizeRetryPeriod = 30 * time.Second

// allocate decides on the resize the pod's spec asks for, before the plan,
// as the kubelet's allocation manager does: the resources of a pod seen
// for the first time are allocated as they are; a spec that asks for
// others is accepted when they fit next to the other pods (the node's
// allocatable minus their allocated requests), else left pending. It
// returns the pod as it must run: with its allocated resources.
func (r *PodReconciler) allocate(ctx context.Context, s *podScope) (*corev1.Pod, error) {
	pod := s.pod
	if s.state.InitAllocation(pod) && len(s.obs.Runtime.Sandboxes) > 0 {
		// Running already (admitted by a nodelet that kept no allocation):
		// write it down now. A new pod's is saved with its sandbox.
		if err := r.saver(s)(); err != nil {
			return nil, err
		}
	}
	switch {
	case podIsStopping(pod) || !state.ResizeRequested(pod, s.state):
		r.deferred.Delete(pod.UID)
		if s.state.ClearPendingResize(pod.Generation) {
			if err := r.saver(s)(); err != nil {
				return nil, err
			}
		}
	default:
		if err := r.decideResize(ctx, s); err != nil {
			return nil, err
		}
	}
	return state.AllocatedPod(pod, s.state), nil
}

func podIsStopping(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp != nil || isTerminal(pod)
}

// decideResize accepts the resize the pod's spec asks for or leaves it
// pending (Deferred, or Infeasible when the node can never hold it), with
// the kubelet's Events.
func (r *PodReconciler) decideResize(ctx context.Context, s *podScope) error {
	pod := s.pod
	logger := log.FromContext(ctx)
	before := state.AllocatedPod(pod, s.state)
	if p := s.state.ResizePending; p == nil || p.Generation != pod.Generation {
		countRequestedResizes(before, pod)
	}
	res, err := r.Admit.Resize(ctx, pod)
	if err != nil {
		return err
	}
	if res.Admit {
		s.state.AcceptResize(pod, r.now())
		if err := r.saver(s)(); err != nil {
			return err
		}
		r.deferred.Delete(pod.UID)
		logger.Info("Accepted pod resize", "generation", pod.Generation)
		r.Recorder.Event(pod, corev1.EventTypeNormal, planner.EventResizeStarted,
			planner.ResizeMessage("Pod resize started", pod, pod.Generation, ""))
		if requestsShrank(before, pod) {
			r.retryDeferredResizes()
		}
		return nil
	}
	if res.Reason == corev1.PodReasonDeferred {
		r.deferred.Store(pod.UID, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
	} else {
		r.deferred.Delete(pod.UID)
	}
	if !s.state.DeferResize(res.Reason, res.Message, pod.Generation, r.now()) {
		return nil
	}
	if err := r.saver(s)(); err != nil {
		return err
	}
	logger.Info("Pod resize is pending", "reason", res.Reason, "message", res.Message, "generation", pod.Generation)
	reason := planner.EventResizeDeferred
	if res.Reason == corev1.PodReasonInfeasible {
		reason = planner.EventResizeInfeasible
		metrics.PodInfeasibleResizes.WithLabelValues("insufficient_node_allocatable").Inc()
	}
	r.Recorder.Event(pod, corev1.EventTypeWarning, reason,
		planner.ResizeMessage("Pod resize "+res.Reason, pod, pod.Generation, res.Message))
	return nil
}

// resize updates the plan's running containers to their allocated
// resources in place (pod is the allocated pod). A failure is shown in the
// pod's PodResizeInProgress condition, with a ResizeError Event when it is
// new, and tried again at the next sync.
func (r *PodReconciler) resize(ctx context.Context, s *podScope, pod *corev1.Pod, actions plan.PodActions) {
	err := r.Exec.Resize(ctx, pod, actions.ContainersToResize, &s.state, r.saver(s))
	if err == nil || ctx.Err() != nil {
		return
	}
	if !s.state.RecordResizeError(err.Error(), pod.Generation, r.now()) {
		return
	}
	log.FromContext(ctx).Info("Unable to resize containers", "err", err.Error())
	r.Recorder.Event(pod, corev1.EventTypeWarning, planner.EventResizeError,
		planner.ResizeMessage("Pod resize error", pod, s.state.ResizeInProgress.Generation, err.Error()))
	if serr := r.saver(s)(); serr != nil {
		log.FromContext(ctx).Error(serr, "Unable to save pod state")
	}
}

// finishResize ends the pod's resize once every running container runs
// with its allocated resources (pod is the allocated pod, s.obs what runs
// now), with a ResizeCompleted Event; it starts one when a container does
// not.
func (r *PodReconciler) finishResize(ctx context.Context, s *podScope, pod *corev1.Pod) error {
	before := s.state.ResizeInProgress
	generation, done := s.state.FinishResize(pod.Generation, podIsStopping(pod), planner.ResizeInProgress(pod, s.obs.Runtime, s.state), r.now())
	if done {
		log.FromContext(ctx).Info("Completed pod resize", "generation", generation)
		r.Recorder.Event(pod, corev1.EventTypeNormal, planner.EventResizeCompleted,
			planner.ResizeMessage("Pod resize completed", pod, generation, ""))
	}
	if (before == nil) != (s.state.ResizeInProgress == nil) {
		return r.saver(s)()
	}
	return nil
}

// resizeRequeue is how soon a pod with a resize under way is synced again:
// soon after a failed update, a little later for a deferred one.
func resizeRequeue(st state.PodState, requeue time.Duration) time.Duration {
	if st.ResizeInProgress != nil {
		requeue = min(requeue, state.StartRetryPeriod)
	}
	if p := st.ResizePending; p != nil && p.Reason == corev1.PodReasonDeferred {
		requeue = min(requeue, deferredResizeRetryPeriod)
	}
	return requeue
}

// retryDeferredResizes syncs the pods whose resize was deferred, after a
// pod left the node or shrank.
func (r *PodReconciler) retryDeferredResizes() {
	if r.Feed == nil {
		return
	}
	r.deferred.Range(func(_, key any) bool {
		r.Feed.Enqueue(key.(types.NamespacedName))
		return true
	})
}

// requestsShrank reports whether a pod's cpu or memory requests go down
// from before to after.
func requestsShrank(before, after *corev1.Pod) bool {
	b, a := admission.PodRequests(before), admission.PodRequests(after)
	return a.Cpu().Cmp(*b.Cpu()) < 0 || a.Memory().Cmp(*b.Memory()) < 0
}

// countRequestedResizes counts, per container and resource, the changes a
// resize asks for (kubelet_container_requested_resizes_total).
func countRequestedResizes(allocated, desired *corev1.Pod) {
	for i := range desired.Spec.Containers {
		if i >= len(allocated.Spec.Containers) {
			break
		}
		was, want := allocated.Spec.Containers[i].Resources, desired.Spec.Containers[i].Resources
		for _, rc := range []struct {
			resource, requirement string
			want, was             *resource.Quantity
		}{
			{"memory", "requests", want.Requests.Memory(), was.Requests.Memory()},
			{"memory", "limits", want.Limits.Memory(), was.Limits.Memory()},
			{"cpu", "requests", want.Requests.Cpu(), was.Requests.Cpu()},
			{"cpu", "limits", want.Limits.Cpu(), was.Limits.Cpu()},
		} {
			if op := resizeOperation(rc.want, rc.was); op != "" {
				metrics.ContainerRequestedResizes.WithLabelValues(rc.resource, rc.requirement, op).Inc()
			}
		}
	}
}

func resizeOperation(want, was *resource.Quantity) string {
	switch {
	case want.IsZero() && !was.IsZero():
		return "remove"
	case was.IsZero() && !want.IsZero():
		return "add"
	case want.Cmp(*was) < 0:
		return "decrease"
	case want.Cmp(*was) > 0:
		return "increase"
	}
	return ""
}

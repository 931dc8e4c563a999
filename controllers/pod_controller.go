package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	kubetypes "k8s.io/kubelet/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/checkpoint"
	"github.com/nodelet/nodelet/internal/executor"
	"github.com/nodelet/nodelet/internal/kuberuntime"
	"github.com/nodelet/nodelet/internal/metrics"
	"github.com/nodelet/nodelet/internal/nodeinfo"
	"github.com/nodelet/nodelet/internal/prober"
)

// PodReconciler runs the pods bound to this node: it admits each pod once,
// plans what the runtime must do (internal/kuberuntime), has the executor do
// it, checkpoints the pod's state after every runtime change and writes the
// pod's status with one patch when it changed. Deleted pods are stopped
// gracefully and then removed from the API.
type PodReconciler struct {
	client.Client
	Exec     *executor.Executor
	Store    checkpoint.Manager
	Recorder record.EventRecorder
	Config   *v1alpha1.NodeletConfiguration
	Clock    clock.Clock
	Admit    *Admitter
	Nodes    nodeinfo.FactsReader
	Metrics  *podMetrics
	Prober   *prober.Manager

	// written holds, by pod UID, the resourceVersion of nodelet's own last
	// status write, so the watch event it causes does not sync the pod again.
	written sync.Map
}

// ownStatusWrite reports whether an update event is the echo of nodelet's
// own status patch.
func (r *PodReconciler) ownStatusWrite(pod client.Object) bool {
	rv, ok := r.written.Load(pod.GetUID())
	return ok && rv == pod.GetResourceVersion()
}

// podScope is what one reconcile of one pod works on.
type podScope struct {
	pod   *corev1.Pod
	obs   *executor.Observed
	state kuberuntime.PodState
	// fresh: no checkpoint was found for the pod.
	fresh bool
}

// Reconcile syncs one pod. See PodReconciler.
func (r *PodReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod := &corev1.Pod{}
	if err := r.Get(ctx, req.NamespacedName, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.cleanupGone(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, fmt.Errorf("reading pod: %w", err)
	}
	if pod.Spec.NodeName != r.Config.NodeName {
		return ctrl.Result{}, nil
	}
	r.Metrics.seen(pod.UID, r.now())
	s, err := r.newScope(ctx, pod)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Exec.KillStale(ctx, s.obs.StaleSandboxes, s.obs.StaleContainers); err != nil {
		return ctrl.Result{}, err
	}
	if pod.DeletionTimestamp != nil {
		return r.terminate(ctx, s)
	}
	if isTerminal(pod) && s.fresh && len(s.obs.Runtime.Sandboxes) == 0 && len(s.obs.Runtime.Containers) == 0 {
		// Finished, or rejected, without anything of it in the runtime:
		// its status is final.
		return ctrl.Result{}, nil
	}
	if !isTerminal(pod) && !r.Admit.Admitted(pod.UID) {
		if ok, err := r.admit(ctx, s); err != nil || !ok {
			return ctrl.Result{}, err
		}
	}
	return r.sync(ctx, s)
}

func isTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

func checkpointKey(uid types.UID) string { return "pod-" + string(uid) }

// newScope loads the pod's checkpoint and observes its runtime objects. A
// corrupt checkpoint has been set aside by the store; the pod's state is
// then rebuilt from what the runtime's labels say.
func (r *PodReconciler) newScope(ctx context.Context, pod *corev1.Pod) (*podScope, error) {
	s := &podScope{pod: pod}
	data := checkpoint.NewData(kuberuntime.NewPodState(pod.UID))
	err := r.Store.GetCheckpoint(checkpointKey(pod.UID), data)
	switch {
	case err == nil:
		s.state = data.Value
	case errors.Is(err, checkpoint.ErrCheckpointNotFound):
		s.state, s.fresh = kuberuntime.NewPodState(pod.UID), true
	default:
		log.FromContext(ctx).Error(err, "Unable to read pod checkpoint, rebuilding the state from the runtime")
		s.state, s.fresh = kuberuntime.NewPodState(pod.UID), true
	}
	if s.state.Containers == nil {
		s.state.Containers = map[string]kuberuntime.ContainerRecord{}
	}
	obs, err := r.Exec.Observe(ctx, pod)
	if err != nil {
		return nil, err
	}
	s.obs = obs
	if s.fresh && len(obs.Runtime.Sandboxes) > 0 {
		// Adopted from the runtime (no or a corrupt checkpoint): write down
		// what its labels say so the next restart starts from it.
		sb := obs.Runtime.Sandboxes[0]
		s.state.RecordSandbox(sb.ID, sb.Attempt)
		if err := r.saver(s)(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (r *PodReconciler) saver(s *podScope) executor.SaveFunc {
	return func() error {
		if err := r.Store.CreateCheckpoint(checkpointKey(s.pod.UID), checkpoint.NewData(s.state)); err != nil {
			return fmt.Errorf("checkpointing pod state: %w", err)
		}
		return nil
	}
}

func (r *PodReconciler) now() time.Time { return r.Clock.Now() }

// admit runs admission for a pod seen for the first time. A pod that
// already has runtime objects or a checkpoint was admitted before a restart.
func (r *PodReconciler) admit(ctx context.Context, s *podScope) (bool, error) {
	if !s.fresh || len(s.obs.Runtime.Sandboxes) > 0 {
		r.Admit.Add(s.pod)
		return true, nil
	}
	res, err := r.Admit.Admit(ctx, s.pod)
	if err != nil {
		return false, err
	}
	if res.Admit {
		return true, nil
	}
	log.FromContext(ctx).Info("Rejected pod", "reason", res.Reason, "message", res.Message)
	r.Recorder.Event(s.pod, corev1.EventTypeWarning, res.Reason, res.Message)
	status := s.pod.Status.DeepCopy()
	status.Phase = corev1.PodFailed
	status.Reason = res.Reason
	status.Message = "Pod was rejected: " + res.Message
	return false, r.patchStatus(ctx, s, *status)
}

// sync plans and executes the pod's next step, then reports its status.
func (r *PodReconciler) sync(ctx context.Context, s *podScope) (ctrl.Result, error) {
	actions := kuberuntime.ComputePodActions(s.pod, s.obs.Runtime, s.state, r.now(), r.Prober.Results(s.pod.UID))
	execErr := r.Exec.Sync(ctx, s.pod, s.obs.Runtime, &s.state, actions, r.saver(s))
	if mutates(actions) {
		obs, err := r.Exec.Observe(ctx, s.pod)
		if err != nil {
			return ctrl.Result{}, errors.Join(execErr, err)
		}
		s.obs = obs
	}
	if err := r.Exec.CollectGarbage(ctx, s.obs.Runtime); err != nil {
		log.FromContext(ctx).Error(err, "Unable to remove dead containers")
	}
	r.Prober.Sync(s.pod, s.obs.Runtime)
	in, err := r.statusInputs(ctx, s.pod.UID)
	if err != nil {
		return ctrl.Result{}, errors.Join(execErr, err)
	}
	status := kuberuntime.ComputePodStatus(s.pod, s.obs.Runtime, s.state, in)
	if err := r.patchStatus(ctx, s, status); err != nil {
		return ctrl.Result{}, errors.Join(execErr, err)
	}
	r.Metrics.observeStart(s.pod, status, r.now())
	if status.Phase == corev1.PodSucceeded || status.Phase == corev1.PodFailed {
		r.Admit.Remove(s.pod.UID)
		r.Prober.Forget(s.pod.UID)
	}
	if execErr != nil {
		return ctrl.Result{}, execErr
	}
	if actions.Done {
		return ctrl.Result{}, nil
	}
	requeue := nextSync(actions.RequeueAfter, r.Config.SyncFrequency.Duration)
	if at, ok := r.Exec.Volumes.NextRefresh(s.pod.UID); ok {
		// The next sync rewrites the pod's volumes: have it renew tokens.
		requeue = min(requeue, max(at.Sub(r.now()), time.Second))
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

func mutates(a kuberuntime.PodActions) bool {
	return a.KillPod || a.CreateSandbox || len(a.ContainersToKill) > 0 ||
		len(a.InitContainersToStart) > 0 || len(a.ContainersToStart) > 0
}

func nextSync(backOff, period time.Duration) time.Duration {
	if backOff > 0 && backOff < period {
		// Wake up just after the back-off ends.
		return backOff + 100*time.Millisecond
	}
	return period
}

func (r *PodReconciler) statusInputs(ctx context.Context, uid types.UID) (kuberuntime.StatusInputs, error) {
	facts, err := r.Nodes.Facts(ctx)
	if err != nil {
		return kuberuntime.StatusInputs{}, err
	}
	return kuberuntime.StatusInputs{Now: r.now(), HostIPs: facts.HostIPs, Probes: r.Prober.Results(uid)}, nil
}

// patchStatus writes status with one strategic-merge patch of the status
// subresource when it differs from what the API server holds, so
// conditions others own (readiness gates) are kept.
func (r *PodReconciler) patchStatus(ctx context.Context, s *podScope, status corev1.PodStatus) error {
	if kuberuntime.StatusEqual(s.pod.Status, status) {
		return nil
	}
	orig := s.pod.DeepCopy()
	s.pod.Status = status
	if err := r.Status().Patch(ctx, s.pod, client.StrategicMergeFrom(orig)); err != nil {
		s.pod.Status = orig.Status
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patching pod status: %w", err)
	}
	metrics.PodStatusWrites.Inc()
	r.written.Store(s.pod.UID, s.pod.ResourceVersion)
	// Not checkpointed on its own: after a restart the API server's copy of
	// the status is the same thing, and an fsync per status write is the
	// largest cost of a pod burst.
	s.state.RecordStatus(status)
	return nil
}

// terminate stops a pod that is being deleted, within its grace period,
// then removes everything of it and deletes the API object.
func (r *PodReconciler) terminate(ctx context.Context, s *podScope) (ctrl.Result, error) {
	// Each step stops what the previous one allowed (containers, then
	// sidecars, then sandboxes); take the steps that need no waiting in
	// one go, so a pod that stops promptly is removed without an
	// intermediate status write.
	var (
		done    bool
		requeue time.Duration
	)
	for range 4 {
		var err error
		done, requeue, err = r.Exec.Terminate(ctx, s.pod, s.obs.Runtime, &s.state, r.saver(s))
		if err != nil {
			return ctrl.Result{}, err
		}
		if done || requeue > 0 {
			break
		}
		obs, err := r.Exec.Observe(ctx, s.pod)
		if err != nil {
			return ctrl.Result{}, err
		}
		s.obs = obs
	}
	if !done {
		in, err := r.statusInputs(ctx, s.pod.UID)
		if err != nil {
			return ctrl.Result{}, err
		}
		status := kuberuntime.ComputePodStatus(s.pod, s.obs.Runtime, s.state, in)
		if err := r.patchStatus(ctx, s, status); err != nil {
			return ctrl.Result{}, err
		}
		if requeue <= 0 {
			requeue = time.Second
		}
		return ctrl.Result{RequeueAfter: requeue}, nil
	}
	obs, err := r.Exec.Observe(ctx, s.pod)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Exec.RemovePod(ctx, s.pod, obs.Runtime); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Store.RemoveCheckpoint(checkpointKey(s.pod.UID)); err != nil {
		return ctrl.Result{}, fmt.Errorf("removing pod checkpoint: %w", err)
	}
	r.Admit.Remove(s.pod.UID)
	r.Prober.Forget(s.pod.UID)
	r.Metrics.forget(s.pod.UID)
	r.written.Delete(s.pod.UID)
	uid := s.pod.UID
	err = r.Delete(ctx, s.pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &uid})
	switch {
	case err == nil:
		log.FromContext(ctx).Info("Pod terminated and deleted")
	case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
		return ctrl.Result{}, fmt.Errorf("deleting pod: %w", err)
	}
	return ctrl.Result{}, nil
}

// cleanupGone stops and removes what the runtime still runs for a pod that
// is gone from the API, with its volumes, logs and checkpoint.
func (r *PodReconciler) cleanupGone(ctx context.Context, nn types.NamespacedName) error {
	obs, err := r.Exec.ObserveGone(ctx, nn.Namespace, nn.Name)
	if err != nil {
		return err
	}
	if len(obs.StaleSandboxes) == 0 && len(obs.StaleContainers) == 0 {
		return nil
	}
	log.FromContext(ctx).Info("Killing the runtime objects of a pod gone from the API", "pod", klog.KRef(nn.Namespace, nn.Name))
	if err := r.Exec.KillStale(ctx, obs.StaleSandboxes, obs.StaleContainers); err != nil {
		return err
	}
	uids := map[types.UID]bool{}
	for _, sb := range obs.StaleSandboxes {
		uids[types.UID(sb.Labels[kubetypes.KubernetesPodUIDLabel])] = true
	}
	for uid := range uids {
		stub := &corev1.Pod{}
		stub.Namespace, stub.Name, stub.UID = nn.Namespace, nn.Name, uid
		if err := r.Exec.RemovePod(ctx, stub, kuberuntime.PodRuntime{}); err != nil {
			return err
		}
		if err := r.Store.RemoveCheckpoint(checkpointKey(uid)); err != nil {
			return fmt.Errorf("removing pod checkpoint: %w", err)
		}
		r.Admit.Remove(uid)
		r.Prober.Forget(uid)
		r.Metrics.forget(uid)
		r.written.Delete(uid)
	}
	return nil
}

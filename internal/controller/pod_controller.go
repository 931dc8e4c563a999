package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	kubetypes "k8s.io/kubelet/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/checkpoint"
	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/executor"
	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
	"github.com/nodelet/nodelet/internal/kuberuntime/planner"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/kuberuntime/status"
	"github.com/nodelet/nodelet/internal/metrics"
	"github.com/nodelet/nodelet/internal/nodeinfo"
	"github.com/nodelet/nodelet/internal/objectstore"
	"github.com/nodelet/nodelet/internal/podcache"
	"github.com/nodelet/nodelet/internal/podspec"
	"github.com/nodelet/nodelet/internal/podworkers"
	"github.com/nodelet/nodelet/internal/prober"
	"github.com/nodelet/nodelet/internal/runtimestate"
	"github.com/nodelet/nodelet/internal/staticpod"
	"github.com/nodelet/nodelet/internal/volume"
)

// orphanGracePeriodSeconds is the grace period of a pod known only from
// the runtime (after a restart, its spec is gone), as the kubelet's.
const orphanGracePeriodSeconds = 1

// PodReconciler runs the pods bound to this node. Reconcile only hands a pod
// to its pod worker (internal/podworkers); the worker's sync admits the pod
// once, plans what the runtime must do (internal/kuberuntime/plan), has the
// executor do it, checkpoints the pod's state after every runtime change and
// writes the pod's status with one patch when it changed. A deleted pod is
// stopped through the termination plan, its final status written, and it
// is removed from the runtime, the node and the API server; a pod gone from
// the API server is stopped and removed the same way.
type PodReconciler struct {
	client.Client
	// Exec carries out the plans; Runtime is the container runtime
	// housekeeping lists, Volumes the pods' volumes a sync refreshes.
	Exec     *executor.Executor
	Runtime  cri.Runtime
	Volumes  podVolumes
	Store    checkpoint.Manager
	Recorder record.EventRecorder
	Config   *v1alpha1.NodeletConfiguration
	Clock    clock.Clock
	Admit    *Admitter
	Nodes    nodeinfo.FactsReader
	Metrics  *podMetrics
	Prober   *prober.Manager
	Workers  *podworkers.Workers
	// Objects holds the ConfigMaps and Secrets of the pods that run here,
	// Services the Services their environment needs; a pod is registered
	// with both while it runs.
	Objects  *objectstore.Store
	Services *objectstore.ServiceWatcher
	// Feed enqueues pods in this reconciler (pods whose deferred resize
	// may fit now).
	Feed *podFeed
	// Pods deletes a stopped pod's API object without reading the answer
	// (nil: through the Client, which decodes the pod the answer carries
	// and encodes it again).
	Pods corev1client.PodsGetter
	// Static holds the static pods of the manifest sources (nil: none);
	// API says whether the API server has been reached (nil: always).
	Static *staticpod.Store
	API    *apiGate
	// APIReader reads from the API server what the node's cache cannot
	// have: the pod, bound elsewhere, that holds a static pod's name.
	APIReader client.Reader
	// Relisted is the relister whose events nudge the pod workers; its
	// events for changes a sync has seen are skipped (nil: none is).
	Relisted relisted
	// Log is the logger of pod syncs, which run outside any reconcile.
	Log logr.Logger
	// Network is the runtime's network state, for the pods held while it
	// is not ready (nil: never held).
	Network *runtimestate.Network
	// ResourceStatus returns, by container name, the health of the
	// devices a pod's containers hold (their allocatedResourcesStatus);
	// nil reports none (the ResourceHealthStatus gate off).
	ResourceStatus func(pod *corev1.Pod) map[string][]corev1.ResourceStatus

	// shared reads this node's pods from the informer's store without a
	// copy: Reconcile and each sync (readPod), housekeeping, the garbage
	// collectors and the eviction manager (nil, in tests: readPod goes
	// through the Client, a copy each).
	shared *podcache.Shared

	// written holds, by pod UID, the resourceVersion of nodelet's own last
	// status write, so the watch event it causes does not sync the pod again.
	written sync.Map
	// writing holds, by pod UID, the status of a status write under way:
	// its watch event may come before the write's answer (and so before
	// written has its resourceVersion).
	writing sync.Map
	// deleted holds the UIDs of the pods nodelet removed and deleted from
	// the API server; a finalizer may keep such a pod there a while.
	deleted sync.Map
	// deferred holds, by UID, the names of the pods whose resize is
	// deferred, to sync when room is made.
	deferred sync.Map
	// evictions holds, by UID, the planner.Eviction of the pods the
	// eviction manager evicted or the node shutdown manager stopped, until
	// their status is terminal.
	evictions sync.Map
	// settledSyncs holds, by UID, the settledSync of a pod whose last sync
	// left nothing to do.
	settledSyncs sync.Map
	// nameHolders holds, by static pod UID, the nameHolder last seen
	// holding the name of its mirror pod.
	nameHolders sync.Map
}

// podVolumes is what a sync needs of the volume manager besides what the
// executor sets up and tears down.
type podVolumes interface {
	// Refresh rewrites what is due in a set-up pod's volumes.
	Refresh(ctx context.Context, pod *corev1.Pod) error
	// Update rewrites the named volumes of a set-up pod from the objects
	// they project.
	Update(ctx context.Context, pod *corev1.Pod, volumes []string) error
	// NextRefresh is when the earliest service account token of the pod
	// is due for refresh, if it has one.
	NextRefresh(uid types.UID) (time.Time, bool)
}

// ownStatusWrite reports whether an update event is the echo of nodelet's
// own status patch: the resourceVersion the patch's answer had, or, while
// the answer has not come, a change of the status alone to the status being
// written.
func (r *PodReconciler) ownStatusWrite(old, pod client.Object) bool {
	if rv, ok := r.written.Load(pod.GetUID()); ok && rv == pod.GetResourceVersion() {
		return true
	}
	want, ok := r.writing.Load(pod.GetUID())
	if !ok {
		return false
	}
	oldPod, ok1 := old.(*corev1.Pod)
	newPod, ok2 := pod.(*corev1.Pod)
	return ok1 && ok2 && statusOnlyChange(oldPod, newPod) && status.Equal(newPod.Status, want.(corev1.PodStatus))
}

// statusOnlyChange reports whether an update changed nothing of the pod
// but its status (and the resourceVersion and managed fields that come
// with any write).
func statusOnlyChange(old, pod *corev1.Pod) bool {
	a, b := &old.ObjectMeta, &pod.ObjectMeta
	return a.UID == b.UID && a.Generation == b.Generation &&
		equality.Semantic.DeepEqual(a.Labels, b.Labels) &&
		equality.Semantic.DeepEqual(a.Annotations, b.Annotations) &&
		equality.Semantic.DeepEqual(a.DeletionTimestamp, b.DeletionTimestamp) &&
		equality.Semantic.DeepEqual(a.DeletionGracePeriodSeconds, b.DeletionGracePeriodSeconds) &&
		equality.Semantic.DeepEqual(a.Finalizers, b.Finalizers) &&
		equality.Semantic.DeepEqual(a.OwnerReferences, b.OwnerReferences) &&
		equality.Semantic.DeepEqual(old.Spec, pod.Spec)
}

// podScope is what one sync of one pod works on, and what its last step
// (finish) does with the pod's status.
type podScope struct {
	pod   *corev1.Pod
	obs   *executor.Observed
	state state.PodState
	// fresh: no checkpoint was found for the pod.
	fresh bool
	// mark is the relists made before obs was observed; settled: what obs
	// shows asks for nothing more (see settledSync).
	mark    uint64
	settled bool

	// writeStatus: the sync ends by computing the pod's status from what
	// it observed last and writing it when it changed.
	writeStatus bool
	// rejection is the status of a pod admission refused, written instead.
	rejection *corev1.PodStatus
	// releaseIfTerminal: once its status is written, a pod whose phase is
	// terminal frees what it held on the node; release: it does whatever
	// the phase.
	releaseIfTerminal, release bool
	// remove: the deleted pod stopped; once its final status is written it
	// is removed from the node and deleted from the API server.
	remove bool
	// retryMirror: a static pod's mirror pod could not be written; the
	// pod syncs again soon.
	retryMirror bool
}

// Reconcile hands the pod to its worker, and tells the workers of other
// pods of the same name (an older UID, or all of them when the pod is gone)
// that their pod is gone. It reads only the cache and never waits on the
// runtime: runtime objects of the name that no worker knows (left by an
// earlier run of the agent) are found by the next sync of a pod of that
// name, live or gone, or by housekeeping.
func (r *PodReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod, err := r.readPod(ctx, req.NamespacedName)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("reading pod: %w", err)
		}
		pod = nil
	}
	if pod != nil && pod.Spec.NodeName != r.Config.NodeName {
		return ctrl.Result{}, nil
	}
	if sp, ok := r.Static.Get(req.Namespace, req.Name); ok {
		// The name is a static pod's: the API server's pod of the name
		// is its mirror pod, which the static pod's sync keeps, or a pod
		// that holds the name, which it deletes. Whatever of such a pod
		// runs stops now.
		if pod != nil && !staticpod.IsMirror(pod) && pod.UID != sp.UID && r.Workers.Has(pod.UID) {
			r.Admit.Remove(pod.UID)
			r.Workers.Gone(podworkers.Key{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}, nil)
		}
		r.Workers.Update(sp)
		return ctrl.Result{}, nil
	}
	if pod != nil && staticpod.IsMirror(pod) {
		// A mirror pod is never run; one whose static pod is gone goes.
		if err := r.deleteOrphanMirror(ctx, req.Namespace, req.Name); err != nil {
			return ctrl.Result{}, err
		}
		pod = nil
	}
	var keep types.UID
	if pod != nil {
		keep = pod.UID
	}
	for _, k := range r.Workers.Named(req.Namespace, req.Name) {
		if k.UID != keep {
			// Its requests stop counting in admission now, as the
			// kubelet's do once a pod leaves the API server (and the
			// scheduler's), not once its containers have stopped.
			r.Admit.Remove(k.UID)
			r.retryDeferredResizes()
			r.Workers.Gone(k, nil)
		}
	}
	if pod != nil {
		r.Workers.Update(pod)
	}
	return ctrl.Result{}, nil
}

// readPod reads the pod of key from the cache: the cache's own object,
// which nobody may change, when the reconciler reads shared pods, a copy
// otherwise. Reconcile hands it to the pod's worker, and each sync of a
// pod in the API server works on it (a status patch decodes the answer
// into a copy).
func (r *PodReconciler) readPod(ctx context.Context, key types.NamespacedName) (*corev1.Pod, error) {
	if r.shared != nil {
		return r.shared.Get(key)
	}
	pod := &corev1.Pod{}
	if err := r.Get(ctx, key, pod); err != nil {
		return nil, err
	}
	return pod, nil
}

// handOverStale starts a gone-pod worker for each UID, other than those
// kept, that has runtime objects in obs and no worker.
func (r *PodReconciler) handOverStale(obs *executor.Observed, keep ...types.UID) {
	seen := map[types.UID]bool{}
	hand := func(labels map[string]string) {
		uid := types.UID(labels[kubetypes.KubernetesPodUIDLabel])
		if uid == "" || slices.Contains(keep, uid) || seen[uid] || r.Workers.Has(uid) {
			return
		}
		seen[uid] = true
		r.Workers.Gone(podworkers.Key{
			Namespace: labels[kubetypes.KubernetesPodNamespaceLabel],
			Name:      labels[kubetypes.KubernetesPodNameLabel],
			UID:       uid,
		}, nil)
	}
	for _, sb := range obs.StaleSandboxes {
		hand(sb.Labels)
	}
	for _, c := range obs.StaleContainers {
		hand(c.Labels)
	}
}

// syncPod is the pod workers' sync: one pass over one pod.
func (r *PodReconciler) syncPod(ctx context.Context, w podworkers.Work) podworkers.Result {
	logger := r.Log.WithValues("pod", klog.KRef(w.Key.Namespace, w.Key.Name), "podUID", w.Key.UID)
	ctx = log.IntoContext(ctx, logger)
	if w.Gone {
		return r.syncGone(ctx, w)
	}
	pod, err := r.podFor(ctx, w)
	switch {
	case apierrors.IsNotFound(err), err == nil && pod.UID != w.Key.UID:
		return r.syncGone(ctx, w)
	case err != nil:
		return podworkers.Result{Err: fmt.Errorf("reading pod: %w", err)}
	}
	res, err := r.sync(ctx, pod)
	return podworkers.Result{RequeueAfter: res.RequeueAfter, Periodic: res.periodic, Err: err, RetryWithin: syncRetry(err), Finished: res.finished}
}

// volumeProcessRetry is how often a pod whose volumes wait for their
// claims (unbound, or not readable yet) is tried again at the most, as the
// kubelet's volume manager keeps looking: the claim may be bound at any
// moment, and a try is a GET or two.
const volumeProcessRetry = 2 * time.Second

// volumeRetry caps the back-off of a sync that failed on volumes waiting
// for their claims.
func volumeRetry(err error) time.Duration {
	for _, e := range volume.SetUpErrors(err) {
		if e.Stage == volume.StageProcess {
			return volumeProcessRetry
		}
	}
	return 0
}

// syncResult is what one sync of a live pod asks of its worker.
type syncResult struct {
	RequeueAfter time.Duration
	// periodic: RequeueAfter is the pod's periodic resync (syncFrequency),
	// which the workers spread and align as the kubelet's.
	periodic bool
	// finished: the pod is terminal or deleted and nothing of it is left.
	finished bool
}

// sync syncs a pod that is in the API server: its steps work on a scope,
// and the last one, finish, writes the pod's status, once.
func (r *PodReconciler) sync(ctx context.Context, pod *corev1.Pod) (syncResult, error) {
	if pod.DeletionTimestamp != nil {
		if _, done := r.deleted.Load(pod.UID); done {
			// Removed and deleted already; a finalizer keeps it a while.
			return syncResult{finished: true}, nil
		}
	}
	r.Metrics.seen(pod.UID, r.now())
	var last *settledSync
	if v, ok := r.settledSyncs.LoadAndDelete(pod.UID); ok {
		l := v.(settledSync)
		last = &l
	}
	s, err := r.newScope(ctx, pod, last)
	if err != nil {
		return syncResult{}, err
	}
	res, err := r.syncScope(ctx, s)
	res, err = r.finish(ctx, s, res, err)
	if err == nil && s.settled && !res.finished && ctx.Err() == nil {
		r.settledSyncs.Store(pod.UID, settledSync{mark: s.mark, objects: runtimeObjects(s.obs.Runtime), obs: s.obs})
	}
	return res, err
}

// syncScope runs the steps of a sync: stop a deleted pod, admit a new one,
// run a running one.
func (r *PodReconciler) syncScope(ctx context.Context, s *podScope) (syncResult, error) {
	pod := s.pod
	r.handOverStale(s.obs, pod.UID)
	if pod.DeletionTimestamp != nil {
		return r.terminate(ctx, s)
	}
	if isTerminal(pod) && s.fresh && s.obs.Runtime.Empty() {
		// Finished, or rejected, without anything of it in the runtime:
		// its status is final.
		r.release(pod.UID)
		return syncResult{finished: true}, nil
	}
	static := staticpod.IsStatic(pod)
	if static && !r.Admit.Admitted(pod.UID) && r.olderStaticPod(pod) {
		// Its predecessor of the same full name is still stopping.
		return syncResult{RequeueAfter: staticWaitPeriod}, nil
	}
	if !isTerminal(pod) && !r.Admit.Admitted(pod.UID) {
		ok, err := r.admit(ctx, s)
		if err != nil {
			return syncResult{}, err
		}
		if !ok {
			return syncResult{finished: true}, nil
		}
	}
	if !isTerminal(pod) {
		// Idempotent and cheap for a pod registered already; the pod's
		// references are read again as its spec may not be the same.
		// (A static pod reads no ConfigMap or Secret: the API server
		// refuses the mirror pod of one that references any.)
		if !static {
			r.Objects.RegisterPod(pod)
		}
		r.Services.RegisterPod(pod)
	}
	return r.syncRunning(ctx, s)
}

// finish is the last step of every sync of a pod in the API server, and
// the one place a sync writes the pod's status: once, when the sync asked
// for it (an admission rejection, or the status computed from what it
// observed last) and it changed. Then comes what must follow that write:
// a pod that finished frees what it held on the node, and a deleted pod
// that stopped, whose final status is written now, is removed from the
// node and the API server. A sync that failed before it observed what it
// did writes nothing.
func (r *PodReconciler) finish(ctx context.Context, s *podScope, res syncResult, syncErr error) (syncResult, error) {
	var err error
	switch {
	case s.rejection != nil:
		err = r.patchStatus(ctx, s, *s.rejection)
	case s.writeStatus:
		err = r.writeStatus(ctx, s)
	}
	if err != nil {
		return syncResult{}, errors.Join(syncErr, err)
	}
	if s.release || (s.releaseIfTerminal && isTerminal(s.pod)) {
		r.release(s.pod.UID)
	}
	if syncErr != nil {
		return syncResult{}, syncErr
	}
	if s.remove {
		return r.removeDeleted(ctx, s)
	}
	if s.retryMirror && !res.finished && (res.RequeueAfter == 0 || res.RequeueAfter > mirrorRetryPeriod) {
		res.RequeueAfter, res.periodic = mirrorRetryPeriod, false
	}
	return res, nil
}

func isTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

func checkpointKey(uid types.UID) string { return "pod-" + string(uid) }

// newScope loads the pod's checkpoint and observes its runtime objects,
// or reuses the look of the pod's last settled sync (last, nil for none)
// when the runtime holds what it saw (see unchanged). A corrupt checkpoint
// has been set aside by the store; the pod's state is then rebuilt from
// what the runtime's labels say.
func (r *PodReconciler) newScope(ctx context.Context, pod *corev1.Pod, last *settledSync) (*podScope, error) {
	s := &podScope{pod: pod}
	var err error
	if s.state, s.fresh, err = r.loadState(ctx, pod.UID); err != nil {
		return nil, err
	}
	if obs, mark, ok := r.unchanged(pod.UID, last); ok && !s.fresh {
		// As the kubelet's syncs read its relist's cache: the runtime
		// holds what the last sync saw.
		s.obs, s.mark = obs, mark
		return s, nil
	}
	s.mark = r.listed()
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

// loadState reads the pod's checkpoint; fresh reports that there was none
// (or only a corrupt one, which the store has set aside and reported).
func (r *PodReconciler) loadState(ctx context.Context, uid types.UID) (st state.PodState, fresh bool, err error) {
	data := checkpoint.NewData(state.NewPodState(uid))
	err = r.Store.GetCheckpoint(checkpointKey(uid), data)
	switch {
	case err == nil:
		st = data.Value
	case errors.Is(err, checkpoint.ErrCheckpointNotFound):
		st, fresh = state.NewPodState(uid), true
	case errors.Is(err, checkpoint.ErrCorruptCheckpoint), errors.Is(err, checkpoint.ErrUnsupportedVersion):
		log.FromContext(ctx).Error(err, "Unable to read pod checkpoint, rebuilding the state from the runtime")
		st, fresh = state.NewPodState(uid), true
	default:
		return st, false, fmt.Errorf("reading pod checkpoint: %w", err)
	}
	if st.Containers == nil {
		st.Containers = map[string]state.ContainerRecord{}
	}
	return st, fresh, nil
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

// maxCrashLoopBackOff is the node's cap of the crash-loop back-off
// (crashLoopBackOff.maxContainerRestartPeriod); zero leaves the kubelet's.
func (r *PodReconciler) maxCrashLoopBackOff() time.Duration {
	if d := r.Config.CrashLoopBackOff.MaxContainerRestartPeriod; d != nil {
		return d.Duration
	}
	return 0
}

// admit runs admission for a pod seen for the first time. A pod that
// already has runtime objects or a checkpoint was admitted before a restart.
func (r *PodReconciler) admit(ctx context.Context, s *podScope) (bool, error) {
	if !s.fresh || len(s.obs.Runtime.Sandboxes) > 0 {
		r.Admit.Add(state.AllocatedPod(s.pod, s.state))
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
	s.rejection = s.pod.Status.DeepCopy()
	s.rejection.Phase = corev1.PodFailed
	s.rejection.Reason = res.Reason
	s.rejection.Message = "Pod was rejected: " + res.Message
	s.rejection.ObservedGeneration = s.pod.Generation
	return false, nil
}

// syncRunning plans and executes the pod's next step; the sync then
// reports its status.
func (r *PodReconciler) syncRunning(ctx context.Context, s *podScope) (syncResult, error) {
	allocated, err := r.allocate(ctx, s)
	if err != nil {
		return syncResult{}, err
	}
	eviction := r.eviction(s.pod.UID)
	planNow := func() plan.PodActions {
		return planner.ComputePodActions(allocated, s.obs.Runtime, s.state, planner.Inputs{
			Now:                 r.now(),
			Probes:              r.Prober.Results(s.pod.UID),
			MaxCrashLoopBackOff: r.maxCrashLoopBackOff(),
			Eviction:            eviction,
		})
	}
	actions := planNow()
	if err := networkGate(s.pod, actions, func() error { return r.networkErr(ctx) }); err != nil {
		// Held: the status still shows the pod waiting; the worker
		// retries within networkRetry, an Event each time.
		r.Recorder.Event(s.pod, corev1.EventTypeWarning, EventNetworkNotReady, err.Error())
		s.writeStatus = true
		return syncResult{}, err
	}
	// The eviction manager records its own Event; a pod stopped for a node
	// shutdown gets none, as in the kubelet.
	if actions.KillPodReason != "" && !planner.Evicted(s.pod, eviction) && s.state.Terminating == nil {
		log.FromContext(ctx).Info("Stopping pod for good", "reason", actions.KillPodReason)
		r.Recorder.Event(s.pod, corev1.EventTypeNormal, actions.KillPodReason, actions.KillPodMessage)
	}
	// A pod's first sandbox comes with KillPod set, as in the kubelet, but
	// with nothing to stop: skip the termination and its two checkpoints.
	nothingToStop := actions.CreateSandbox && s.obs.Runtime.Empty() && s.state.Terminating == nil
	if actions.KillPod && !nothingToStop {
		if actions.CreateSandbox && len(s.obs.Runtime.Sandboxes) > 0 {
			r.Recorder.Event(s.pod, corev1.EventTypeNormal, executor.EventSandboxChanged, "Pod sandbox changed, it will be killed and re-created.")
		}
		done, requeue, err := r.stopAll(ctx, s, planner.StopGracePeriod(s.pod, eviction))
		if err != nil {
			return syncResult{}, err
		}
		if !done {
			s.writeStatus = true
			return syncResult{RequeueAfter: requeue}, nil
		}
		if actions.CreateSandbox {
			s.state.EndTermination()
			if err := r.saver(s)(); err != nil {
				return syncResult{}, err
			}
		}
	}
	var execErr error
	if actions.Starts() {
		execErr = r.Exec.Start(ctx, allocated, s.obs.Runtime, &s.state, actions, r.saver(s))
	}
	if ctx.Err() == nil && execErr == nil {
		r.resize(ctx, s, allocated, actions)
	}
	if ctx.Err() != nil {
		// Deleted meanwhile: the next sync terminates the pod.
		return syncResult{}, nil
	}
	settled := quiet(actions)
	if mutates(actions) {
		mark := r.listed()
		// What the step created is in the state, unless a creation failed
		// that may have created something all the same (a timeout): then
		// look for everything.
		var obs *executor.Observed
		var err error
		if execErr != nil || s.state.StartFailed() {
			obs, err = r.Exec.Observe(ctx, s.pod)
		} else {
			obs, err = r.Exec.Reobserve(ctx, s.pod, s.obs, &s.state)
		}
		if err != nil {
			return syncResult{}, errors.Join(execErr, err)
		}
		s.obs, s.mark = obs, mark
		// What the plan did is done when the runtime, as it is now, asks
		// for nothing more.
		settled = quiet(planNow())
	}
	if err := r.Exec.CollectGarbage(ctx, planner.SelectGarbage(s.obs.Runtime, garbagePolicy(r.Config, r.now()))); err != nil {
		log.FromContext(ctx).Error(err, "Unable to remove dead containers")
	}
	r.Prober.Sync(s.pod, s.obs.Runtime)
	if err := r.finishResize(ctx, s, allocated); err != nil {
		return syncResult{}, errors.Join(execErr, err)
	}
	if err := r.refreshVolumes(ctx, s.pod); err != nil {
		// Containers started or restarted without it: the volumes keep
		// their content and the refresh is tried again at the next sync.
		log.FromContext(ctx).Error(err, "Unable to refresh volumes")
	}
	// The status shows what runs now; a pod it shows terminal frees its
	// slot once it is written.
	s.writeStatus, s.releaseIfTerminal = true, true
	if execErr != nil {
		return syncResult{}, execErr
	}
	// A resize shows in the runtime's container statuses only: the pod is
	// not settled before it is done.
	s.settled = settled && len(actions.ContainersToResize) == 0 &&
		s.state.ResizePending == nil && s.state.ResizeInProgress == nil
	if actions.Done {
		s.release = true
		return syncResult{finished: true}, nil
	}
	requeue := nextSync(actions.RequeueAfter, r.Config.SyncFrequency.Duration)
	if s.state.StartFailed() {
		requeue = min(requeue, state.StartRetryPeriod)
	}
	if at, ok := r.Volumes.NextRefresh(s.pod.UID); ok {
		// The sync then renews the pod's tokens.
		requeue = min(requeue, max(at.Sub(r.now()), time.Second))
	}
	requeue = resizeRequeue(s.state, requeue)
	return syncResult{RequeueAfter: requeue, periodic: requeue == r.Config.SyncFrequency.Duration}, nil
}

// volumeRefreshTimeout bounds a token request made while the API server
// does not answer, so that it does not hold the pod's next sync.
const volumeRefreshTimeout = 10 * time.Second

// refreshVolumes rewrites what is due in the pod's volumes without an object
// changing: tokens due for renewal, downward API files after a label or
// annotation change. It reads and writes nothing otherwise.
func (r *PodReconciler) refreshVolumes(ctx context.Context, pod *corev1.Pod) error {
	ctx, cancel := context.WithTimeout(ctx, volumeRefreshTimeout)
	defer cancel()
	if err := r.Volumes.Refresh(ctx, pod); err != nil {
		return fmt.Errorf("refreshing volumes: %w", err)
	}
	if r.Config.ConfigMapAndSecretChangeDetectionStrategy == v1alpha1.WatchChangeDetectionStrategy {
		// The store's watches feed every change to the reconcilers.
		return nil
	}
	// The Cache and Get strategies see a change only when they read, as
	// the kubelet's do: read at every sync of the pod (the store keeps
	// the last content when a read fails). A read that finds an object
	// deleted feeds the change to the reconcilers, which report a volume
	// that requires it; until it is back that is no error of the sync.
	err := r.Volumes.Update(ctx, pod, volume.VolumesProjectingObjects(pod))
	if _, retry := volumeUpdateFailures(err); retry != nil {
		return fmt.Errorf("re-reading the objects of volumes: %w", retry)
	}
	return nil
}

func mutates(a plan.PodActions) bool {
	return a.KillPod || a.CreateSandbox || len(a.ContainersToKill) > 0 ||
		len(a.InitContainersToStart) > 0 || len(a.ContainersToStart) > 0 ||
		len(a.EphemeralContainersToStart) > 0
}

// quiet reports whether a plan leaves nothing to do and nothing to wait
// for: no step, no container backing off, no time-bound requeue. Only a
// quiet pod's next runtime change may be skipped (see settled): a sync
// during a back-off reports it, with the kubelet's BackOff Event.
func quiet(a plan.PodActions) bool {
	return !mutates(a) && len(a.BackingOff) == 0 && a.RequeueAfter == 0
}

func nextSync(backOff, period time.Duration) time.Duration {
	if backOff > 0 && backOff < period {
		// Wake up just after the back-off ends.
		return backOff + 100*time.Millisecond
	}
	return period
}

// writeStatus computes the pod's status from what was observed and writes
// it when it changed.
func (r *PodReconciler) writeStatus(ctx context.Context, s *podScope) error {
	facts, err := r.Nodes.Facts(ctx)
	if err != nil {
		return err
	}
	in := status.Inputs{
		Now:                 r.now(),
		HostIPs:             facts.HostIPs,
		Probes:              r.Prober.Results(s.pod.UID),
		MaxCrashLoopBackOff: r.maxCrashLoopBackOff(),
		Eviction:            r.eviction(s.pod.UID),
	}
	if r.Exec != nil && wantsRecursiveReadOnly(s.pod) {
		in.RecursiveReadOnly = r.Exec.SupportsRecursiveReadOnly(ctx, s.pod)
	}
	if r.ResourceStatus != nil {
		in.AllocatedResourcesStatus = r.ResourceStatus(s.pod)
	}
	st := status.ComputePodStatus(s.pod, s.obs.Runtime, s.state, in)
	if (st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed) && len(s.obs.Runtime.Live()) == 0 {
		// As the kubelet: after the containers stopped and before the
		// status says the pod is done, for the claims' reservations are
		// dropped then and their devices may go to another pod.
		if err := r.unprepareClaims(ctx, s.pod.UID); err != nil {
			return err
		}
	}
	if err := r.patchStatus(ctx, s, st); err != nil {
		return err
	}
	r.Metrics.observeStart(s.pod, st, r.now())
	return nil
}

// wantsRecursiveReadOnly reports whether a container of the pod asks for
// a recursive read-only mount: only then does its status depend on the
// runtime handler's features.
func wantsRecursiveReadOnly(pod *corev1.Pod) bool {
	for i := range pod.Spec.InitContainers {
		if podspec.WantsRecursiveReadOnly(&pod.Spec.InitContainers[i]) {
			return true
		}
	}
	for i := range pod.Spec.Containers {
		if podspec.WantsRecursiveReadOnly(&pod.Spec.Containers[i]) {
			return true
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		c := corev1.Container{VolumeMounts: pod.Spec.EphemeralContainers[i].VolumeMounts}
		if podspec.WantsRecursiveReadOnly(&c) {
			return true
		}
	}
	return false
}

// patchStatus writes status with one strategic-merge patch of the status
// subresource when it differs from what the API server holds, so
// conditions others own (readiness gates) are kept, and the claim statuses
// others write are left as they are (status.KeepOthers).
func (r *PodReconciler) patchStatus(ctx context.Context, s *podScope, want corev1.PodStatus) error {
	want = status.KeepOthers(s.pod.Status, want)
	if staticpod.IsStatic(s.pod) {
		return r.writeStaticStatus(ctx, s, want)
	}
	if status.Equal(s.pod.Status, want) {
		return nil
	}
	patch, err := status.Patch(s.pod.UID, s.pod.Status, want)
	if err != nil {
		return err
	}
	// A failed patch leaves s.pod as it was; a written one is the API
	// server's answer, decoded into a copy: s.pod may be the cache's own
	// object (readPod), which nobody may change.
	if r.shared != nil {
		s.pod = s.pod.DeepCopy()
	}
	r.writing.Store(s.pod.UID, want)
	defer r.writing.Delete(s.pod.UID)
	if err := r.Status().Patch(ctx, s.pod, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		// Gone, or replaced by a pod of the same name (the UID in the
		// patch does not match): nothing of this pod to report.
		if apierrors.IsNotFound(err) || otherUID(err) {
			return nil
		}
		return fmt.Errorf("patching pod status: %w", err)
	}
	metrics.PodStatusWrites.Inc()
	r.written.Store(s.pod.UID, s.pod.ResourceVersion)
	// Not checkpointed on its own: after a restart the API server's copy of
	// the status is the same thing, and an fsync per status write is the
	// largest cost of a pod burst.
	s.state.RecordStatus(want)
	return nil
}

// otherUID reports whether the API server refused a status patch because
// the pod of that name has another UID (the field is immutable).
func otherUID(err error) bool {
	var st apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &st) || st.Status().Details == nil {
		return false
	}
	for _, c := range st.Status().Details.Causes {
		if c.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

// stopAll carries the termination plan forward with grace seconds: a step,
// then, while steps need no waiting, another after observing the runtime
// again. It returns done once nothing of the pod runs, else when to look
// again.
func (r *PodReconciler) stopAll(ctx context.Context, s *podScope, grace int64) (done bool, requeue time.Duration, err error) {
	before := s.state.Terminating.Clone()
	s.state.BeginTermination(grace, r.now())
	// With nothing in the runtime there is nothing whose deadline a
	// restart must keep.
	if !before.Equal(s.state.Terminating) && !s.obs.Runtime.Empty() {
		if err := r.saver(s)(); err != nil {
			return false, 0, err
		}
	}
	// Each step stops what the previous one allowed (containers, then
	// sidecars, then sandboxes); take the steps that need no waiting in
	// one go, so a pod that stops promptly needs one sync.
	for range 4 {
		step := planner.PlanTermination(s.pod, s.obs.Runtime, s.state, r.now())
		if err := r.Exec.Terminate(ctx, s.pod, s.obs.Runtime, step, &s.state, r.saver(s)); err != nil {
			return false, 0, err
		}
		done, requeue = step.Done, step.RequeueAfter
		if step.StopsAnything() {
			// What waited for these may go next: plan again at once.
			requeue = 0
		}
		if done || requeue > 0 {
			return done, requeue, nil
		}
		obs, err := r.Exec.Reobserve(ctx, s.pod, s.obs, &s.state)
		if err != nil {
			return false, 0, err
		}
		s.obs = obs
	}
	return false, 100 * time.Millisecond, nil
}

// terminate stops a pod that is being deleted, within its grace period;
// once nothing of it runs, the sync writes its final status (a terminal
// phase, not ready, every container terminated), so that finalizers and
// controllers see a terminal pod, then removes everything of it from the
// node and deletes the API object (removeDeleted).
func (r *PodReconciler) terminate(ctx context.Context, s *podScope) (syncResult, error) {
	done, requeue, err := r.stopAll(ctx, s, planner.EffectiveGracePeriod(s.pod))
	if err != nil {
		return syncResult{}, err
	}
	if !done {
		if requeue <= 0 {
			requeue = time.Second
		}
		s.writeStatus = true
		return syncResult{RequeueAfter: requeue}, nil
	}
	// A pod whose terminal status is written and whose runtime objects are
	// gone (removed before a restart) keeps that status.
	s.writeStatus = !(isTerminal(s.pod) && s.obs.Runtime.Empty())
	s.remove = true
	return syncResult{}, nil
}

// finalDeleteTimeout bounds the deletion of a pod's API object once the
// pod is off the node.
const finalDeleteTimeout = 10 * time.Second

// removeDeleted removes a deleted pod that stopped, and whose final status
// is written, from the node, then deletes the API object with grace 0 and
// its UID as precondition.
func (r *PodReconciler) removeDeleted(ctx context.Context, s *podScope) (syncResult, error) {
	if err := r.removeFromNode(ctx, s.pod, s.obs.Runtime); err != nil {
		return syncResult{}, err
	}
	uid := s.pod.UID
	// The pod is off the node: finish telling the API server even if the
	// worker cancels this sync, as it does for the update this very
	// deletion causes (its grace period set to 0), or the next sync would
	// remove the pod from the node a second time.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalDeleteTimeout)
	defer cancel()
	err := r.deletePod(dctx, s.pod)
	switch {
	case err == nil:
		log.FromContext(ctx).Info("Pod terminated and deleted")
	case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
		return syncResult{}, fmt.Errorf("deleting pod: %w", err)
	}
	r.deleted.Store(uid, true)
	return syncResult{finished: true}, nil
}

// deletePod deletes pod's API object with grace 0 and its UID as
// precondition. Through Pods, the answer (the pod as deleted) is not
// decoded: the Client decodes it, and encodes and decodes it again as an
// unstructured object, for a Delete that returns only an error; at a
// node's teardown that was a tenth of the bytes nodelet allocated.
func (r *PodReconciler) deletePod(ctx context.Context, pod *corev1.Pod) error {
	uid := pod.UID
	if r.Pods == nil {
		return r.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &uid})
	}
	var grace int64
	return r.Pods.Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &grace,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
}

// syncGone stops and removes everything of a pod that is no longer in the
// API server (deleted, force-deleted, or replaced by a pod of the same name
// with another UID). The grace period follows the kubelet's rules for the
// pod as last seen; a pod known only from the runtime gets one second.
// preStop hooks run where the last seen spec has them.
func (r *PodReconciler) syncGone(ctx context.Context, w podworkers.Work) podworkers.Result {
	pod := w.Pod
	grace := int64(orphanGracePeriodSeconds)
	if pod != nil {
		grace = planner.EffectiveGracePeriod(pod)
	} else {
		pod = &corev1.Pod{}
		pod.Namespace, pod.Name, pod.UID = w.Key.Namespace, w.Key.Name, w.Key.UID
	}
	if _, removed := r.deleted.LoadAndDelete(pod.UID); removed && !staticpod.IsStatic(pod) {
		// Its last sync removed it from the node, then deleted it.
		return podworkers.Result{Finished: true}
	}
	if w.Pod != nil {
		// The worker's pod may be the cache's own object (readPod).
		pod = w.Pod.DeepCopy()
	}
	s := &podScope{pod: pod}
	var err error
	if s.state, _, err = r.loadState(ctx, pod.UID); err != nil {
		return podworkers.Result{Err: err}
	}
	if s.obs, err = r.Exec.Observe(ctx, pod); err != nil {
		return podworkers.Result{Err: err}
	}
	// Other pods of the name that no worker knows stop too, but not the
	// one the API server has now (its worker may have finished).
	keep := []types.UID{pod.UID}
	switch current, err := r.podFor(ctx, podworkers.Work{Key: w.Key, Pod: pod}); {
	case err == nil:
		keep = append(keep, current.UID)
	case !apierrors.IsNotFound(err):
		return podworkers.Result{Err: fmt.Errorf("reading pod: %w", err)}
	}
	r.handOverStale(s.obs, keep...)
	if !s.obs.Runtime.Empty() {
		log.FromContext(ctx).Info("Stopping a pod gone from the API server", "gracePeriod", grace)
	}
	done, requeue, err := r.stopAll(ctx, s, grace)
	if err != nil || !done {
		return podworkers.Result{RequeueAfter: requeue, Err: err}
	}
	if err := r.removeFromNode(ctx, pod, s.obs.Runtime); err != nil {
		return podworkers.Result{Err: err}
	}
	r.deleted.Delete(pod.UID)
	if staticpod.IsStatic(pod) {
		r.Static.Forget(pod.UID)
		if err := r.deleteOrphanMirror(ctx, pod.Namespace, pod.Name); err != nil {
			log.FromContext(ctx).Error(err, "Unable to delete the mirror pod of a removed static pod")
		}
	}
	return podworkers.Result{Finished: true}
}

// removeFromNode removes the stopped pod's runtime objects, volumes, logs
// and checkpoint, and forgets it in admission, the prober, the object store
// and the metrics.
func (r *PodReconciler) removeFromNode(ctx context.Context, pod *corev1.Pod, rt state.PodRuntime) error {
	// Its containers stopped; a pod gone from the API server wrote no
	// final status that did it.
	if err := r.unprepareClaims(ctx, pod.UID); err != nil {
		return err
	}
	if err := r.Exec.RemovePod(ctx, pod, rt); err != nil {
		return err
	}
	if err := r.Store.RemoveCheckpoint(checkpointKey(pod.UID)); err != nil {
		return fmt.Errorf("removing pod checkpoint: %w", err)
	}
	r.release(pod.UID)
	r.Metrics.forget(pod.UID)
	r.written.Delete(pod.UID)
	r.settledSyncs.Delete(pod.UID)
	return nil
}

// unprepareClaims unprepares the ResourceClaims of a pod none of whose
// containers runs; a failure is an error to retry with back-off (the
// driver may be away for a while).
func (r *PodReconciler) unprepareClaims(ctx context.Context, uid types.UID) error {
	if r.Exec == nil {
		return nil
	}
	if err := r.Exec.UnprepareClaims(ctx, uid); err != nil {
		return fmt.Errorf("unpreparing dynamic resources: %w", err)
	}
	return nil
}

// release frees what a pod that no longer runs held on the node: its
// admission slot (pods, resources, host ports), its probe workers, its user
// namespace range, and its references to ConfigMaps, Secrets and Services
// (watches no other pod needs stop).
func (r *PodReconciler) release(uid types.UID) {
	r.Admit.Remove(uid)
	r.evictions.Delete(uid)
	// Its requests are free now: a deferred resize may fit.
	r.deferred.Delete(uid)
	r.retryDeferredResizes()
	r.Prober.Forget(uid)
	gone := &corev1.Pod{}
	gone.UID = uid
	r.Objects.UnregisterPod(gone)
	r.Services.UnregisterPod(gone)
	if r.Exec != nil && r.Exec.UserNamespaces != nil {
		if err := r.Exec.UserNamespaces.Release(uid); err != nil {
			r.Log.Error(err, "Unable to release the user namespace range of a pod", "podUID", uid)
		}
	}
}

package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/internal/kuberuntime/status"
	"github.com/nodelet/nodelet/internal/metrics"
	"github.com/nodelet/nodelet/internal/podworkers"
	"github.com/nodelet/nodelet/internal/staticpod"
)

// EventFailedValidation is the Node Event of a static pod manifest nodelet
// cannot use, as the kubelet names it.
const EventFailedValidation = "FailedValidation"

// staticWaitPeriod is how often a static pod whose full name an older
// static pod still holds looks again whether that one has stopped.
const staticWaitPeriod = time.Second

// setupStaticPods makes the static pod sources of the configuration and
// adds them to the runnables that do not wait for the API server. Their
// pods go straight to the pod workers.
func setupStaticPods(mgr ctrl.Manager, d *Deps, r *PodReconciler) error {
	cfg := d.Config
	var sources []string
	if cfg.StaticPodPath != "" {
		sources = append(sources, staticpod.SourceFile)
	}
	if cfg.StaticPodURL != "" {
		sources = append(sources, staticpod.SourceHTTP)
	}
	if len(sources) == 0 {
		return nil
	}
	r.Static = staticpod.NewStore(sources...)
	r.APIReader = mgr.GetAPIReader()
	logger := mgr.GetLogger().WithName("staticpods")
	if cfg.StaticPodPath != "" {
		src := &staticpod.FileSource{
			Path:     cfg.StaticPodPath,
			NodeName: cfg.NodeName,
			Period:   cfg.FileCheckFrequency.Duration,
			Update:   func(pods []*corev1.Pod) { r.staticUpdate(staticpod.SourceFile, pods) },
			Report:   r.reportManifest(staticpod.SourceFile),
			Log:      logger.WithValues("source", staticpod.SourceFile),
		}
		if err := d.local(mgr).Add(src); err != nil {
			return fmt.Errorf("adding the static pod directory: %w", err)
		}
	}
	if cfg.StaticPodURL != "" {
		src := &staticpod.URLSource{
			URL:      cfg.StaticPodURL,
			Header:   http.Header(cfg.StaticPodURLHeader),
			NodeName: cfg.NodeName,
			Period:   cfg.HTTPCheckFrequency.Duration,
			Update:   func(pods []*corev1.Pod) { r.staticUpdate(staticpod.SourceHTTP, pods) },
			Report:   r.reportManifest(staticpod.SourceHTTP),
			Log:      logger.WithValues("source", staticpod.SourceHTTP),
		}
		if err := d.local(mgr).Add(src); err != nil {
			return fmt.Errorf("adding the static pod URL: %w", err)
		}
	}
	return nil
}

// staticUpdate takes the whole set of one source's static pods: new and
// changed ones go to their workers, removed ones (a changed manifest
// gives a new UID) are stopped as gone.
func (r *PodReconciler) staticUpdate(source string, pods []*corev1.Pod) {
	changes, dupes := r.Static.Set(source, pods)
	r.Static.Reported(source)
	report := r.reportManifest(source)
	for _, p := range dupes {
		report(p)
	}
	for _, p := range changes.Removed {
		r.Log.Info("Static pod removed", "pod", klog.KObj(p), "podUID", p.UID, "source", source)
		r.Workers.Gone(podworkers.KeyOf(p), r.Static.WithStatus(p))
	}
	for _, p := range changes.Added {
		r.Log.Info("Static pod added", "pod", klog.KObj(p), "podUID", p.UID, "source", source)
		r.Workers.Update(r.Static.WithStatus(p))
	}
	for _, p := range changes.Updated {
		r.Workers.Update(r.Static.WithStatus(p))
	}
}

// reportManifest logs a manifest nodelet cannot use and records a Warning
// Event on the Node; the other static pods are not affected.
func (r *PodReconciler) reportManifest(source string) func(staticpod.Problem) {
	return func(p staticpod.Problem) {
		r.Static.Reported(source)
		r.Log.Error(p.Err, "Ignoring a static pod manifest", "source", p.Source, "origin", p.Origin)
		r.Recorder.Eventf(r.nodeRef(), corev1.EventTypeWarning, EventFailedValidation,
			"Error validating static pod manifest %s from %s, ignoring: %s", p.Origin, p.Source, shortened(p.Err.Error(), maxManifestErrorInEvent))
	}
}

// maxManifestErrorInEvent bounds the part of a manifest's error an Event
// carries: a validation error quotes the values it refuses, and every Node
// Event is readable in the default namespace.
const maxManifestErrorInEvent = 512

// shortened is s cut to at most n bytes, on a rune boundary, marked when cut.
func shortened(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "… (shortened)"
}

// nodeRef is the kubelet's reference to its Node in events.
func (r *PodReconciler) nodeRef() *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", Name: r.Config.NodeName, UID: types.UID(r.Config.NodeName)}
}

// podFor returns the pod a worker runs: the static pod of its name when
// there is one, else the API server's pod (never a mirror pod), as the
// cache holds it (readPod). A static pod removed from its source is not
// looked for in the API server.
func (r *PodReconciler) podFor(ctx context.Context, w podworkers.Work) (*corev1.Pod, error) {
	if p, ok := r.Static.Get(w.Key.Namespace, w.Key.Name); ok {
		return p, nil
	}
	if w.Pod != nil && staticpod.IsStatic(w.Pod) {
		return nil, apierrors.NewNotFound(corev1.Resource("pods"), w.Key.Name)
	}
	pod, err := r.readPod(ctx, types.NamespacedName{Namespace: w.Key.Namespace, Name: w.Key.Name})
	if err != nil {
		return nil, err
	}
	if staticpod.IsMirror(pod) {
		return nil, apierrors.NewNotFound(corev1.Resource("pods"), w.Key.Name)
	}
	return pod, nil
}

// olderStaticPod reports whether another pod of the static pod's full
// name (an earlier version of its manifest) still has a worker: as the
// kubelet, a static pod starts only once its predecessor has stopped
// (they share host ports, data directories and locks).
func (r *PodReconciler) olderStaticPod(pod *corev1.Pod) bool {
	for _, k := range r.Workers.Named(pod.Namespace, pod.Name) {
		if k.UID != pod.UID {
			return true
		}
	}
	return false
}

// mirrorRetryPeriod is how soon a static pod whose mirror pod could not be
// written (the API server is away, maybe restarting as a static pod
// itself) syncs again.
const mirrorRetryPeriod = 5 * time.Second

// writeStaticStatus keeps a static pod's status and, once the API server
// is reached, writes it to the pod's mirror pod, creating (or replacing)
// the mirror pod when it is missing or belongs to another version of the
// manifest. The API server not answering fails nothing: the static pod
// runs on, and its sync comes back soon to write the mirror pod.
func (r *PodReconciler) writeStaticStatus(ctx context.Context, s *podScope, want corev1.PodStatus) error {
	r.Static.SetStatus(s.pod.UID, want)
	s.pod.Status = want
	s.state.RecordStatus(want)
	if r.API == nil || !r.API.Ready() {
		return nil
	}
	switch err := r.writeMirror(ctx, s.pod, want); {
	case errors.Is(err, errMirrorPending):
		log.FromContext(ctx).V(1).Info("Mirror pod pending, retrying", "retryAfter", mirrorRetryPeriod)
		s.retryMirror = true
	case err != nil:
		log.FromContext(ctx).Info("Unable to write the mirror pod, retrying", "err", err.Error(), "retryAfter", mirrorRetryPeriod)
		s.retryMirror = true
	}
	return nil
}

// writeMirror makes the static pod's mirror pod current and writes its
// status when it differs.
func (r *PodReconciler) writeMirror(ctx context.Context, pod *corev1.Pod, want corev1.PodStatus) error {
	mirror, retry, err := r.ensureMirror(ctx, pod)
	if err != nil {
		return err
	}
	if mirror == nil {
		if retry {
			return errMirrorPending
		}
		return nil
	}
	if status.Equal(mirror.Status, want) {
		return nil
	}
	patch, err := status.Patch(mirror.UID, mirror.Status, want)
	if err != nil {
		return err
	}
	if err := r.Status().Patch(ctx, mirror, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		return fmt.Errorf("patching mirror pod status: %w", err)
	}
	metrics.PodStatusWrites.Inc()
	return nil
}

// errMirrorPending: the mirror pod cannot be made yet (the Node is not
// registered, or the one it replaces is not gone).
var errMirrorPending = errors.New("mirror pod pending")

// ensureMirror returns the current mirror pod of a static pod, creating
// it when there is none and replacing one of another version. It returns
// none, and retry, while the Node is not registered, the replaced mirror
// pod is not gone, or another pod holds the name (deleted when it is bound
// to this node, reported when it is not).
func (r *PodReconciler) ensureMirror(ctx context.Context, pod *corev1.Pod) (mirror *corev1.Pod, retry bool, err error) {
	mirror = &corev1.Pod{}
	switch err := r.Get(ctx, client.ObjectKeyFromObject(pod), mirror); {
	case apierrors.IsNotFound(err):
		mirror = nil
	case err != nil:
		return nil, false, fmt.Errorf("reading mirror pod: %w", err)
	}
	if mirror != nil {
		if !staticpod.IsMirror(mirror) {
			// A pod bound to this node holds the static pod's name: it
			// goes, and the mirror pod is made once it is gone.
			return nil, true, r.deleteNameHolder(ctx, pod, mirror)
		}
		if staticpod.MirrorCurrent(pod, mirror) {
			return mirror, false, nil
		}
		if err := r.deleteMirror(ctx, mirror); err != nil {
			return nil, false, err
		}
	}
	node := &corev1.Node{}
	switch err := r.Get(ctx, client.ObjectKey{Name: r.Config.NodeName}, node); {
	case apierrors.IsNotFound(err):
		return nil, true, nil
	case err != nil:
		return nil, false, fmt.Errorf("reading node: %w", err)
	}
	if r.nameHeld(pod) {
		return nil, true, nil
	}
	m := staticpod.Mirror(pod, node)
	if err := r.Create(ctx, m); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// The replaced one is still going, the cache is behind, or a
			// pod bound elsewhere holds the name.
			r.checkNameHolder(ctx, pod)
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("creating mirror pod: %w", err)
	}
	r.nameHolders.Delete(pod.UID)
	log.FromContext(ctx).Info("Created mirror pod", "mirrorUID", m.UID)
	return m, false, nil
}

// EventStaticPodNameConflict is the Warning Event of a pod that holds a
// static pod's name without being its mirror pod: on the holder when it is
// bound to this node (and deleted), on the static pod when it is not (and
// the node cannot delete it).
const EventStaticPodNameConflict = "StaticPodNameConflict"

// nameHolderRecheck is how long a static pod whose name a pod bound
// elsewhere holds waits before trying to create its mirror pod again.
const nameHolderRecheck = time.Minute

// nameHolder is a pod, bound to another node or to none, seen holding a
// static pod's name.
type nameHolder struct {
	uid  types.UID
	seen time.Time
}

// deleteNameHolder deletes holder, a pod bound to this node that is not
// the mirror pod of static although it has its name, and stops whatever of
// it runs: the name is the static pod's on this node (its full name keys
// the pod's worker, logs and checkpoint), and while the holder is there the
// API server never shows the static pod. The deletion is at once and of
// that pod only (its UID); nodelet never ran its spec.
func (r *PodReconciler) deleteNameHolder(ctx context.Context, static, holder *corev1.Pod) error {
	if holder.DeletionTimestamp != nil && holder.DeletionGracePeriodSeconds != nil && *holder.DeletionGracePeriodSeconds == 0 {
		return nil
	}
	if r.Workers.Has(holder.UID) {
		r.Admit.Remove(holder.UID)
		r.Workers.Gone(podworkers.Key{Namespace: holder.Namespace, Name: holder.Name, UID: holder.UID}, nil)
	}
	r.Recorder.Eventf(holder, corev1.EventTypeWarning, EventStaticPodNameConflict,
		"Pod %s has the name of static pod %s of node %s and is not its mirror pod: the node deletes it",
		klog.KObj(holder), static.UID, r.Config.NodeName)
	uid := holder.UID
	err := r.Delete(ctx, holder, client.GracePeriodSeconds(0), client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting pod %s that holds a static pod's name: %w", klog.KObj(holder), err)
	}
	log.FromContext(ctx).Info("Deleted a pod that holds a static pod's name", "holder", klog.KObj(holder), "holderUID", uid)
	return nil
}

// nameHeld reports whether a pod bound elsewhere was seen holding the
// static pod's name less than nameHolderRecheck ago: its mirror pod is
// not tried again before.
func (r *PodReconciler) nameHeld(static *corev1.Pod) bool {
	v, ok := r.nameHolders.Load(static.UID)
	return ok && r.Clock.Since(v.(nameHolder).seen) < nameHolderRecheck
}

// checkNameHolder reads the pod of the static pod's name from the API
// server after the mirror pod could not be created: one that is not a
// mirror pod and not bound to this node (which the node may not delete)
// gets a Warning Event on the static pod, once per holder, and holds the
// mirror pod back for nameHolderRecheck.
func (r *PodReconciler) checkNameHolder(ctx context.Context, static *corev1.Pod) {
	if r.APIReader == nil {
		return
	}
	holder := &corev1.Pod{}
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(static), holder)
	var uid types.UID
	var msg string
	switch {
	case err == nil && (staticpod.IsMirror(holder) || holder.Spec.NodeName == r.Config.NodeName):
		return // a replaced mirror pod still going, or the cache behind
	case err == nil:
		uid = holder.UID
		where := "bound to node " + holder.Spec.NodeName
		if holder.Spec.NodeName == "" {
			where = "not bound to a node"
		}
		msg = fmt.Sprintf("Pod %s (UID %s), %s, holds the name of this static pod's mirror pod: the static pod runs, but the API server does not show it until that pod is deleted",
			klog.KObj(holder), uid, where)
	case apierrors.IsForbidden(err):
		uid = "forbidden"
		// The Node authorizer lets a node read only its own pods.
		msg = fmt.Sprintf("Pod %s exists, is not bound to this node (a node may read only its own pods) and is not this static pod's mirror pod: the static pod runs, but the API server does not show it until that pod is deleted",
			klog.KObj(static))
	default:
		return
	}
	prev, seen := r.nameHolders.Load(static.UID)
	r.nameHolders.Store(static.UID, nameHolder{uid: uid, seen: r.Clock.Now()})
	if seen && prev.(nameHolder).uid == uid {
		return
	}
	r.Recorder.Event(static, corev1.EventTypeWarning, EventStaticPodNameConflict, msg)
	log.FromContext(ctx).Info("A pod bound elsewhere holds the mirror pod's name", "holderUID", uid)
}

// deleteMirror deletes a mirror pod at once, only that one (its UID). A
// mirror pod deleted with a grace period (kubectl delete) waits for its
// node as any pod bound to one does: nodelet ends the wait at once, as
// nothing of a mirror pod runs.
func (r *PodReconciler) deleteMirror(ctx context.Context, mirror *corev1.Pod) error {
	if mirror.DeletionGracePeriodSeconds != nil && *mirror.DeletionGracePeriodSeconds == 0 {
		return nil
	}
	uid := mirror.UID
	err := r.Delete(ctx, mirror, client.GracePeriodSeconds(0), client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting mirror pod: %w", err)
	}
	log.FromContext(ctx).Info("Deleted mirror pod", "pod", klog.KObj(mirror), "mirrorUID", uid)
	return nil
}

// deleteOrphanMirror deletes the mirror pod of a full name whose static
// pod is gone, once the API server is reached.
func (r *PodReconciler) deleteOrphanMirror(ctx context.Context, namespace, name string) error {
	if r.API == nil || !r.API.Ready() || !r.Static.Ready() {
		return nil
	}
	if _, ok := r.Static.Get(namespace, name); ok {
		return nil
	}
	mirror := &corev1.Pod{}
	switch err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, mirror); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading mirror pod: %w", err)
	}
	if !staticpod.IsMirror(mirror) {
		return nil
	}
	return r.deleteMirror(ctx, mirror)
}

// syncStatics asks for a sync of every static pod: once the API server is
// reached, they create their mirror pods and write their statuses.
func (r *PodReconciler) syncStatics() {
	if r.Static == nil {
		return
	}
	for _, p := range r.Static.List() {
		r.Workers.Update(r.Static.WithStatus(p))
	}
}

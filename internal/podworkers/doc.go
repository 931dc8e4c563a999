// Package podworkers runs each pod's syncs on a goroutine of its own, as the
// kubelet's pod workers do, so that slow work for one pod (an image pull, a
// postStart or preStop hook, a grace period waited out in StopContainer, a
// sandbox teardown) never holds the reconcile workers that every other pod
// needs. Unlike the kubelet's, a worker holds its goroutine only while it
// has a sync to run: between syncs (a running pod, most of its life) it is
// a few fields and perhaps a timer, which starts the goroutine again when
// it fires.
//
// The pod controller's Reconcile only hands the pod to its worker (Update)
// and returns. A worker runs one sync of its pod at a time, with the latest
// pod it was handed; updates that arrive during a sync are coalesced into
// one more sync after it. The sync reports when to run again
// (RequeueAfter), an error (retried with a per-pod exponential back-off),
// or that the pod is finished, which ends the worker. A periodic resync
// comes as the kubelet's: jittered up to half its period later, and on a
// whole second, so that the resyncs of a full node wake it about once a
// second rather than once per pod.
//
// The relister's events Nudge a worker instead of updating it: a nudge only
// says the runtime's objects of the pod changed. When the pod's last sync
// succeeded, Options.Settled may skip the sync a nudge asks for (the last
// sync saw the change already); updates, requeues and retries always sync.
//
// Deletion wins over everything in flight: when a pod gets a deletion
// timestamp, is removed from the API server (Gone), or its grace period is
// shortened, the context of a sync that was started for the live pod is
// cancelled, which cancels its image pull, container create and start; the
// next sync then terminates the pod. A sync that terminates is never
// cancelled by a later update but by a shorter grace period.
package podworkers

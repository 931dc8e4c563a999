package controller

import (
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/executor"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/pleg"
	"github.com/nodelet/nodelet/internal/podworkers"
)

// relisted is what a sync asks of the relister: how many relists have
// listed the runtime, and what the last one found of a pod.
type relisted interface {
	Listed() uint64
	Record(uid types.UID) *pleg.PodRecord
}

// settledSync is what the last sync of a pod saw, when that sync succeeded
// and what it saw asked for nothing more: the relists before its last look
// at the runtime (mark), the pod's runtime objects then, and that look.
type settledSync struct {
	mark    uint64
	objects map[string]string
	obs     *executor.Observed
}

// runtimeObjects returns the CRI state name of each object of rt by ID, as
// the relister names them.
func runtimeObjects(rt state.PodRuntime) map[string]string {
	out := make(map[string]string, len(rt.Sandboxes)+len(rt.Containers))
	for _, sb := range rt.Sandboxes {
		st := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
		if sb.Ready {
			st = runtimeapi.PodSandboxState_SANDBOX_READY
		}
		out[sb.ID] = st.String()
	}
	for _, c := range rt.Containers {
		st := runtimeapi.ContainerState_CONTAINER_UNKNOWN
		switch c.State {
		case state.ContainerCreated:
			st = runtimeapi.ContainerState_CONTAINER_CREATED
		case state.ContainerRunning:
			st = runtimeapi.ContainerState_CONTAINER_RUNNING
		case state.ContainerExited:
			st = runtimeapi.ContainerState_CONTAINER_EXITED
		}
		out[c.ID] = st.String()
	}
	return out
}

// sameObjects reports whether a relist's record of a pod holds exactly the
// objects, in the same states, that a sync saw.
func sameObjects(rec *pleg.PodRecord, seen map[string]string) bool {
	var objects map[string]pleg.ObjectState
	if rec != nil {
		objects = rec.Objects
	}
	if len(objects) != len(seen) {
		return false
	}
	for id, o := range objects {
		if st, ok := seen[id]; !ok || st != o.State {
			return false
		}
	}
	return true
}

// settled implements podworkers.Options.Settled: a sync the relister asked
// for, as of relist mark, has nothing to do when the pod's last sync
// succeeded with nothing left to do, and either looked at the runtime after
// that relist had listed it, or saw what the last relist holds of the pod.
// Syncs for the pod's own changes (its sandbox and containers starting)
// are so skipped; a change the last sync did not see never is.
func (r *PodReconciler) settled(w podworkers.Work, mark uint64) bool {
	if r.Relisted == nil {
		return false
	}
	v, ok := r.settledSyncs.Load(w.Key.UID)
	if !ok {
		return false
	}
	s := v.(settledSync)
	return mark <= s.mark || sameObjects(r.Relisted.Record(w.Key.UID), s.objects)
}

// unchanged returns the last look at the runtime of the pod's last sync
// (last, from settledSyncs; nil for none) when a relist made since holds
// the same objects in the same states, and it showed nothing of other pods
// of the name: the next sync then need not ask the runtime again. A change
// the relist has not seen yet nudges the pod's worker, and that sync looks.
func (r *PodReconciler) unchanged(uid types.UID, s *settledSync) (*executor.Observed, uint64, bool) {
	if s == nil || r.Relisted == nil || s.obs == nil ||
		len(s.obs.StaleSandboxes) > 0 || len(s.obs.StaleContainers) > 0 ||
		r.Relisted.Listed() <= s.mark {
		return nil, 0, false
	}
	if !sameObjects(r.Relisted.Record(uid), s.objects) {
		return nil, 0, false
	}
	return s.obs, s.mark, true
}

// listed returns the relists so far, before a look at the runtime.
func (r *PodReconciler) listed() uint64 {
	if r.Relisted == nil {
		return 0
	}
	return r.Relisted.Listed()
}

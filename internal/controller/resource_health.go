package controller

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/nodelet/nodelet/internal/dra"
	"github.com/nodelet/nodelet/internal/podworkers"
)

// resourceUpdateCapacity is how many pod events of device health changes
// wait for the pod controller; more are dropped (and logged), as the
// kubelet drops what its channel of resource updates does not hold.
const resourceUpdateCapacity = 100

// resourceUpdates turns the health changes of the node's devices (device
// plugins' and DRA drivers') into events for the pod controller, so that
// the pods holding the devices write their status again. Pods are known
// to the device managers by UID: their name comes from the pod workers
// (a pod without a worker runs nothing to report on).
type resourceUpdates struct {
	events chan event.TypedGenericEvent[*corev1.Pod]
	log    logr.Logger

	mu sync.Mutex
	// keys lists the pods that have a worker; claims the pods using a DRA
	// driver's devices. Either is nil until set up.
	keys   func() []podworkers.Key
	claims func(driver string, devices []dra.DeviceKey) []types.UID
}

// resourceUpdatesFor returns the node's resourceUpdates, made on first
// use.
func resourceUpdatesFor(d *Deps, log logr.Logger) *resourceUpdates {
	if d.resourceUpdates == nil {
		d.resourceUpdates = &resourceUpdates{events: make(chan event.TypedGenericEvent[*corev1.Pod], resourceUpdateCapacity), log: log}
	}
	return d.resourceUpdates
}

func (u *resourceUpdates) setKeys(keys func() []podworkers.Key) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.keys = keys
}

func (u *resourceUpdates) setClaims(claims func(driver string, devices []dra.DeviceKey) []types.UID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.claims = claims
}

// Events is the pod controller's end.
func (u *resourceUpdates) Events() <-chan event.TypedGenericEvent[*corev1.Pod] { return u.events }

// DevicesChanged is the DRA health cache's dra.HealthChangeFunc.
func (u *resourceUpdates) DevicesChanged(driver string, devices []dra.DeviceKey) {
	u.mu.Lock()
	claims := u.claims
	u.mu.Unlock()
	if claims != nil {
		u.Pods(claims(driver, devices))
	}
}

// Pods asks for a status write of each pod, by UID, that has a worker.
func (u *resourceUpdates) Pods(uids []types.UID) {
	if len(uids) == 0 {
		return
	}
	u.mu.Lock()
	keys := u.keys
	u.mu.Unlock()
	if keys == nil {
		return
	}
	for _, k := range keys() {
		if !slices.Contains(uids, k.UID) {
			continue
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name, UID: k.UID}}
		select {
		case u.events <- event.TypedGenericEvent[*corev1.Pod]{Object: pod}:
		default:
			u.log.Error(nil, "Too many device health updates waiting, dropping a pod's", "pod", k.Namespace+"/"+k.Name, "podUID", k.UID)
		}
	}
}

// allocatedResourcesStatus merges the allocatedResourcesStatus entries of
// the device managers, by container, sorted by name; nil for none.
func allocatedResourcesStatus(sources ...map[string][]corev1.ResourceStatus) map[string][]corev1.ResourceStatus {
	var out map[string][]corev1.ResourceStatus
	for _, src := range sources {
		for _, name := range slices.Sorted(maps.Keys(src)) {
			if len(src[name]) == 0 {
				continue
			}
			if out == nil {
				out = map[string][]corev1.ResourceStatus{}
			}
			out[name] = append(out[name], src[name]...)
		}
	}
	for _, list := range out {
		slices.SortStableFunc(list, func(a, b corev1.ResourceStatus) int { return strings.Compare(string(a.Name), string(b.Name)) })
	}
	return out
}

package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/nodeinfo"
)

// Admitter keeps the set of pods admitted to this node and decides, one pod
// at a time, whether a new one fits next to them.
type Admitter struct {
	reader client.Reader
	cfg    *v1alpha1.NodeletConfiguration
	nodes  nodeinfo.FactsReader
	// known returns a pod as an earlier run of the agent admitted it (with
	// the resources allocated to it), or nil when it did not.
	known func(pod *corev1.Pod) (*corev1.Pod, error)
	// Policy is what the node allows pods (sysctls, AppArmor).
	Policy admission.Policy
	// LoadedAppArmorProfiles reads the AppArmor profiles the kernel has
	// loaded, for the admissions that need them
	// (admission.Policy.NeedsLoadedProfiles), so that the decision itself
	// reads nothing; nil reads none.
	LoadedAppArmorProfiles func() (map[string]bool, error)
	// RuntimeFeatures reads what the runtime supports (cached), for every
	// decision; nil, or an error, supports nothing.
	RuntimeFeatures cri.FeatureSource
	// APIReady, when set, says whether the API server has been reached;
	// until then the pods it holds are not counted (only static pods run).
	APIReady func() bool
	// Pressure returns the node's pressure conditions as the eviction
	// manager reports them, for every decision; nil: none.
	Pressure func() []corev1.NodeConditionType
	// ShuttingDown reports whether the node shuts down (the node shutdown
	// manager): every new pod is then rejected; nil: never.
	ShuttingDown func() bool
	// Devices, when set, allocates the device plugins' devices a pod
	// asks for once it fits; a failed allocation rejects the pod.
	Devices DeviceAllocator

	mu       sync.Mutex
	primed   bool
	admitted map[types.UID]*corev1.Pod
	// requests is what the admitted pods request.
	requests admission.Requests
}

// DeviceAllocator hands device plugins' devices to an admitted pod's
// containers (deviceplugin.Manager).
type DeviceAllocator interface {
	// Allocate gives pod's containers their devices, first freeing those
	// of pods not in active; on error the pod holds none.
	Allocate(ctx context.Context, pod *corev1.Pod, active map[types.UID]bool) error
}

// ReasonUnexpectedAdmissionError is the kubelet's reason for a pod whose
// resources could not be allocated.
const ReasonUnexpectedAdmissionError = "UnexpectedAdmissionError"

// NewAdmitter returns an Admitter reading the node and its pods from reader.
func NewAdmitter(reader client.Reader, cfg *v1alpha1.NodeletConfiguration, known func(*corev1.Pod) (*corev1.Pod, error)) *Admitter {
	return &Admitter{
		reader: reader, cfg: cfg, known: known,
		nodes:    nodeinfo.FactsReader{Reader: reader, Config: cfg},
		admitted: map[types.UID]*corev1.Pod{},
	}
}

// Admitted reports whether the pod was admitted.
func (a *Admitter) Admitted(uid types.UID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.admitted[uid]
	return ok
}

// Add records a pod as admitted without checking it (it runs already),
// with the resources allocated to it.
func (a *Admitter) Add(pod *corev1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.record(pod)
}

// record records pod as admitted, as it is now. a.mu is held.
func (a *Admitter) record(pod *corev1.Pod) {
	p := pod.DeepCopy()
	a.admitted[p.UID] = p
	a.requests.Set(p)
}

// UIDs returns the admitted pods.
func (a *Admitter) UIDs() []types.UID {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Collect(maps.Keys(a.admitted))
}

// Pods returns the admitted pods, as they were admitted: the pods that run
// or have yet to finish.
func (a *Admitter) Pods() []*corev1.Pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(a.admitted))
	for _, p := range a.admitted {
		out = append(out, p.DeepCopy())
	}
	return out
}

// Remove forgets a pod that finished or is gone.
func (a *Admitter) Remove(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.admitted, uid)
	a.requests.Forget(uid)
}

// nodeAndOthers primes the admitted pods and returns the node and the
// admitted pods a decision about pod weighs it against. a.mu is held. The
// node is the cache's own: the decision reads it and keeps nothing of it.
func (a *Admitter) nodeAndOthers(ctx context.Context, pod *corev1.Pod) (*corev1.Node, []*corev1.Pod, error) {
	if err := a.prime(ctx, pod.UID); err != nil {
		return nil, nil, err
	}
	nodes := a.nodes
	nodes.Ready = a.APIReady
	node, err := nodes.SharedNode(ctx)
	if err != nil {
		return nil, nil, err
	}
	others := make([]*corev1.Pod, 0, len(a.admitted))
	for _, p := range a.admitted {
		others = append(others, p)
	}
	return node, others, nil
}

// Admit decides whether pod fits on the node next to the admitted pods and
// records it when it does. Decisions are serialized so two pods cannot both
// take the last slot.
func (a *Admitter) Admit(ctx context.Context, pod *corev1.Pod) (admission.Result, error) {
	if a.ShuttingDown != nil {
		if res := admission.AdmitShuttingDown(a.ShuttingDown()); !res.Admit {
			return res, nil
		}
	}
	if a.Pressure != nil {
		if res := admission.AdmitUnderPressure(pod, a.Pressure()); !res.Admit {
			return res, nil
		}
	}
	policy := a.Policy
	if policy.NeedsLoadedProfiles(pod) && a.LoadedAppArmorProfiles != nil {
		policy.AppArmor.Loaded, policy.AppArmor.LoadedErr = a.LoadedAppArmorProfiles()
	}
	policy.Runtime = a.runtimeFeatures(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	node, others, err := a.nodeAndOthers(ctx, pod)
	if err != nil {
		return admission.Result{}, err
	}
	policy.Requests = &a.requests
	res := policy.Admit(pod, node, others)
	if res.Admit && a.Devices != nil {
		active := make(map[types.UID]bool, len(a.admitted))
		for uid := range a.admitted {
			active[uid] = true
		}
		if err := a.Devices.Allocate(ctx, pod, active); err != nil {
			return admission.Result{Reason: ReasonUnexpectedAdmissionError,
				Message: fmt.Sprintf("Allocate failed due to %v, which is unexpected", err)}, nil
		}
	}
	if res.Admit {
		a.record(pod)
	}
	return res, nil
}

// runtimeFeatures is what admission needs of the runtime's features; a
// runtime that cannot say supports nothing.
func (a *Admitter) runtimeFeatures(ctx context.Context) admission.RuntimeFeatures {
	if a.RuntimeFeatures == nil {
		return admission.RuntimeFeatures{}
	}
	f, err := a.RuntimeFeatures.Features(ctx)
	if err != nil {
		log.FromContext(ctx).V(1).Info("Runtime features unknown, admitting as if it supports none", "err", err)
		return admission.RuntimeFeatures{}
	}
	return admission.RuntimeFeatures{SupplementalGroupsPolicy: f.SupplementalGroupsPolicy}
}

// prime adds, once, the pods that an earlier run of the agent admitted, so
// that a restart cannot let a new pod take their place.
func (a *Admitter) prime(ctx context.Context, self types.UID) error {
	if a.primed {
		return nil
	}
	if a.APIReady != nil && !a.APIReady() {
		// Static pods before the API server is reached: the pods it
		// holds are counted once it is, before any of them is admitted.
		return nil
	}
	var pods corev1.PodList
	if err := a.reader.List(ctx, &pods); err != nil {
		return fmt.Errorf("listing this node's pods: %w", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.UID == self || isTerminal(p) || p.Spec.NodeName != a.cfg.NodeName {
			continue
		}
		admitted, err := a.known(p)
		if err != nil {
			return fmt.Errorf("looking up pod %s: %w", klog.KObj(p), err)
		}
		if admitted != nil {
			a.record(admitted)
		}
	}
	a.primed = true
	return nil
}

// Resize decides whether the resources an admitted pod's spec asks for fit
// on the node next to the other admitted pods, with the resources
// allocated to them (admission.FitsResize), and records them as the pod's
// when they do. Decisions are serialized with admissions.
func (a *Admitter) Resize(ctx context.Context, pod *corev1.Pod) (admission.Result, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	node, others, err := a.nodeAndOthers(ctx, pod)
	if err != nil {
		return admission.Result{}, err
	}
	res := admission.FitsResize(pod, node, others, &a.requests)
	if res.Admit {
		a.record(pod)
	}
	return res, nil
}

package controllers

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/admission"
)

// Admitter keeps the set of pods admitted to this node and decides, one pod
// at a time, whether a new one fits next to them.
type Admitter struct {
	reader client.Reader
	cfg    *v1alpha1.NodeletConfiguration
	// known reports whether a pod was admitted by an earlier run of the
	// agent (it has a checkpoint).
	known func(uid types.UID) bool

	mu       sync.Mutex
	primed   bool
	admitted map[types.UID]*corev1.Pod
}

// NewAdmitter returns an Admitter reading the node and its pods from reader.
func NewAdmitter(reader client.Reader, cfg *v1alpha1.NodeletConfiguration, known func(types.UID) bool) *Admitter {
	return &Admitter{reader: reader, cfg: cfg, known: known, admitted: map[types.UID]*corev1.Pod{}}
}

// Admitted reports whether the pod was admitted.
func (a *Admitter) Admitted(uid types.UID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.admitted[uid]
	return ok
}

// Add records a pod as admitted without checking it (it runs already).
func (a *Admitter) Add(pod *corev1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.admitted[pod.UID] = pod.DeepCopy()
}

// Remove forgets a pod that finished or is gone.
func (a *Admitter) Remove(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.admitted, uid)
}

// Admit decides whether pod fits on the node next to the admitted pods and
// records it when it does. Decisions are serialised so two pods cannot both
// take the last slot.
func (a *Admitter) Admit(ctx context.Context, pod *corev1.Pod) (admission.Result, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.prime(ctx, pod.UID); err != nil {
		return admission.Result{}, err
	}
	node, err := a.node(ctx)
	if err != nil {
		return admission.Result{}, err
	}
	others := make([]*corev1.Pod, 0, len(a.admitted))
	for _, p := range a.admitted {
		others = append(others, p)
	}
	res := admission.Admit(pod, node, others)
	if res.Admit {
		a.admitted[pod.UID] = pod.DeepCopy()
	}
	return res, nil
}

// prime adds, once, the pods that an earlier run of the agent admitted, so
// that a restart cannot let a new pod take their place.
func (a *Admitter) prime(ctx context.Context, self types.UID) error {
	if a.primed {
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
		if p.Status.StartTime != nil || a.known(p.UID) {
			a.admitted[p.UID] = p.DeepCopy()
		}
	}
	a.primed = true
	return nil
}

// node returns this node's Node from the cache, or, before it is
// registered, the Node nodelet would register, as the kubelet does.
func (a *Admitter) node(ctx context.Context) (*corev1.Node, error) {
	node := &corev1.Node{}
	err := a.reader.Get(ctx, client.ObjectKey{Name: a.cfg.NodeName}, node)
	if err == nil {
		return node, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading node %s: %w", a.cfg.NodeName, err)
	}
	node = &corev1.Node{}
	node.Name = a.cfg.NodeName
	node.Labels = map[string]string{
		corev1.LabelHostname: a.cfg.NodeName, corev1.LabelOSStable: runtime.GOOS, corev1.LabelArchStable: runtime.GOARCH,
	}
	for k, v := range a.cfg.NodeLabels {
		node.Labels[k] = v
	}
	for _, t := range a.cfg.RegisterWithTaints {
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	node.Status.Allocatable = corev1.ResourceList{
		corev1.ResourcePods: *resource.NewQuantity(int64(a.cfg.MaxPods), resource.DecimalSI),
	}
	return node, nil
}

// NodeFacts reads this node's Node once from the cache: its InternalIPs
// (or the configured nodeIP) and its allocatable resources (nil before it
// is registered).
func (a *Admitter) NodeFacts(ctx context.Context) (hostIPs []string, allocatable corev1.ResourceList) {
	node := &corev1.Node{}
	if err := a.reader.Get(ctx, client.ObjectKey{Name: a.cfg.NodeName}, node); err == nil {
		for _, addr := range node.Status.Addresses {
			if addr.Type == corev1.NodeInternalIP {
				hostIPs = append(hostIPs, addr.Address)
			}
		}
		allocatable = node.Status.Allocatable
	}
	if len(hostIPs) == 0 && a.cfg.NodeIP != "" {
		hostIPs = []string{a.cfg.NodeIP}
	}
	return hostIPs, allocatable
}

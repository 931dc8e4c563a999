package nodeinfo

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/api/v1alpha1"
)

// ControllerManagedAttachDetachAnnotation on a Node tells the attach/detach
// controller that it attaches and detaches the node's volumes, as the
// kubelet's enableControllerAttachDetach (which nodelet always has) asks it
// to: without it, the controller leaves the node's volumes alone.
const ControllerManagedAttachDetachAnnotation = "volumes.kubernetes.io/controller-managed-attach-detach"

// Annotations returns the annotations nodelet keeps on its Node.
func Annotations() map[string]string {
	return map[string]string{ControllerManagedAttachDetachAnnotation: "true"}
}

// NewNode returns the Node nodelet registers for cfg: its labels (see
// Labels) and annotations (see Annotations), its registration taints, and,
// so that admission can run before the first status is written,
// allocatable pods of maxPods.
func NewNode(cfg *v1alpha1.NodeletConfiguration) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        cfg.NodeName,
			Labels:      Labels(cfg.NodeName, cfg.NodeLabels),
			Annotations: Annotations(),
		},
		Spec: corev1.NodeSpec{Taints: registrationTaints(cfg.RegisterWithTaints), ProviderID: cfg.ProviderID},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourcePods: *resource.NewQuantity(int64(cfg.MaxPods), resource.DecimalSI),
		}},
	}
}

// registrationTaints copies the configured taints, so that the Node
// nodelet registers never shares memory with its configuration.
func registrationTaints(taints []corev1.Taint) []corev1.Taint {
	out := make([]corev1.Taint, len(taints))
	for i := range taints {
		taints[i].DeepCopyInto(&out[i])
	}
	return out
}

// Facts are the properties of this node that pods' configs and statuses
// depend on.
type Facts struct {
	// HostIPs are the Node's InternalIPs, or the configured nodeIP before
	// the Node reports any.
	HostIPs []string
	// Allocatable is the Node's allocatable resources; nil before the Node
	// is registered.
	Allocatable corev1.ResourceList
}

// FactsReader reads this node's Node, and Facts from it, in a (cached)
// reader.
type FactsReader struct {
	Reader client.Reader
	Config *v1alpha1.NodeletConfiguration
	// Ready, when set, says whether the API server has been reached;
	// before, the Node is taken as not registered yet (a node that starts
	// its own control plane runs its static pods meanwhile).
	Ready func() bool
}

// get reads the Node as the reader holds it: a cache hands over its own
// object, not a deep copy, which callers only read. Before the API server
// is reached the Node is not found.
func (f FactsReader) get(ctx context.Context, node *corev1.Node) error {
	if f.Ready != nil && !f.Ready() {
		return apierrors.NewNotFound(corev1.Resource("nodes"), f.Config.NodeName)
	}
	return f.Reader.Get(ctx, client.ObjectKey{Name: f.Config.NodeName}, node, client.UnsafeDisableDeepCopy)
}

// SharedNode returns this node's Node, or, before it is registered, the
// Node nodelet would register (NewNode), as the kubelet admits against. A
// cache hands over its own Node, the one every reader of the cache shares,
// without a copy: the caller only reads it and keeps nothing of it.
// Admission weighs every pod against the Node, whose image list alone is
// tens of KB on a node that holds many images.
func (f FactsReader) SharedNode(ctx context.Context) (*corev1.Node, error) {
	node := &corev1.Node{}
	err := f.get(ctx, node)
	switch {
	case err == nil:
		return node, nil
	case apierrors.IsNotFound(err):
		return NewNode(f.Config), nil
	}
	return nil, fmt.Errorf("reading node %s: %w", f.Config.NodeName, err)
}

// Labels returns a copy of the labels of this node's Node, or, before it is
// registered, of those it would register with.
func (f FactsReader) Labels(ctx context.Context) (map[string]string, error) {
	node, err := f.SharedNode(ctx)
	if err != nil {
		return nil, err
	}
	return maps.Clone(node.Labels), nil
}

// Facts reads the Node once. A Node that is not registered yet gives the
// configured nodeIP and no allocatable resources.
//
// Every pod's start and status write read the Facts, so a cache is asked
// for its own Node, not a deep copy of it (with its image list): Facts
// only reads that Node, and copies what it returns.
func (f FactsReader) Facts(ctx context.Context) (Facts, error) {
	var facts Facts
	node := &corev1.Node{}
	err := f.get(ctx, node)
	switch {
	case err == nil:
		for _, addr := range node.Status.Addresses {
			if addr.Type == corev1.NodeInternalIP {
				facts.HostIPs = append(facts.HostIPs, addr.Address)
			}
		}
		facts.Allocatable = node.Status.Allocatable.DeepCopy()
	case !apierrors.IsNotFound(err):
		return Facts{}, fmt.Errorf("reading node %s: %w", f.Config.NodeName, err)
	}
	if len(facts.HostIPs) == 0 && f.Config.NodeIP != "" {
		facts.HostIPs = []string{f.Config.NodeIP}
	}
	return facts, nil
}

package nodeinfo

import (
	"context"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/nodelet/nodelet/api/v1alpha1"
)

func factsConfig() *v1alpha1.NodeletConfiguration {
	return &v1alpha1.NodeletConfiguration{
		NodeName:           "n1",
		NodeIP:             "10.0.0.9",
		MaxPods:            42,
		NodeLabels:         map[string]string{corev1.LabelHostname: "spoofed", "team": "a"},
		RegisterWithTaints: []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule}},
	}
}

func TestNewNodeWellKnownLabelsWin(t *testing.T) {
	n := NewNode(factsConfig())
	if got := n.Labels[corev1.LabelHostname]; got != "n1" {
		t.Errorf("hostname label = %q, want the node name", got)
	}
	if n.Labels["team"] != "a" || len(n.Spec.Taints) != 1 {
		t.Errorf("labels %v taints %v: configured ones missing", n.Labels, n.Spec.Taints)
	}
	if got := n.Status.Allocatable.Pods().Value(); got != 42 {
		t.Errorf("allocatable pods = %d, want maxPods", got)
	}
	if got := n.Annotations[ControllerManagedAttachDetachAnnotation]; got != "true" {
		t.Errorf("attach/detach annotation = %q, want true: the attach/detach controller ignores the node's volumes without it", got)
	}
}

func TestFactsReader(t *testing.T) {
	cfg := factsConfig()
	ctx := context.Background()
	empty := FactsReader{Reader: fake.NewClientBuilder().Build(), Config: cfg}
	facts, err := empty.Facts(ctx)
	if err != nil || !slices.Equal(facts.HostIPs, []string{"10.0.0.9"}) || facts.Allocatable != nil {
		t.Errorf("before registration: %+v, %v; want the configured nodeIP and no allocatable", facts, err)
	}
	if node, err := empty.SharedNode(ctx); err != nil || node.Labels[corev1.LabelHostname] != "n1" {
		t.Errorf("SharedNode before registration = %v, %v; want the Node to register", node, err)
	}
	registered := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeHostName, Address: "n1"},
				{Type: corev1.NodeInternalIP, Address: "192.0.2.1"},
				{Type: corev1.NodeInternalIP, Address: "2001:db8::1"},
			},
			Allocatable: corev1.ResourceList{corev1.ResourcePods: *NewNode(cfg).Status.Allocatable.Pods()},
		},
	}
	r := FactsReader{Reader: fake.NewClientBuilder().WithObjects(registered).Build(), Config: cfg}
	facts, err = r.Facts(ctx)
	if err != nil || !slices.Equal(facts.HostIPs, []string{"192.0.2.1", "2001:db8::1"}) || facts.Allocatable.Pods().Value() != 42 {
		t.Errorf("registered: %+v, %v; want the InternalIPs and allocatable", facts, err)
	}
}

// sharingReader holds one Node and hands it out without a copy when the
// caller asks for none (client.UnsafeDisableDeepCopy), as controller-
// runtime's cache does; otherwise it hands out a deep copy, and counts it.
type sharingReader struct {
	client.Reader
	node   *corev1.Node
	copies *int
}

func (s sharingReader) Get(_ context.Context, _ client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	var o client.GetOptions
	o.ApplyOptions(opts)
	if o.UnsafeDisableDeepCopy != nil && *o.UnsafeDisableDeepCopy {
		*obj.(*corev1.Node) = *s.node
		return nil
	}
	*s.copies++
	s.node.DeepCopyInto(obj.(*corev1.Node))
	return nil
}

func TestFactsReadTheCachedNodeWithoutCopyingItAndReturnCopies(t *testing.T) {
	cfg := factsConfig()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: corev1.NodeStatus{
			Addresses:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.1"}},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		},
	}
	copies := 0
	r := FactsReader{Reader: sharingReader{node: node, copies: &copies}, Config: cfg}
	facts, err := r.Facts(context.Background())
	if err != nil || !slices.Equal(facts.HostIPs, []string{"192.0.2.1"}) || facts.Allocatable.Cpu().Value() != 2 {
		t.Fatalf("Facts = %+v, %v; want the Node's InternalIP and allocatable", facts, err)
	}
	if copies != 0 {
		t.Errorf("Facts deep-copied the Node %d times; it only reads it", copies)
	}
	facts.Allocatable[corev1.ResourceCPU] = resource.MustParse("64")
	facts.HostIPs[0] = "203.0.113.1"
	if got := node.Status.Allocatable.Cpu().Value(); got != 2 {
		t.Errorf("changing the returned allocatable changed the cached Node's to %d CPUs", got)
	}
	if got := node.Status.Addresses[0].Address; got != "192.0.2.1" {
		t.Errorf("changing the returned host IPs changed the cached Node's address to %s", got)
	}
}

func TestSharedNodeAndLabelsReadTheCachedNodeWithoutCopyingIt(t *testing.T) {
	cfg := factsConfig()
	ctx := context.Background()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"}},
		Status: corev1.NodeStatus{
			Images: []corev1.ContainerImage{{Names: []string{"busybox"}, SizeBytes: 1}},
		},
	}
	copies := 0
	r := FactsReader{Reader: sharingReader{node: node, copies: &copies}, Config: cfg}
	shared, err := r.SharedNode(ctx)
	if err != nil || shared.Labels["zone"] != "a" || len(shared.Status.Images) != 1 {
		t.Fatalf("SharedNode = %v, %v; want the cached Node", shared, err)
	}
	labels, err := r.Labels(ctx)
	if err != nil || !maps.Equal(labels, map[string]string{"zone": "a"}) {
		t.Fatalf("Labels = %v, %v; want the cached Node's", labels, err)
	}
	if copies != 0 {
		t.Errorf("SharedNode and Labels deep-copied the Node %d times", copies)
	}
	labels["zone"] = "b"
	if got := node.Labels["zone"]; got != "a" {
		t.Errorf("changing the returned labels changed the cached Node's to %q", got)
	}

	empty := FactsReader{Reader: fake.NewClientBuilder().Build(), Config: cfg}
	if labels, err := empty.Labels(ctx); err != nil || labels[corev1.LabelHostname] != "n1" {
		t.Errorf("Labels before registration = %v, %v; want those the Node registers with", labels, err)
	}
}

func TestNewNodeCopiesTaints(t *testing.T) {
	cfg := factsConfig()
	n := NewNode(cfg)
	cfg.RegisterWithTaints[0].Key = "changed"
	if n.Spec.Taints[0].Key != "k" {
		t.Errorf("the Node's taint changed with the configuration: %v", n.Spec.Taints)
	}
}

package controller

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/nodelet/nodelet/internal/podcache"
)

// informerOf is a cache.Informers whose every informer is inf.
type informerOf struct {
	cache.Informers
	inf cache.Informer
}

func (i informerOf) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return i.inf, nil
}

// TestStatusPatchLeavesTheCachedPodAlone: a sync works on the cache's own
// pod; the status patch it writes decodes the API server's answer into a
// copy, and the cached object keeps its status.
func TestStatusPatchLeavesTheCachedPodAlone(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1"},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	inf := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.Pod{}, 0, toolscache.Indexers{})
	if err := inf.GetIndexer().Add(pod.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	r := &PodReconciler{
		Client: fakeclient.NewClientBuilder().WithObjects(pod.DeepCopy()).WithStatusSubresource(&corev1.Pod{}).Build(),
		shared: podcache.NewShared(informerOf{inf: inf}),
	}
	cached, err := r.readPod(context.Background(), client.ObjectKeyFromObject(pod))
	if err != nil {
		t.Fatal(err)
	}
	s := &podScope{pod: cached}
	if err := r.patchStatus(context.Background(), s, corev1.PodStatus{Phase: corev1.PodRunning}); err != nil {
		t.Fatalf("patchStatus: %v", err)
	}
	if cached.Status.Phase != corev1.PodPending {
		t.Errorf("the cached pod's phase is %q after the patch, want it left Pending", cached.Status.Phase)
	}
	if s.pod == cached || s.pod.Status.Phase != corev1.PodRunning {
		t.Errorf("the scope's pod is the cached one or not the API server's answer (phase %q)", s.pod.Status.Phase)
	}
}

package controller_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/agent"
)

// bareManager starts a manager for node name with no reconcilers, only
// the informers the reconcilers would start, as its node authenticates.
func bareManager(name, metricsAddr string) ctrl.Manager {
	GinkgoHelper()
	cfg := &v1alpha1.NodeletConfiguration{NodeName: name, HealthzBindAddress: "0", MetricsBindAddress: metricsAddr}
	v1alpha1.SetDefaults(cfg)
	Expect(v1alpha1.Validate(cfg)).To(BeEmpty())
	mgr, err := agent.NewManager(nodeConfig(name), cfg)
	Expect(err).NotTo(HaveOccurred())
	for _, obj := range []client.Object{&corev1.Pod{}, &corev1.Node{}} {
		_, err := mgr.GetCache().GetInformer(context.Background(), obj)
		Expect(err).NotTo(HaveOccurred())
	}
	runManager(mgr)
	return mgr
}

func boundPod(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:                     node,
			AutomountServiceAccountToken: ptr.To(false),
			Containers:                   []corev1.Container{{Name: "c", Image: "busybox"}},
		},
	}
}

var _ = Describe("The node-scoped manager", func() {
	It("caches only its own node's pods and Node, side by side with another node's manager", func(ctx SpecContext) {
		nodeA, nodeB := nodeName(), nodeName()
		ns := "cache-" + utilrand.String(6)
		Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Expect(admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}})).To(Succeed())
		for _, n := range []string{nodeA, nodeB} {
			Expect(admin.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})).To(Succeed())
			Expect(admin.Create(ctx, boundPod(ns, "pod-on-"+n, n))).To(Succeed())
		}
		mgrA, mgrB := bareManager(nodeA, "0"), bareManager(nodeB, "0")

		for _, tc := range []struct {
			mgr         ctrl.Manager
			self, other string
		}{{mgrA, nodeA, nodeB}, {mgrB, nodeB, nodeA}} {
			c := tc.mgr.GetClient()
			Eventually(func(g Gomega) {
				var pods corev1.PodList
				g.Expect(c.List(ctx, &pods)).To(Succeed())
				var names []string
				for _, p := range pods.Items {
					names = append(names, p.Name)
				}
				g.Expect(names).To(ConsistOf("pod-on-" + tc.self))
			}).WithTimeout(startTimeout).Should(Succeed())
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pod-on-" + tc.other}, &corev1.Pod{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the other node's pod must not be visible: %v", err)

			var nodes corev1.NodeList
			Expect(c.List(ctx, &nodes)).To(Succeed())
			Expect(nodes.Items).To(HaveLen(1))
			Expect(nodes.Items[0].Name).To(Equal(tc.self))
			Expect(nodes.Items[0].ManagedFields).To(BeEmpty(), "managedFields are stripped in the cache")
		}

		By("refusing a read that would need a cluster-wide informer")
		err := mgrA.GetCache().List(ctx, &corev1.ServiceList{})
		Expect(err).To(MatchError(ContainSubstring("not cached")))
		var notCached *cache.ErrResourceNotCached
		Expect(errors.As(err, &notCached)).To(BeTrue())

		By("reading Secrets straight from the API server, where the Node authorizer refuses a list")
		err = mgrA.GetClient().List(ctx, &corev1.SecretList{}, client.InNamespace(ns))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "listing secrets as a node: %v", err)
		// A pod bound to another node is not this node's business either.
		err = mgrA.GetClient().Delete(ctx, boundPod(ns, "pod-on-"+nodeB, nodeB))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "deleting another node's pod: %v", err)
	})

	It("serves /metrics on the metrics address, and not /configz, which only the node API serves, behind its authorization", func(ctx SpecContext) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		addr := l.Addr().String()
		Expect(l.Close()).To(Succeed())
		bareManager(nodeName(), addr)

		get := func(g Gomega, path string) int {
			resp, err := http.Get(fmt.Sprintf("http://%s%s", addr, path))
			g.Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			return resp.StatusCode
		}
		Eventually(func(g Gomega) {
			g.Expect(get(g, "/metrics")).To(Equal(http.StatusOK))
		}).WithTimeout(startTimeout).Should(Succeed())
		Expect(get(Default, "/configz")).To(Equal(http.StatusNotFound))
		Expect(get(Default, "/debug/pprof/")).To(Equal(http.StatusNotFound))
	})
})

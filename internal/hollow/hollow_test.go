package hollow_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/nodelet/nodelet/internal/hollow"
	"github.com/nodelet/nodelet/test/utils"
)

const (
	// readyTimeout bounds the hollow nodes registering and turning Ready.
	readyTimeout = time.Minute
	// podTimeout bounds a pod running on a fake runtime, where every CRI
	// call returns at once.
	podTimeout = 30 * time.Second
	// stopTimeout bounds the fleet returning after its context ends.
	stopTimeout = 40 * time.Second
)

func TestHollow(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Hollow Suite")
}

var _ = Describe("Hollow nodes", func() {
	It("run three nodes in one process, each Ready, tainted, with a pod Running, as their own node users", func(ctx SpecContext) {
		ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
		api := utils.MustStartAPIServer(ctx)
		admin, err := api.AdminClient()
		Expect(err).NotTo(HaveOccurred())
		caCert, err := os.ReadFile(api.ClientCA.CertFile)
		Expect(err).NotTo(HaveOccurred())
		caKey, err := os.ReadFile(api.ClientCA.KeyFile)
		Expect(err).NotTo(HaveOccurred())
		signer, err := hollow.NewNodeSigner(rest.AnonymousClientConfig(api.Config), caCert, caKey)
		Expect(err).NotTo(HaveOccurred())

		names := hollow.NodeNames("hollow", 3)
		fleet, err := hollow.New(hollow.Options{Nodes: names, RootDir: GinkgoT().TempDir(), Credentials: signer.Credentials})
		Expect(err).NotTo(HaveOccurred())
		runCtx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- fleet.Run(runCtx) }()
		DeferCleanup(func() {
			cancel()
			Eventually(done).WithTimeout(stopTimeout).Should(Receive(BeNil()))
		})

		ns := "hollow"
		Expect(utils.CreateNamespace(ctx, admin, ns)).To(Succeed())
		for _, n := range names {
			pod := utils.BusyboxPod(ns, "pod-on-"+n, n, "sleep", "3600")
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, hollow.Toleration())
			Expect(admin.Create(ctx, pod)).To(Succeed())
		}
		for _, n := range names {
			Eventually(func(g Gomega) {
				node := &corev1.Node{}
				g.Expect(admin.Get(ctx, client.ObjectKey{Name: n}, node)).To(Succeed())
				g.Expect(utils.NodeReady(node)).To(BeTrue(), "node %s is not Ready", n)
				g.Expect(node.Spec.Taints).To(ContainElement(SatisfyAll(
					HaveField("Key", hollow.TaintKey), HaveField("Value", "true"),
					HaveField("Effect", corev1.TaintEffectNoSchedule))), "node %s's taints", n)
			}).WithTimeout(readyTimeout).Should(Succeed())
			Eventually(func(g Gomega) {
				p := utils.GetPod(ctx, admin, ns, "pod-on-"+n)(g)
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
				g.Expect(utils.PodReady(p)).To(BeTrue())
			}).WithTimeout(podTimeout).Should(Succeed(), fmt.Sprintf("the pod on %s", n))
		}

		By("keeping each node to its own pods, as the Node authorizer does")
		for i, node := range fleet.Nodes {
			var pods corev1.PodList
			Expect(node.Manager.GetClient().List(ctx, &pods)).To(Succeed())
			Expect(pods.Items).To(HaveLen(1))
			Expect(pods.Items[0].Spec.NodeName).To(Equal(names[i]))
			sandboxes, err := node.Runtime.ListPodSandbox(ctx, nil)
			Expect(err).NotTo(HaveOccurred())
			Expect(sandboxes).To(HaveLen(1), "node %s's fake runtime", names[i])
		}
	})
})

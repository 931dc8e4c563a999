package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remoteCRI "k8s.io/cri-client/pkg"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"

	"example.com/nodelet-prepuller/prepuller"
)

var _ = Describe("The pre-puller example as a node's agent", Ordered, func() {
	const nodeName = "prepuller-e2e"
	var (
		agent  *utils.Nodelet
		admin  client.Client
		images internalapi.ImageManagerService
		// good is an image of the registry; missing is not.
		good, missing string
	)

	BeforeAll(func(ctx SpecContext) {
		var err error
		admin, err = apiServer.AdminClient()
		Expect(err).NotTo(HaveOccurred(), "creating the admin client")
		images = newImageClient(ctx)
		good = pushImage(ctx, "prepull-good")
		missing = registry.Host() + "/prepull-does-not-exist:1"
		agent, err = utils.StartNodelet(ctx, utils.NodeletOptions{
			NodeName:   nodeName,
			API:        apiServer,
			Containerd: ctrd,
			Binary:     binary,
			Env:        []string{prepuller.EnvInterval + "=" + recheckInterval.String()},
		})
		if agent != nil {
			DeferCleanup(agent.Cleanup)
		}
		Expect(err).NotTo(HaveOccurred(), "starting the example as the node's agent")
	})

	JustAfterEach(func() {
		if CurrentSpecReport().Failed() && agent != nil {
			GinkgoWriter.Printf("agent log (%s):\n%s\n", agent.LogPath, agent.LogTail(100))
		}
	})

	// present reports whether the runtime holds image, asking it directly.
	present := func(ctx context.Context, g Gomega, image string) bool {
		st, err := images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: image}, false)
		g.Expect(err).NotTo(HaveOccurred(), "image status of %s", image)
		return st.GetImage() != nil
	}
	getNode := func(ctx context.Context, g Gomega) *corev1.Node {
		node := &corev1.Node{}
		g.Expect(admin.Get(ctx, types.NamespacedName{Name: nodeName}, node)).To(Succeed())
		return node
	}
	condition := func(ctx context.Context, g Gomega, t corev1.NodeConditionType) *corev1.NodeCondition {
		return prepuller.FindCondition(getNode(ctx, g).Status.Conditions, t)
	}
	// events returns the Node's Events of reason whose message names image.
	events := func(ctx context.Context, g Gomega, reason, image string) []corev1.Event {
		var list corev1.EventList
		g.Expect(admin.List(ctx, &list)).To(Succeed())
		var out []corev1.Event
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == nodeName && e.Reason == reason &&
				strings.Contains(e.Message, `"`+image+`"`) {
				out = append(out, e)
			}
		}
		return out
	}
	// pulls counts the Pulled Events of image, repeats included.
	pulls := func(ctx context.Context, g Gomega, image string) int32 {
		var n int32
		for _, e := range events(ctx, g, prepuller.EventPulled, image) {
			n += max(e.Count, 1)
		}
		return n
	}
	annotate := func(ctx context.Context, images ...string) {
		GinkgoHelper()
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
			prepuller.Annotation: strings.Join(images, ", "),
		}}})
		Expect(err).NotTo(HaveOccurred())
		node := &corev1.Node{}
		node.Name = nodeName
		Expect(admin.Patch(ctx, node, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	}
	expectReady := func(g Gomega, node *corev1.Node) {
		ready := prepuller.FindCondition(node.Status.Conditions, corev1.NodeReady)
		g.Expect(ready).NotTo(BeNil(), "no Ready condition")
		g.Expect(ready.Status).To(Equal(corev1.ConditionTrue), "Ready: %s %s", ready.Reason, ready.Message)
	}

	It("registers a Ready node", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			expectReady(g, getNode(ctx, g))
		}).WithContext(ctx).WithTimeout(readyTimeout).WithPolling(pollInterval).Should(Succeed())
	}, SpecTimeout(readyTimeout+10*time.Second))

	It("pulls a named image and reports the one that does not exist", func(ctx SpecContext) {
		Expect(present(ctx, Default, good)).To(BeFalse(), "%s is in the runtime before it is named", good)
		annotate(ctx, good, missing)

		By("finding the image in the runtime")
		Eventually(func(g Gomega) {
			g.Expect(present(ctx, g, good)).To(BeTrue())
		}).WithContext(ctx).WithTimeout(pullTimeout).WithPolling(pollInterval).Should(Succeed())

		By("reading a False condition that names only the missing image")
		Eventually(func(g Gomega) {
			c := condition(ctx, g, prepuller.ConditionType)
			g.Expect(c).NotTo(BeNil(), "no %s condition", prepuller.ConditionType)
			g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(prepuller.ReasonPullFailed))
			g.Expect(c.Message).To(ContainSubstring(missing))
			g.Expect(c.Message).NotTo(ContainSubstring(good))
		}).WithContext(ctx).WithTimeout(reportTimeout).WithPolling(pollInterval).Should(Succeed())

		By("reading the kubelet's image Events on the Node")
		Eventually(func(g Gomega) {
			failed := events(ctx, g, prepuller.EventFailed, missing)
			g.Expect(failed).NotTo(BeEmpty(), "no Failed Event for %s", missing)
			g.Expect(failed[0].Type).To(Equal(corev1.EventTypeWarning))
			g.Expect(failed[0].Message).To(HavePrefix(`Failed to pull image %q: `, missing))
			g.Expect(pulls(ctx, g, good)).To(BeNumerically(">=", 1), "no Pulled Event for %s", good)
			g.Expect(events(ctx, g, prepuller.EventFailed, good)).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(reportTimeout).WithPolling(pollInterval).Should(Succeed())
		Expect(present(ctx, Default, missing)).To(BeFalse())

		By("finding the failure remembered on the node's disk, for the back-off to survive a restart")
		state := filepath.Join(agent.RootDir, "extensions", prepuller.Name, "checkpoints", "state")
		Eventually(func(g Gomega) {
			data, err := os.ReadFile(state)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(data)).To(ContainSubstring(missing))
			g.Expect(string(data)).NotTo(ContainSubstring(good))
		}).WithContext(ctx).WithTimeout(reportTimeout).WithPolling(pollInterval).Should(Succeed())
	}, SpecTimeout(pullTimeout+3*reportTimeout))

	It("reports every image present once only present ones are named", func(ctx SpecContext) {
		annotate(ctx, good)
		Eventually(func(g Gomega) {
			c := condition(ctx, g, prepuller.ConditionType)
			g.Expect(c).NotTo(BeNil(), "no %s condition", prepuller.ConditionType)
			g.Expect(c.Status).To(Equal(corev1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(prepuller.ReasonAllImagesPresent))
		}).WithContext(ctx).WithTimeout(reportTimeout).WithPolling(pollInterval).Should(Succeed())
		expectReady(Default, getNode(ctx, Default))
	}, SpecTimeout(2*reportTimeout))

	It("pulls an image removed from the runtime again within the interval", func(ctx SpecContext) {
		before := pulls(ctx, Default, good)
		Expect(images.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: good})).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(present(ctx, g, good)).To(BeTrue())
			g.Expect(pulls(ctx, g, good)).To(BeNumerically(">", before), "no new Pulled Event")
		}).WithContext(ctx).WithTimeout(recheckInterval + pullTimeout).WithPolling(pollInterval).Should(Succeed())
	}, SpecTimeout(recheckInterval+pullTimeout+reportTimeout))

	It("pulls nothing once turned off with --controllers, and the node stays Ready", func(ctx SpecContext) {
		later := pushImage(ctx, "prepull-later")
		Expect(agent.Stop()).To(Succeed())
		restarted := time.Now()
		agent.Options.Args = append(agent.Options.Args, "--controllers=*,-"+prepuller.Name)
		Expect(agent.Restart(ctx)).To(Succeed())

		By("seeing the restarted agent renew its Lease")
		Eventually(func(g Gomega) {
			lease := &coordinationv1.Lease{}
			g.Expect(admin.Get(ctx, types.NamespacedName{Namespace: corev1.NamespaceNodeLease, Name: nodeName}, lease)).To(Succeed())
			g.Expect(lease.Spec.RenewTime).NotTo(BeNil())
			g.Expect(lease.Spec.RenewTime.Time).To(BeTemporally(">=", restarted.Truncate(time.Microsecond)))
		}).WithContext(ctx).WithTimeout(readyTimeout).WithPolling(pollInterval).Should(Succeed())

		annotate(ctx, good, later)
		Consistently(func(g Gomega) {
			g.Expect(present(ctx, g, later)).To(BeFalse(), "%s was pulled", later)
			expectReady(g, getNode(ctx, g))
		}).WithContext(ctx).WithTimeout(offWindow).WithPolling(pollInterval * 5).Should(Succeed())
		Expect(agent.Running()).To(BeTrue(), "the agent exited")
	}, SpecTimeout(time.Minute+readyTimeout+offWindow))
})

var _ = Describe("The pre-puller example's options", func() {
	It("refuses an invalid PREPULL_INTERVAL with exit code 2 and a message naming it", func(ctx SpecContext) {
		code, stderr := runBinary(ctx, []string{prepuller.EnvInterval + "=soon"}, "--help")
		Expect(code).To(Equal(2))
		Expect(stderr).To(ContainSubstring(`invalid PREPULL_INTERVAL "soon"`))
	}, SpecTimeout(30*time.Second))
})

// newImageClient connects a CRI image client of the test's own to the
// suite's containerd.
func newImageClient(ctx context.Context) internalapi.ImageManagerService {
	GinkgoHelper()
	is, err := remoteCRI.NewRemoteImageServiceBuilder().
		WithEndpoint(ctrd.Endpoint()).
		WithConnectionTimeout(criTimeout).
		Build(ctx)
	Expect(err).NotTo(HaveOccurred(), "connecting to the CRI image service")
	DeferCleanup(is.Close)
	return is
}

// pushImage pushes the busybox test image to the registry as repo:1, with
// a label of its own so that its digest is its own too (the runtime
// removes an image with every name it has), and returns its reference.
func pushImage(ctx context.Context, repo string) string {
	GinkgoHelper()
	base, err := registry.Push(ctx, utils.BusyboxImage)
	Expect(err).NotTo(HaveOccurred(), "pushing the busybox image")
	src, err := name.ParseReference(base, name.Insecure)
	Expect(err).NotTo(HaveOccurred())
	img, err := remote.Image(src, remote.WithContext(ctx))
	Expect(err).NotTo(HaveOccurred(), "reading %s back", base)
	cfg, err := img.ConfigFile()
	Expect(err).NotTo(HaveOccurred())
	labels := map[string]string{"test.nodelet.io/repository": repo}
	cfg.Config.Labels = labels
	img, err = mutate.Config(img, cfg.Config)
	Expect(err).NotTo(HaveOccurred())
	ref := registry.Host() + "/" + repo + ":1"
	dst, err := name.NewTag(ref, name.Insecure)
	Expect(err).NotTo(HaveOccurred())
	Expect(remote.Write(dst, img, remote.WithContext(ctx))).To(Succeed(), "pushing %s", ref)
	return ref
}

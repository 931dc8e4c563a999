package e2e

import (
	"context"
	"math/rand"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
	"github.com/nodelet/nodelet/test/utils/imagebuild"
)

const (
	gcContainersNode = "e2e-gc-containers"
	gcImagesNode     = "e2e-gc-images"
	// gcTimeout covers a few restarts of a crash-looping container with a
	// 1s back-off, or an image GC pass after the images' minimum age.
	gcTimeout = 90 * time.Second
	// gcImageMinAge is the image GC minimum age of the image specs: long
	// enough to use three images one after the other before any may go.
	gcImageMinAge = 45 * time.Second
	// gcPayload is the size of the incompressible layer of each GC test
	// image: many times a 1% step of the image filesystem below.
	gcPayload = 6 << 20
	// gcImageFs is the size of the image filesystem (containerd's root).
	gcImageFs = 128 << 20
)

var _ = Describe("Garbage collection", func() {
	Describe("of dead containers", Ordered, func() {
		env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
			return utils.NodeletOptions{NodeName: gcContainersNode, API: apiServer, Containerd: ctrd, Config: map[string]any{
				"containerGC":      map[string]any{"maxPerPodContainer": 3, "maxContainers": 4, "period": "1s"},
				"crashLoopBackOff": map[string]any{"maxContainerRestartPeriod": "1s"},
			}}
		})
		// deadContainers lists the exited containers of the pod.
		deadContainers := func(ctx context.Context, g Gomega, rs interface {
			ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
		}, uid string) []*runtimeapi.Container {
			cs, err := rs.ListContainers(ctx, &runtimeapi.ContainerFilter{
				State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_EXITED},
				LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid},
			})
			g.Expect(err).NotTo(HaveOccurred())
			return cs
		}
		crashPod := func(ns, name string) *corev1.Pod {
			p := utils.BusyboxPod(ns, name, gcContainersNode, "sh", "-c", "echo run of "+name+"; exit 1")
			p.Spec.RestartPolicy = corev1.RestartPolicyAlways
			p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
			return p
		}
		restarts := func(p *corev1.Pod) int32 {
			if len(p.Status.ContainerStatuses) == 0 {
				return 0
			}
			return p.Status.ContainerStatuses[0].RestartCount
		}

		It("keeps maxPerPodContainer dead instances of a crash-looping container, logs --previous reads the newest, and a deleted pod leaves nothing", func(ctx SpecContext) {
			rs, _ := newCRIClients(ctx)
			ns := utils.NewNamespace(ctx, env.Admin)
			Expect(env.Admin.Create(ctx, crashPod(ns, "crash"))).To(Succeed())
			var uid string
			Eventually(func(g Gomega) {
				p := utils.GetPod(ctx, env.Admin, ns, "crash")(g)
				uid = string(p.UID)
				g.Expect(restarts(p)).To(BeNumerically(">=", 5))
				g.Expect(deadContainers(ctx, g, rs, uid)).To(HaveLen(3))
			}).WithContext(ctx).WithTimeout(gcTimeout).WithPolling(pollInterval).Should(Succeed())
			// One more for a moment after a crash, never fewer.
			Consistently(func(g Gomega) {
				g.Expect(len(deadContainers(ctx, g, rs, uid))).To(BeNumerically("~", 3.5, 0.5))
			}).WithContext(ctx).WithTimeout(3 * time.Second).WithPolling(pollInterval).Should(Succeed())

			By("reading the previous instance's log through the API server")
			cs, err := kubernetes.NewForConfig(apiServer.Config)
			Expect(err).NotTo(HaveOccurred())
			out, err := cs.CoreV1().Pods(ns).GetLogs("crash", &corev1.PodLogOptions{Container: "main", Previous: true}).DoRaw(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(string(out)).To(Equal("run of crash\n"))

			By("deleting the pod")
			logDir := filepath.Join(env.Nodelet.PodLogsDir, ns+"_crash_"+uid)
			Expect(logDir).To(BeADirectory())
			Expect(env.Admin.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crash"}})).To(Succeed())
			Eventually(func(g Gomega) {
				all, err := rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid}})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(all).To(BeEmpty(), "containers of the deleted pod")
				sandboxes, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid}})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(sandboxes).To(BeEmpty(), "sandboxes of the deleted pod")
				g.Expect(logDir).NotTo(BeAnExistingFile(), "log directory of the deleted pod")
				err = env.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "crash"}, &corev1.Pod{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "pod gone from the API server")
			}).WithContext(ctx).WithTimeout(gcTimeout).WithPolling(pollInterval).Should(Succeed())
		})

		It("bounds the node's dead containers by maxContainers, spread evenly across pods", func(ctx SpecContext) {
			rs, _ := newCRIClients(ctx)
			ns := utils.NewNamespace(ctx, env.Admin)
			for _, n := range []string{"crash-a", "crash-b"} {
				Expect(env.Admin.Create(ctx, crashPod(ns, n))).To(Succeed())
			}
			// maxContainers 4 over two containers: 2 each, where
			// maxPerPodContainer alone keeps 3 (and 4 for a moment after a
			// crash).
			uids := map[string]string{}
			Eventually(func(g Gomega) {
				for _, n := range []string{"crash-a", "crash-b"} {
					p := utils.GetPod(ctx, env.Admin, ns, n)(g)
					uids[n] = string(p.UID)
					g.Expect(restarts(p)).To(BeNumerically(">=", 5), "restarts of %s", n)
					g.Expect(deadContainers(ctx, g, rs, uids[n])).To(HaveLen(2), "dead containers of %s", n)
				}
			}).WithContext(ctx).WithTimeout(gcTimeout).WithPolling(pollInterval).Should(Succeed())
			// Between a crash and the next pass one more is there for a
			// moment; never fewer than 2, the share of each.
			Consistently(func(g Gomega) {
				for _, n := range []string{"crash-a", "crash-b"} {
					g.Expect(len(deadContainers(ctx, g, rs, uids[n]))).To(BeNumerically(">=", 2), "dead containers of %s", n)
				}
			}).WithContext(ctx).WithTimeout(5 * time.Second).WithPolling(pollInterval).Should(Succeed())
			metrics, err := env.Nodelet.Metrics(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(metricValue(metrics, `nodelet_container_garbage_collected_total`)).To(BeNumerically(">", 0))
		})
	})

	Describe("of images", Ordered, func() {
		var (
			imgCtrd   *utils.Containerd
			imgSvc    internalapi.ImageManagerService
			images    = map[string]string{} // letter → reference
			imageSize int64
			high, low int
		)
		BeforeAll(func(ctx SpecContext) {
			imgCtrd = utils.MustStartContainerd(ctx, utils.ContainerdOptions{
				Images: []string{utils.PauseImage}, RootTmpfsBytes: gcImageFs,
			})
			base, err := utils.LoadImage(ctx, utils.BusyboxImage)
			Expect(err).NotTo(HaveOccurred())
			dir := GinkgoT().TempDir()
			for i, letter := range []string{"a", "b", "c", "d"} {
				ref := "nodelet.test/gc-" + letter + ":1"
				payload := make([]byte, gcPayload)
				rand.New(rand.NewSource(int64(i + 1))).Read(payload) //nolint:gosec // test data
				var layer imagebuild.Layer
				layer.File("payload", 0o644, payload)
				img, err := imagebuild.Append(base, &layer, utils.ImageEpoch)
				Expect(err).NotTo(HaveOccurred())
				tag, err := name.NewTag(ref)
				Expect(err).NotTo(HaveOccurred())
				archive := filepath.Join(dir, letter+".tar")
				Expect(imagebuild.WriteArchive(archive, tag, img)).To(Succeed())
				Expect(imgCtrd.ImportArchive(ctx, ref, archive)).To(Succeed())
				images[letter] = ref
			}
			imgSvc, err = remote.NewRemoteImageServiceBuilder().WithEndpoint(imgCtrd.Endpoint()).WithConnectionTimeout(criTimeout).Build(ctx)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(imgSvc.Close)
			st, err := imgSvc.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: images["a"]}, false)
			Expect(err).NotTo(HaveOccurred())
			imageSize = int64(st.GetImage().GetSize()) //nolint:gosec // small
			Expect(imageSize).To(BeNumerically(">", gcPayload))

			// Thresholds from the filesystem as it is: over the high one
			// from the start, and the low one about one and a half images
			// below the usage, so that GC must free two images.
			var fs unix.Statfs_t
			Expect(unix.Statfs(filepath.Join(imgCtrd.Dir, "root"), &fs)).To(Succeed())
			capacity, avail := int64(fs.Blocks)*fs.Bsize, int64(fs.Bavail)*fs.Bsize //nolint:gosec // small
			usage := 100 - int(avail*100/capacity)
			high = max(usage-1, 1)
			low = 100 - int((avail+imageSize*3/2)*100/capacity+1)
			GinkgoWriter.Printf("image filesystem: capacity %d, available %d, usage %d%%; image size %d; thresholds %d%%/%d%%\n",
				capacity, avail, usage, imageSize, high, low)
			Expect(low).To(BeNumerically(">", 0))
			Expect(low).To(BeNumerically("<", high))
		})
		env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
			return utils.NodeletOptions{NodeName: gcImagesNode, API: apiServer, Containerd: imgCtrd, Config: map[string]any{
				"imageGCHighThresholdPercent": high,
				"imageGCLowThresholdPercent":  low,
				"imageMinimumGCAge":           gcImageMinAge.String(),
				"imageGCPeriod":               "1s",
			}}
		})
		// The images are first detected when the agent starts.
		started := time.Now()
		BeforeAll(func() { started = time.Now() })
		JustAfterEach(func() {
			if CurrentSpecReport().Failed() && imgCtrd != nil {
				GinkgoWriter.Printf("containerd log (last 40 lines):\n%s\n", imgCtrd.LogTail(40))
			}
		})

		imagePresent := func(ctx context.Context, g Gomega, ref string) bool {
			st, err := imgSvc.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false)
			g.Expect(err).NotTo(HaveOccurred())
			return st.GetImage() != nil
		}
		nodeEvent := func(ctx context.Context, g Gomega, reason string) string {
			var events corev1.EventList
			g.Expect(env.Admin.List(ctx, &events, client.InNamespace("default"))).To(Succeed())
			for _, e := range events.Items {
				if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == gcImagesNode && e.Reason == reason {
					return e.Type + " " + e.Message
				}
			}
			return ""
		}

		It("reports FreeDiskSpaceFailed while nothing is old enough to go", func(ctx SpecContext) {
			Eventually(func(g Gomega) string { return nodeEvent(ctx, g, "FreeDiskSpaceFailed") }).
				WithContext(ctx).WithTimeout(gcTimeout).WithPolling(pollInterval).Should(MatchRegexp(
				`^Warning Failed to garbage collect required amount of images\. Attempted to free \d+ bytes, but only found 0 bytes eligible to free\.$`))
			for _, ref := range images {
				Expect(imagePresent(ctx, Default, ref)).To(BeTrue(), "%s before the minimum age", ref)
			}
		})

		It("removes the least recently used unused images, never the sandbox image or a running pod's", func(ctx SpecContext) {
			ns := utils.NewNamespace(ctx, env.Admin)
			run := func(name, ref string) {
				p := utils.BusyboxPod(ns, name, gcImagesNode, "sleep", "3600")
				p.Spec.Containers[0].Image = ref
				p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
				Expect(env.Admin.Create(ctx, p)).To(Succeed())
				utils.WaitForPod(ctx, env.Admin, ns, name, containerTimeout, func(g Gomega, p *corev1.Pod) {
					g.Expect(utils.PodReady(p)).To(BeTrue())
				})
			}
			gone := func(name string) {
				Expect(env.Admin.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
				Eventually(func() bool {
					return apierrors.IsNotFound(env.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{}))
				}).WithContext(ctx).WithTimeout(containerTimeout).WithPolling(pollInterval).Should(BeTrue())
			}
			// Used in the order a, b, d, each for a few GC periods, then
			// c, which keeps running.
			for _, l := range []string{"a", "b", "d"} {
				run("use-"+l, images[l])
				time.Sleep(2500 * time.Millisecond)
				gone("use-" + l)
			}
			run("use-c", images["c"])
			Expect(time.Since(started)).To(BeNumerically("<", gcImageMinAge), "images used before they may go")

			Eventually(func(g Gomega) {
				g.Expect(imagePresent(ctx, g, images["a"])).To(BeFalse(), "a, used first")
				g.Expect(imagePresent(ctx, g, images["b"])).To(BeFalse(), "b, used second")
			}).WithContext(ctx).WithTimeout(gcImageMinAge + gcTimeout).WithPolling(pollInterval).Should(Succeed())
			Consistently(func(g Gomega) {
				g.Expect(imagePresent(ctx, g, images["d"])).To(BeTrue(), "d, used after a and b")
				g.Expect(imagePresent(ctx, g, images["c"])).To(BeTrue(), "c, running")
				g.Expect(imagePresent(ctx, g, utils.PauseImage)).To(BeTrue(), "the sandbox image")
			}).WithContext(ctx).WithTimeout(5 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
			metrics, err := env.Nodelet.Metrics(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(metricValue(metrics, `kubelet_image_garbage_collected_total{reason="space"}`)).To(Equal(2.0))
			Expect(utils.GetPod(ctx, env.Admin, ns, "use-c")(Default).Status.Phase).To(Equal(corev1.PodRunning))
		})
	})
})

// metricValue returns the value of the sample named (with labels) in a
// /metrics text, or -1 when there is none.
func metricValue(text, sample string) float64 {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return -1
	}
	return v
}

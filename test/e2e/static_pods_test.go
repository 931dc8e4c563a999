package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/test/utils"
)

const (
	// staticCPNode is the control-plane node.
	staticCPNode = "e2e-static-cp"
	// staticCPStartTimeout covers etcd and the API server starting from
	// their manifests on two loaded cores.
	staticCPStartTimeout = 4 * time.Minute
	// staticCPTimeout covers one change of the control plane: a new API
	// server container, a returning mirror pod, registration, TLS
	// bootstrap.
	staticCPTimeout = 3 * time.Minute
	// mirrorAnnotation marks a mirror pod; its value is the static pod's
	// hash, as is configHashAnnotation's.
	mirrorAnnotation     = "kubernetes.io/config.mirror"
	configHashAnnotation = "kubernetes.io/config.hash"
)

var _ = Describe("Static control plane", Ordered, ContinueOnFailure, func() {
	var (
		cpCtrd  *utils.Containerd
		cp      *utils.StaticControlPlane
		nodelet *utils.Nodelet
		admin   client.Client
		rs      internalapi.RuntimeService
	)

	BeforeAll(func(ctx SpecContext) {
		// The control plane's directory goes last, once containerd has
		// stopped the containers that mount it.
		dir, err := os.MkdirTemp("", "nodelet-static-cp-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, dir)
		cpCtrd = utils.MustStartContainerd(ctx, utils.ContainerdOptions{Images: []string{utils.PauseImage, utils.BusyboxImage}})
		// MustStartContainerd stops it in a cleanup, which runs after
		// nodelet's (last in, first out) and removes what nodelet left.
		assets, err := utils.EnvtestAssets(ctx)
		Expect(err).NotTo(HaveOccurred())
		took, err := cpCtrd.ImportControlPlaneImages(ctx, assets)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("control-plane images built or taken from the cache and imported in %s\n", took)

		rs, err = remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(cpCtrd.Endpoint()).WithConnectionTimeout(criTimeout).Build(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(rs.Close)
		// Once nodelet is gone, its containers are stopped one by one
		// before containerd removes their sandboxes: the control plane's
		// processes take a moment to go, and a sandbox is removed only
		// once its containers are seen stopped.
		DeferCleanup(func(ctx SpecContext) {
			cs, err := rs.ListContainers(ctx, &runtimeapi.ContainerFilter{
				State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
			Expect(err).NotTo(HaveOccurred())
			for _, c := range cs {
				err := rs.StopContainer(ctx, c.Id, 10)
				if err == nil {
					continue
				}
				// containerd answers "ttrpc: closed" when the
				// container's shim goes during the stop: stopped
				// all the same, unless it is still seen running.
				st, serr := rs.ContainerStatus(ctx, c.Id, false)
				if cri.IsNotFound(serr) || serr == nil && st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
					continue
				}
				Expect(err).NotTo(HaveOccurred(), "stopping container %s", c.Metadata.GetName())
			}
		}, NodeTimeout(2*time.Minute))

		nodeIP, err := cpCtrd.HostIP()
		Expect(err).NotTo(HaveOccurred())
		cp, err = utils.NewStaticControlPlane(dir, utils.StaticControlPlaneOptions{NodeName: staticCPNode, AdvertiseAddress: nodeIP})
		Expect(err).NotTo(HaveOccurred())

		By("starting nodelet with only a bootstrap kubeconfig naming an API server that does not run yet")
		nodelet, err = cp.StartStaticControlPlaneNodelet(ctx, cpCtrd, nil)
		// One that did not start is cleaned up too: its directory and
		// cgroups exist.
		if nodelet != nil {
			DeferCleanup(func() {
				if CurrentSpecReport().Failed() {
					GinkgoWriter.Printf("nodelet log:\n%s\n", nodelet.LogTail(120))
				}
				Expect(nodelet.Cleanup()).To(Succeed())
			})
		}
		Expect(err).NotTo(HaveOccurred())
		_, statErr := os.Stat(nodelet.KubeconfigPath())
		Expect(os.IsNotExist(statErr)).To(BeTrue(), "the agent's kubeconfig does not exist before TLS bootstrap")

		By("waiting for the API server that nodelet runs from its manifest")
		Eventually(cp.Ready).WithContext(ctx).WithTimeout(staticCPStartTimeout).WithPolling(time.Second).Should(Succeed())
		admin, err = cp.AdminClient()
		Expect(err).NotTo(HaveOccurred())
		By("creating the bootstrap token and kubeadm's TLS bootstrap bindings")
		Expect(cp.CreateBootstrapToken(ctx, time.Hour)).To(Succeed())
	}, NodeTimeout(suiteSetupTimeout))

	// running returns the running container of component in the runtime.
	running := func(ctx SpecContext, g Gomega, component string) *runtimeapi.Container {
		cs, err := rs.ListContainers(ctx, &runtimeapi.ContainerFilter{
			State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			LabelSelector: map[string]string{"io.kubernetes.container.name": component},
		})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cs).To(HaveLen(1), "one running %s container", component)
		return cs[0]
	}
	mirror := func(ctx SpecContext, g Gomega, component string) *corev1.Pod {
		p := &corev1.Pod{}
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: utils.StaticPodName(component, staticCPNode)}, p)).To(Succeed())
		return p
	}

	It("runs etcd, the API server, the controller-manager and the scheduler from their manifests", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			for _, c := range utils.ControlPlaneComponents {
				ctr := running(ctx, g, c)
				g.Expect(ctr.Labels).To(HaveKeyWithValue("io.kubernetes.pod.namespace", metav1.NamespaceSystem))
				status, err := rs.ContainerStatus(ctx, ctr.Id, false)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(status.Status.Image.Image).To(Equal(utils.ControlPlaneImages[c]))
			}
		}).WithContext(ctx).WithTimeout(staticCPTimeout).WithPolling(time.Second).Should(Succeed())
	})

	It("joins the cluster it runs: the Node registers through TLS bootstrap and goes Ready", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			n := &corev1.Node{}
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: staticCPNode}, n)).To(Succeed())
			g.Expect(utils.NodeReady(n)).To(BeTrue(), "node Ready")
		}).WithContext(ctx).WithTimeout(staticCPTimeout).WithPolling(time.Second).Should(Succeed())
		_, err := os.Stat(nodelet.KubeconfigPath())
		Expect(err).NotTo(HaveOccurred(), "nodelet wrote its kubeconfig after bootstrap")
	})

	It("keeps a mirror pod of each component in kube-system, owned by the Node", func(ctx SpecContext) {
		n := &corev1.Node{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: staticCPNode}, n)).To(Succeed())
		Eventually(func(g Gomega) {
			for _, c := range utils.ControlPlaneComponents {
				p := mirror(ctx, g, c)
				g.Expect(p.Annotations).To(HaveKey(mirrorAnnotation), "%s is a mirror pod", p.Name)
				g.Expect(p.Annotations[mirrorAnnotation]).To(Equal(p.Annotations[configHashAnnotation]))
				g.Expect(p.Labels).To(HaveKeyWithValue("tier", "control-plane"))
				g.Expect(p.Spec.NodeName).To(Equal(staticCPNode))
				g.Expect(p.OwnerReferences).To(ContainElement(And(
					HaveField("Kind", "Node"), HaveField("Name", staticCPNode), HaveField("UID", n.UID))))
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "%s running", p.Name)
				g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
				g.Expect(p.Status.ContainerStatuses[0].ContainerID).To(HaveSuffix(running(ctx, g, c).Id))
			}
		}).WithContext(ctx).WithTimeout(staticCPTimeout).WithPolling(time.Second).Should(Succeed())
	})

	It("runs a Deployment on the node, scheduled and managed by the static control plane", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, admin)
		labels := map[string]string{"app": "static-cp"}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sleeper"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](2),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: "sleep", Image: utils.BusyboxImage, Command: []string{"sleep", "3600"},
					}}},
				},
			},
		}
		Expect(admin.Create(ctx, d)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
			g.Expect(d.Status.ReadyReplicas).To(BeEquivalentTo(2))
			var pods corev1.PodList
			g.Expect(admin.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
			for _, p := range pods.Items {
				g.Expect(p.Spec.NodeName).To(Equal(staticCPNode))
			}
		}).WithContext(ctx).WithTimeout(staticCPTimeout).WithPolling(time.Second).Should(Succeed())
	})

	// Before the API server is replaced: after that, the informers'
	// watches come back with back-off, and a deleted mirror pod may be
	// seen only at the static pod's next periodic sync.
	It("recreates a deleted mirror pod, and keeps the static pod running", func(ctx SpecContext) {
		var old *corev1.Pod
		var ctr *runtimeapi.Container
		Eventually(func(g Gomega) {
			old = mirror(ctx, g, utils.KubeScheduler)
			ctr = running(ctx, g, utils.KubeScheduler)
		}).WithContext(ctx).WithTimeout(apiTimeout).Should(Succeed())
		Expect(admin.Delete(ctx, old)).To(Succeed())
		Eventually(func(g Gomega) {
			p := mirror(ctx, g, utils.KubeScheduler)
			g.Expect(p.UID).NotTo(Equal(old.UID), "a new mirror pod")
			g.Expect(p.Annotations).To(HaveKey(mirrorAnnotation))
		}).WithContext(ctx).WithTimeout(staticCPTimeout).WithPolling(time.Second).Should(Succeed())
		Expect(running(ctx, Default, utils.KubeScheduler).Id).To(Equal(ctr.Id), "the scheduler was not restarted")
	})

	It("replaces the API server when its manifest changes, and its mirror pod follows", func(ctx SpecContext) {
		var before *runtimeapi.Container
		var oldHash string
		Eventually(func(g Gomega) {
			before = running(ctx, g, utils.KubeAPIServer)
			oldHash = mirror(ctx, g, utils.KubeAPIServer).Annotations[mirrorAnnotation]
		}).WithContext(ctx).WithTimeout(apiTimeout).Should(Succeed())
		pod := cp.Pod(utils.KubeAPIServer)
		pod.Spec.Containers[0].Command = append(pod.Spec.Containers[0].Command, "--event-ttl=2h")
		Expect(cp.WriteManifest(pod)).To(Succeed())

		Eventually(func(g Gomega) {
			after := running(ctx, g, utils.KubeAPIServer)
			g.Expect(after.Id).NotTo(Equal(before.Id), "a new API server container")
			status, err := rs.ContainerStatus(ctx, after.Id, true)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(status.Info["info"]).To(ContainSubstring("--event-ttl=2h"))
			g.Expect(cp.Ready(ctx)).To(Succeed())
			m := mirror(ctx, g, utils.KubeAPIServer)
			g.Expect(m.Annotations[mirrorAnnotation]).NotTo(Equal(oldHash), "the mirror pod of the new manifest")
			g.Expect(m.Spec.Containers[0].Command).To(ContainElement("--event-ttl=2h"))
			g.Expect(m.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(m.Status.ContainerStatuses[0].ContainerID).To(HaveSuffix(after.Id))
		}).WithContext(ctx).WithTimeout(staticCPTimeout).WithPolling(time.Second).Should(Succeed())
	})

	It("keeps every static pod's containers across a SIGKILL of nodelet", func(ctx SpecContext) {
		ids := map[string]string{}
		restarts := map[string]int32{}
		Eventually(func(g Gomega) {
			for _, c := range utils.ControlPlaneComponents {
				ctr := running(ctx, g, c)
				ids[c] = ctr.Id
				m := mirror(ctx, g, c)
				g.Expect(m.Status.ContainerStatuses).To(HaveLen(1))
				g.Expect(m.Status.ContainerStatuses[0].ContainerID).To(HaveSuffix(ctr.Id))
				restarts[c] = m.Status.ContainerStatuses[0].RestartCount
			}
		}).WithContext(ctx).WithTimeout(staticCPTimeout).WithPolling(time.Second).Should(Succeed())

		Expect(nodelet.Kill()).To(Succeed())
		Expect(nodelet.Restart(ctx)).To(Succeed())
		// Long enough for the restarted agent to have synced every
		// static pod; the statuses below are checked again after it.
		Consistently(func(g Gomega) {
			for _, c := range utils.ControlPlaneComponents {
				g.Expect(running(ctx, g, c).Id).To(Equal(ids[c]), "%s keeps its container", c)
			}
		}).WithContext(ctx).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(cp.Ready(ctx)).To(Succeed())
			for _, c := range utils.ControlPlaneComponents {
				m := mirror(ctx, g, c)
				g.Expect(m.Status.ContainerStatuses).To(HaveLen(1))
				st := m.Status.ContainerStatuses[0]
				g.Expect(st.ContainerID).To(HaveSuffix(ids[c]), "%s's mirror pod reports the same container", c)
				g.Expect(st.RestartCount).To(Equal(restarts[c]), "%s's restart count", c)
				g.Expect(st.State.Running).NotTo(BeNil())
			}
		}).WithContext(ctx).WithTimeout(staticCPTimeout).WithPolling(time.Second).Should(Succeed())
		for _, c := range utils.ControlPlaneComponents {
			Expect(running(ctx, Default, c).Id).To(Equal(ids[c]), "%s keeps its container", c)
		}
	})

	It("reports manifests it cannot use as Warning Events on the Node and keeps running the others", func(ctx SpecContext) {
		const noKindSecret = "e2e-manifest-s3cr3t"
		ids := map[string]string{}
		Eventually(func(g Gomega) {
			for _, c := range utils.ControlPlaneComponents {
				ids[c] = running(ctx, g, c).Id
			}
		}).WithContext(ctx).WithTimeout(apiTimeout).Should(Succeed())

		// The duplicate's file sorts after the scheduler's, which keeps
		// its name.
		bad := map[string]string{
			"bad-yaml.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: [unclosed\n",
			"invalid.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: invalid, namespace: kube-system}\n" +
				"spec: {containers: [{name: Not_A_DNS_Label, image: " + utils.BusyboxImage + "}]}\n",
			"zz-duplicate.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: kube-scheduler, namespace: kube-system}\n" +
				"spec: {containers: [{name: sleep, image: " + utils.BusyboxImage + ", command: [sleep, '3600']}]}\n",
			// Its UID would name the pod's directory and cgroup.
			"climbing-uid.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: climbing, namespace: kube-system, uid: ../../../../tmp/climbed}\n" +
				"spec: {containers: [{name: sleep, image: " + utils.BusyboxImage + ", command: [sleep, '3600']}]}\n",
			// A document without a kind, which the decoder would quote whole.
			"no-kind.json": `{"metadata": {"name": "no-kind"}, "token": "` + noKindSecret + `"}`,
		}
		for name, content := range bad {
			path := filepath.Join(cp.ManifestDir, name)
			Expect(os.WriteFile(path, []byte(content), 0o600)).To(Succeed())
			DeferCleanup(os.Remove, path)
		}

		Eventually(func(g Gomega) {
			var events corev1.EventList
			g.Expect(admin.List(ctx, &events)).To(Succeed())
			var messages []string
			for _, e := range events.Items {
				if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == staticCPNode &&
					e.Reason == "FailedValidation" && e.Type == corev1.EventTypeWarning {
					messages = append(messages, e.Message)
				}
			}
			for name := range bad {
				g.Expect(messages).To(ContainElement(ContainSubstring(filepath.Join(cp.ManifestDir, name))), "an Event for %s", name)
			}
			g.Expect(messages).To(ContainElement(ContainSubstring("metadata.uid: Invalid value")), "the climbing UID is named")
			g.Expect(messages).NotTo(ContainElement(ContainSubstring(noKindSecret)), "an Event quotes a manifest's content")
			log := nodelet.LogTail(100000)
			for name := range bad {
				g.Expect(log).To(MatchRegexp(`Ignoring (a )?static pod manifest.*`+regexp.QuoteMeta(name)), "a log line for %s", name)
			}
		}).WithContext(ctx).WithTimeout(staticCPTimeout).WithPolling(time.Second).Should(Succeed())

		Consistently(func(g Gomega) {
			for _, c := range utils.ControlPlaneComponents {
				g.Expect(running(ctx, g, c).Id).To(Equal(ids[c]), "%s keeps running", c)
				g.Expect(mirror(ctx, g, c).Annotations).To(HaveKey(mirrorAnnotation))
			}
			for _, name := range []string{"invalid-" + staticCPNode, "climbing-" + staticCPNode} {
				pods, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
					LabelSelector: map[string]string{"io.kubernetes.pod.name": name}})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(pods).To(BeEmpty(), "no sandbox for %s", name)
			}
		}).WithContext(ctx).WithTimeout(5 * time.Second).WithPolling(time.Second).Should(Succeed())
	})
})

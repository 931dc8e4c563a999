package e2e

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fakeplugin "github.com/nodelet/nodelet/test/deviceplugin"
	"github.com/nodelet/nodelet/test/utils"
)

// devicePluginNode is the node of the device plugin spec.
const devicePluginNode = "e2e-device-plugin"

var _ = Describe("Device plugins and pod resources", Ordered, func() {
	const gpu corev1.ResourceName = "example.com/gpu"
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: devicePluginNode, API: apiServer, Containerd: ctrd}
	})

	// gpuCounts waits for the Node to report capacity and allocatable of
	// the plugin's resource.
	gpuCounts := func(ctx SpecContext, capacity, allocatable string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			n := &corev1.Node{}
			g.Expect(env.Admin.Get(ctx, client.ObjectKey{Name: devicePluginNode}, n)).To(Succeed())
			g.Expect(n.Status.Capacity).To(HaveKeyWithValue(gpu, resource.MustParse(capacity)))
			g.Expect(n.Status.Allocatable).To(HaveKeyWithValue(gpu, resource.MustParse(allocatable)))
		}).WithContext(ctx).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(Succeed())
	}
	requesting := func(ns, name string) *corev1.Pod {
		p := utils.BusyboxPod(ns, name, devicePluginNode, "sleep", "3600")
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		one := corev1.ResourceList{gpu: resource.MustParse("1")}
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: one, Limits: one}
		return p
	}
	running := func(ctx SpecContext, ns, name string) *corev1.Pod {
		GinkgoHelper()
		return utils.WaitForPod(ctx, env.Admin, ns, name, podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(p.Status.ContainerStatuses[0].ContainerID).NotTo(BeEmpty())
		})
	}
	// deviceOf reads the DEVICE_ID the plugin's Allocate gave the pod's
	// container.
	deviceOf := func(ctx SpecContext, p *corev1.Pod) string {
		GinkgoHelper()
		rs, _ := newCRIClients(ctx)
		id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
		stdout, stderr, err := rs.ExecSync(ctx, id, []string{"sh", "-c", "echo $" + fakeplugin.EnvName}, criTimeout)
		Expect(err).NotTo(HaveOccurred(), "reading %s: %s", fakeplugin.EnvName, stderr)
		return strings.TrimSpace(string(stdout))
	}
	// deviceHealthIs waits for the pod's container status to report its
	// one device with that health, as the kubelet's (allocatedResourcesStatus).
	deviceHealthIs := func(ctx SpecContext, ns, name, device string, health corev1.ResourceHealthStatus) {
		GinkgoHelper()
		utils.WaitForPod(ctx, env.Admin, ns, name, podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(p.Status.ContainerStatuses[0].AllocatedResourcesStatus).To(Equal([]corev1.ResourceStatus{{
				Name: gpu, Resources: []corev1.ResourceHealth{{ResourceID: corev1.ResourceID(device), Health: health}},
			}}))
		})
	}
	// register registers the plugin once nodelet's kubelet.sock answers
	// (a plugin watches for it and registers again).
	register := func(ctx SpecContext, p *fakeplugin.Plugin) {
		GinkgoHelper()
		Eventually(func() error { return p.Register(ctx) }).WithContext(ctx).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(Succeed())
	}

	It("advertises a plugin's devices, hands each to one pod, reports their health, keeps them across restarts and frees them with the pod", func(ctx SpecContext) {
		dir := filepath.Join(env.Nodelet.RootDir, "device-plugins")
		plugin := &fakeplugin.Plugin{Dir: dir, Resource: string(gpu), Endpoint: "e2e-gpu.sock", Devices: []string{"dev-0", "dev-1"}, PreStartRequired: true}
		Eventually(func() error { return plugin.Start(ctx) }).WithContext(ctx).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(Succeed())
		DeferCleanup(plugin.Stop)
		gpuCounts(ctx, "2", "2")

		ns := utils.NewNamespace(ctx, env.Admin)
		By("running two pods, each on its own device")
		createPod(ctx, env.Admin, requesting(ns, "gpu-a"))
		createPod(ctx, env.Admin, requesting(ns, "gpu-b"))
		a, b := running(ctx, ns, "gpu-a"), running(ctx, ns, "gpu-b")
		devA, devB := deviceOf(ctx, a), deviceOf(ctx, b)
		Expect([]string{devA, devB}).To(ConsistOf("dev-0", "dev-1"))
		Expect(plugin.PreStarts()).To(HaveLen(2), "PreStartContainer before each start")
		info, err := os.Stat(filepath.Join(env.Nodelet.RootDir, "pod-resources", "kubelet.sock"))
		Expect(err).NotTo(HaveOccurred())
		Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o600)), "the pod resources socket")

		By("rejecting a third: no device left")
		createPod(ctx, env.Admin, requesting(ns, "gpu-c"))
		c := utils.WaitForPod(ctx, env.Admin, ns, "gpu-c", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
		})
		Expect(c.Status.Reason).To(Equal("OutOfexample.com/gpu"))
		Expect(c.Status.Message).To(Equal("Pod was rejected: Node didn't have enough resource: example.com/gpu, requested: 1, used: 2, capacity: 2"))

		By("reporting the devices through the pod resources API")
		conn, err := grpc.NewClient("unix://"+filepath.Join(env.Nodelet.RootDir, "pod-resources", "kubelet.sock"),
			grpc.WithTransportCredentials(insecure.NewCredentials()))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(conn.Close)
		list, err := podresourcesapi.NewPodResourcesListerClient(conn).List(ctx, &podresourcesapi.ListPodResourcesRequest{})
		Expect(err).NotTo(HaveOccurred())
		held := map[string]string{}
		for _, pr := range list.GetPodResources() {
			if pr.GetNamespace() != ns {
				continue
			}
			for _, c := range pr.GetContainers() {
				for _, d := range c.GetDevices() {
					Expect(d.GetResourceName()).To(Equal(string(gpu)))
					held[pr.GetName()] = strings.Join(d.GetDeviceIds(), ",")
				}
			}
		}
		Expect(held).To(Equal(map[string]string{"gpu-a": devA, "gpu-b": devB}), "the rejected pod holds nothing")

		By("reporting each device's health in its pod's status, again when it changes")
		deviceHealthIs(ctx, ns, "gpu-a", devA, corev1.ResourceHealthStatusHealthy)
		deviceHealthIs(ctx, ns, "gpu-b", devB, corev1.ResourceHealthStatusHealthy)
		plugin.SetHealthy(devA, false)
		deviceHealthIs(ctx, ns, "gpu-a", devA, corev1.ResourceHealthStatusUnhealthy)
		gpuCounts(ctx, "2", "1")
		deviceHealthIs(ctx, ns, "gpu-b", devB, corev1.ResourceHealthStatusHealthy)
		plugin.SetHealthy(devA, true)
		deviceHealthIs(ctx, ns, "gpu-a", devA, corev1.ResourceHealthStatusHealthy)

		By("keeping the assignments checkpointed, 0600")
		info, err = os.Stat(filepath.Join(dir, "nodelet_internal_checkpoint"))
		Expect(err).NotTo(HaveOccurred())
		Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o600)))

		By("killing and restarting nodelet: the pods keep their containers and devices")
		Expect(env.Nodelet.Kill()).To(Succeed())
		Expect(env.Nodelet.Restart(ctx)).To(Succeed())
		register(ctx, plugin)
		gpuCounts(ctx, "2", "2")
		a2, b2 := running(ctx, ns, "gpu-a"), running(ctx, ns, "gpu-b")
		Expect(a2.Status.ContainerStatuses[0].ContainerID).To(Equal(a.Status.ContainerStatuses[0].ContainerID))
		Expect(b2.Status.ContainerStatuses[0].ContainerID).To(Equal(b.Status.ContainerStatuses[0].ContainerID))
		Expect(deviceOf(ctx, a2)).To(Equal(devA))
		Expect(deviceOf(ctx, b2)).To(Equal(devB))
		Expect(plugin.Allocated()).To(HaveLen(2), "a restart allocates nothing again")

		By("restarting the plugin: nothing allocatable while it is away, all again once it registers")
		plugin.Stop()
		gpuCounts(ctx, "2", "0")
		deviceHealthIs(ctx, ns, "gpu-a", devA, corev1.ResourceHealthStatusUnknown)
		Expect(plugin.Start(ctx)).To(Succeed())
		gpuCounts(ctx, "2", "2")
		deviceHealthIs(ctx, ns, "gpu-a", devA, corev1.ResourceHealthStatusHealthy)

		By("deleting a pod: a new pod gets its device")
		Expect(env.Admin.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gpu-a"}})).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(env.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gpu-a"}, &corev1.Pod{})).NotTo(Succeed())
		}).WithContext(ctx).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(Succeed())
		createPod(ctx, env.Admin, requesting(ns, "gpu-d"))
		Expect(deviceOf(ctx, running(ctx, ns, "gpu-d"))).To(Equal(devA))
		Expect(plugin.Allocated()).To(HaveLen(3), "one Allocate per pod admitted, none for the restart")
	})
})

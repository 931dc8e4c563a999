package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/dradriver"
	"github.com/nodelet/nodelet/test/utils"
)

const (
	// draNode is the node of the DRA driver spec.
	draNode = "e2e-dra"
	// draDriverName is the stand-in driver's name, and its DeviceClass's.
	draDriverName = "dra.e2e.nodelet.test"
	// sliceWipeTimeout covers the kubelet's 30 s before the ResourceSlices
	// of a driver gone from the node are deleted.
	sliceWipeTimeout = 90 * time.Second
)

var _ = Describe("DRA drivers", Ordered, func() {
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: draNode, API: apiServer, Containerd: ctrd}
	})

	// execIn runs a shell command in the pod's only container.
	execIn := func(ctx SpecContext, p *corev1.Pod, cmd string) string {
		GinkgoHelper()
		rs, _ := newCRIClients(ctx)
		id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
		stdout, stderr, err := rs.ExecSync(ctx, id, []string{"sh", "-c", cmd}, criTimeout)
		Expect(err).NotTo(HaveOccurred(), "running %q: %s", cmd, stderr)
		return strings.TrimSpace(string(stdout))
	}

	It("registers a driver, runs a pod with the CDI devices it prepared, reports their health, unprepares them with the pod and deletes the slices of a driver gone", func(ctx SpecContext) {
		driver := &dradriver.Driver{
			Name:        draDriverName,
			RegistryDir: filepath.Join(env.Nodelet.RootDir, "plugins_registry"),
			PluginDir:   filepath.Join(env.Nodelet.RootDir, "plugins", draDriverName),
			CDIDir:      ctrd.CDISpecDir(),
			Reader:      env.Admin,
		}
		Expect(driver.Start()).To(Succeed())
		DeferCleanup(driver.Stop)
		By("registering through plugins_registry")
		Eventually(func() []bool {
			ok, _ := driver.Registrations()
			return ok
		}).WithContext(ctx).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(ContainElement(true))

		By("allocating a claim to the driver's device, as the scheduler would")
		class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: draDriverName}}
		Expect(client.IgnoreAlreadyExists(env.Admin.Create(ctx, class))).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(env.Admin.Delete(ctx, class))).To(Succeed()) })
		ns := utils.NewNamespace(ctx, env.Admin)
		claim := &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dev"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "dev", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: draDriverName},
			}}}},
		}
		Expect(env.Admin.Create(ctx, claim)).To(Succeed())
		pod := utils.BusyboxPod(ns, "with-device", draNode, "sleep", "3600")
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "dev", ResourceClaimName: ptr.To("dev")}}
		pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "dev"}}
		createPod(ctx, env.Admin, pod)
		p := utils.GetPod(ctx, env.Admin, ns, pod.Name)(Default)
		claim.Status = resourceapi.ResourceClaimStatus{
			Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
				Results: []resourceapi.DeviceRequestAllocationResult{{
					Request: "dev", Driver: draDriverName, Pool: draNode, Device: "dev-0",
				}},
			}},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: p.Name, UID: p.UID}},
		}
		Expect(env.Admin.Status().Update(ctx, claim)).To(Succeed())

		if !utils.IsContainerd2() {
			By("refusing the pod: containerd 1.6 would run it without the CDI devices")
			Eventually(func(g Gomega) {
				var events corev1.EventList
				g.Expect(env.Admin.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
				g.Expect(events.Items).To(ContainElement(HaveField("Message", ContainSubstring("does not apply CDI devices"))))
			}).WithContext(ctx).WithTimeout(claimRetryTimeout).WithPolling(pollInterval).Should(Succeed())
			Expect(utils.GetPod(ctx, env.Admin, ns, pod.Name)(Default).Status.Phase).To(Equal(corev1.PodPending))
			return
		}

		By("running the pod with the device's CDI edits")
		running := utils.WaitForPod(ctx, env.Admin, ns, pod.Name, claimRetryTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(p.Status.ContainerStatuses[0].ContainerID).NotTo(BeEmpty())
		})
		Expect(execIn(ctx, running, "echo $"+dradriver.EnvName+"; cat "+dradriver.MountPath+"/dev-0")).To(Equal("dev-0\ndev-0"))
		Expect(driver.Prepared()).To(Equal([]string{string(claim.UID)}))

		By("reporting the device's health, as its driver's health stream says, in the pod's status")
		deviceHealthIs := func(health corev1.ResourceHealthStatus, message *string) {
			GinkgoHelper()
			utils.WaitForPod(ctx, env.Admin, ns, pod.Name, podStartTimeout, func(g Gomega, p *corev1.Pod) {
				g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
				g.Expect(p.Status.ContainerStatuses[0].AllocatedResourcesStatus).To(Equal([]corev1.ResourceStatus{{
					Name: "claim:dev",
					Resources: []corev1.ResourceHealth{{
						// The device's CDI device ID, as the kubelet names it.
						ResourceID: corev1.ResourceID(dradriver.CDIKind + "=dev-0"), Health: health, Message: message,
					}},
				}}))
			})
		}
		deviceHealthIs(corev1.ResourceHealthStatusUnknown, nil)
		driver.SetHealth(draNode, "dev-0", drahealthv1.HealthStatus_UNHEALTHY, "ECC errors")
		deviceHealthIs(corev1.ResourceHealthStatusUnhealthy, ptr.To("ECC errors"))
		driver.SetHealth(draNode, "dev-0", drahealthv1.HealthStatus_HEALTHY, "")
		deviceHealthIs(corev1.ResourceHealthStatusHealthy, nil)

		By("keeping the prepared claim checkpointed, 0600")
		state := filepath.Join(env.Nodelet.RootDir, "dra_manager_state")
		info, err := os.Stat(state)
		Expect(err).NotTo(HaveOccurred())
		Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o600)))
		b, err := os.ReadFile(state)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b)).To(ContainSubstring(string(claim.UID)))

		By("reporting the claim and its device through the pod resources API")
		conn, err := grpc.NewClient("unix://"+filepath.Join(env.Nodelet.RootDir, "pod-resources", "kubelet.sock"),
			grpc.WithTransportCredentials(insecure.NewCredentials()))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(conn.Close)
		got, err := podresourcesapi.NewPodResourcesListerClient(conn).Get(ctx, &podresourcesapi.GetPodResourcesRequest{PodName: pod.Name, PodNamespace: ns})
		Expect(err).NotTo(HaveOccurred())
		Expect(got.GetPodResources().GetContainers()).To(HaveLen(1))
		dyn := got.GetPodResources().GetContainers()[0].GetDynamicResources()
		Expect(dyn).To(HaveLen(1))
		Expect(dyn[0].GetClaimName()).To(Equal("dev"))
		Expect(dyn[0].GetClaimNamespace()).To(Equal(ns))
		Expect(dyn[0].GetClaimResources()).To(HaveLen(1))
		res := dyn[0].GetClaimResources()[0]
		Expect([]string{res.GetDriverName(), res.GetPoolName(), res.GetDeviceName()}).To(Equal([]string{draDriverName, draNode, "dev-0"}))
		Expect(res.GetCdiDevices()).To(HaveLen(1))
		Expect(res.GetCdiDevices()[0].GetName()).To(Equal(dradriver.CDIKind + "=dev-0"))

		By("counting the claim in use and the driver's call in the kubelet's DRA metrics")
		text, err := env.Nodelet.Metrics(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(text).To(ContainSubstring(`dra_resource_claims_in_use{driver_name="` + draDriverName + `"} 1`))
		Expect(text).To(MatchRegexp(`dra_resource_claims_in_use\{driver_name="<any>"\} [1-9]`))
		Expect(text).To(MatchRegexp(`dra_grpc_operations_duration_seconds_count\{driver_name="` + regexp.QuoteMeta(draDriverName) +
			`",grpc_status_code="OK",method_name="/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"\} 1\n`))
		Expect(text).To(MatchRegexp(`dra_operations_duration_seconds_count\{is_error="false",operation_name="PrepareResources"\} [1-9]`))

		By("killing and restarting nodelet: the pod keeps its container, nothing is prepared again")
		Expect(env.Nodelet.Kill()).To(Succeed())
		Expect(env.Nodelet.Restart(ctx)).To(Succeed())
		Eventually(func() int {
			ok, _ := driver.Registrations()
			return len(slices.DeleteFunc(ok, func(b bool) bool { return !b }))
		}).WithContext(ctx).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(BeNumerically(">=", 2), "registered again")
		Consistently(func(g Gomega) {
			p := utils.GetPod(ctx, env.Admin, ns, pod.Name)(g)
			g.Expect(p.Status.ContainerStatuses[0].ContainerID).To(Equal(running.Status.ContainerStatuses[0].ContainerID))
		}).WithContext(ctx).WithTimeout(3 * time.Second).WithPolling(pollInterval).Should(Succeed())
		Expect(driver.Prepared()).To(HaveLen(1), "a restart prepares nothing again")

		By("deleting the pod: the driver unprepares the claim")
		Expect(env.Admin.Delete(ctx, running)).To(Succeed())
		Eventually(func(g Gomega) {
			err := env.Admin.Get(ctx, client.ObjectKeyFromObject(running), &corev1.Pod{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "pod gone: %v", err)
		}).WithContext(ctx).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(Succeed())
		Expect(driver.Unprepared()).To(Equal([]string{string(claim.UID)}), "unprepared before the pod was gone")

		By("deleting the node's ResourceSlices of a driver gone from it, after a while")
		slice := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: draNode + "-" + draDriverName},
			Spec: resourceapi.ResourceSliceSpec{
				Driver: draDriverName, NodeName: ptr.To(draNode),
				Pool:    resourceapi.ResourcePool{Name: draNode, ResourceSliceCount: 1},
				Devices: []resourceapi.Device{{Name: "dev-0"}},
			},
		}
		Expect(env.Admin.Create(ctx, slice)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(env.Admin.Delete(ctx, slice))).To(Succeed()) })
		driver.Stop()
		Consistently(func() error {
			return env.Admin.Get(ctx, client.ObjectKeyFromObject(slice), &resourceapi.ResourceSlice{})
		}).WithContext(ctx).WithTimeout(10*time.Second).WithPolling(pollInterval).Should(Succeed(), "kept while the driver may come back")
		Eventually(func() bool {
			return apierrors.IsNotFound(env.Admin.Get(ctx, client.ObjectKeyFromObject(slice), &resourceapi.ResourceSlice{}))
		}).WithContext(ctx).WithTimeout(sliceWipeTimeout).WithPolling(pollInterval).Should(BeTrue())
	})
})

package deviceplugin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gcustom"
	"github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/uuid"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	podresourcesv1alpha1 "k8s.io/kubelet/pkg/apis/podresources/v1alpha1"
	"k8s.io/utils/ptr"
)

// The node suite's "Device Plugin" specs (test/e2e_node/device_plugin_test.go)
// with the sample device plugin: the same names, steps and assertions.
var _ = Describe("[sig-node] Device Plugin [Serial] [Feature:DevicePlugin]", func() {
	f := newFramework("device-plugin-errors")
	testDevicePlugin(f)
})

const (
	// sleepIntervalForever keeps a container running for the whole spec.
	sleepIntervalForever = "24h"
	// sleepIntervalWithRestart makes a container restart within the spec.
	sleepIntervalWithRestart = "60s"
	// sleepIntervalToCompletion makes a container complete within the spec.
	sleepIntervalToCompletion = "5s"

	// testFinalizer keeps a completed pod in the API.
	testFinalizer = "example.com/test-finalizer"

	// devicePluginGracefulTimeout is how long the kubelet keeps a stopped
	// plugin's devices (endpointStopGracePeriod).
	devicePluginGracefulTimeout = 5 * time.Minute

	// devicePluginContainerDir is the device plugins directory in the
	// sample device plugin's container: the plugin registers at
	// kubelet.sock there, a path compiled into it.
	devicePluginContainerDir = "/var/lib/kubelet/device-plugins/"
)

var containerRestartPolicyAlways = corev1.ContainerRestartPolicyAlways

// resourceValue is a resource's capacity and allocatable on the node, -1
// where it is missing.
type resourceValue struct {
	Allocatable int
	Capacity    int
}

func getNodeResourceValues(ctx context.Context, resourceName string) resourceValue {
	GinkgoHelper()
	node := getLocalNode(ctx)
	result := resourceValue{Allocatable: -1, Capacity: -1}
	if val, ok := node.Status.Capacity[corev1.ResourceName(resourceName)]; ok {
		result.Capacity = int(val.Value())
	}
	if val, ok := node.Status.Allocatable[corev1.ResourceName(resourceName)]; ok {
		result.Allocatable = int(val.Value())
	}
	return result
}

// waitForSampleDevices waits for the node to be ready with all the sample
// devices in its capacity and allocatable.
func waitForSampleDevices(ctx context.Context, timeout time.Duration, because string) {
	GinkgoHelper()
	Eventually(ctx, func(ctx context.Context) bool {
		node, ready := getLocalTestNode(ctx)
		return ready &&
			countSampleDeviceCapacity(node) == sampleDevsAmount &&
			countSampleDeviceAllocatable(node) == sampleDevsAmount
	}, timeout, poll).Should(BeTrueBecause("%s", because))
}

// devIDRE finds the device a busybox pod of makeBusyboxPod printed.
const deviceIDRE = "stub devices: (Dev-[0-9]+)"

func testDevicePlugin(f *framework) {
	Context("DevicePlugin [Serial] [Disruptive]", func() {
		var devicePluginPod, dptemplate *corev1.Pod
		var v1alphaPodResources *podresourcesv1alpha1.ListPodResourcesResponse
		var v1PodResources *podresourcesv1.ListPodResourcesResponse
		var err error

		BeforeEach(func(ctx context.Context) {
			devicePluginPod = nil
			By("Wait for node to be ready")
			Eventually(ctx, func(ctx context.Context) bool {
				nodes, err := totalReady(ctx)
				Expect(err).NotTo(HaveOccurred())
				return nodes == 1
			}, time.Minute, time.Second).Should(BeTrueBecause("expected node to be ready"))

			// No pod of an earlier spec may hold devices.
			Eventually(ctx, func(ctx context.Context) error {
				v1alphaPodResources, err = getV1alpha1NodeDevices(ctx)
				if v1alpha1Waived(err) {
					v1alphaPodResources, err = &podresourcesv1alpha1.ListPodResourcesResponse{}, nil
				}
				if err != nil {
					return stopIfUnimplemented(fmt.Errorf("failed to get node local podresources by accessing the (v1alpha) podresources API endpoint: %w", err))
				}
				v1PodResources, err = getV1NodeDevices(ctx)
				if err != nil {
					return stopIfUnimplemented(fmt.Errorf("failed to get node local podresources by accessing the (v1) podresources API endpoint: %w", err))
				}
				if len(v1alphaPodResources.PodResources) > 0 {
					return fmt.Errorf("expected v1alpha pod resources to be empty, but got non-empty resources: %+v", v1alphaPodResources.PodResources)
				}
				if len(v1PodResources.PodResources) > 0 {
					return fmt.Errorf("expected v1 pod resources to be empty, but got non-empty resources: %+v", v1PodResources.PodResources)
				}
				return nil
			}, podDeleteTimeout, poll).Should(Succeed())

			By("Scheduling a sample device plugin pod")
			dp := getSampleDevicePluginPod()
			dptemplate = dp.DeepCopy()
			devicePluginPod = f.createSync(ctx, dp)

			By("Waiting for devices to become available on the local node")
			Eventually(ctx, func(ctx context.Context) bool {
				node, ready := getLocalTestNode(ctx)
				return ready && countSampleDeviceCapacity(node) > 0
			}, 5*time.Minute, poll).Should(BeTrueBecause("expected devices to be available on local node"))
			GinkgoWriter.Println("Successfully created device plugin pod")

			By(fmt.Sprintf("Waiting for the resource exported by the sample device plugin to become available on the local node (instances: %d)", sampleDevsAmount))
			waitForSampleDevices(ctx, 30*time.Second, "expected resource to be available on local node")
		})

		AfterEach(func(ctx context.Context) {
			if devicePluginPod != nil {
				By("Get and print devicePluginPod logs")
				logs, err := podLogs(ctx, devicePluginPod.Namespace, devicePluginPod.Name, devicePluginPod.Spec.Containers[0].Name)
				if err != nil {
					GinkgoWriter.Printf("failed to get pod logs %v\n", err)
				} else {
					GinkgoWriter.Printf("logs of %s/%s: %s\n", devicePluginPod.Name, devicePluginPod.Spec.Containers[0].Name, logs)
				}
				By("Deleting the device plugin pod")
				f.deleteSync(ctx, devicePluginPod.Name, metav1.DeleteOptions{}, podDeleteTimeout)
			}

			By("Deleting any Pods created by the test")
			for _, p := range f.listPods(ctx) {
				GinkgoWriter.Printf("Deleting pod: %s\n", p.Name)
				f.removeFinalizer(ctx, p.Name, testFinalizer)
				f.deleteSync(ctx, p.Name, metav1.DeleteOptions{}, podDeleteTimeout)
			}

			restartKubelet(ctx)

			By("Waiting for devices to become unavailable on the local node")
			Eventually(ctx, func(ctx context.Context) bool {
				node, ready := getLocalTestNode(ctx)
				return ready && countSampleDeviceCapacity(node) <= 0
			}, 5*time.Minute, poll).Should(BeTrueBecause("expected devices to be unavailable on local node"))

			By("devices now unavailable on the local node")
		})

		It("Can schedule a pod that requires a device", func(ctx context.Context) {
			podRECMD := fmt.Sprintf("devs=$(ls /tmp/ | egrep '^Dev-[0-9]+$') && echo stub devices: $devs && sleep %s", sleepIntervalWithRestart)
			pod1 := f.createSync(ctx, makeBusyboxPod(sampleDeviceResourceName, podRECMD))
			devID1, err := parseLog(ctx, f, pod1.Name, pod1.Name, deviceIDRE)
			Expect(err).NotTo(HaveOccurred(), "getting logs for pod %q", pod1.Name)
			Expect(devID1).NotTo(Equal(""), "pod1 requested a device but started successfully without")

			v1alphaPodResources, err = getV1alpha1NodeDevices(ctx)
			waived := v1alpha1Waived(err)
			// The v1alpha1 checks, unless waived.
			unlessWaived := func(check func()) {
				if !waived {
					check()
				}
			}
			unlessWaived(func() { Expect(err).NotTo(HaveOccurred()) })
			v1PodResources, err = getV1NodeDevices(ctx)
			Expect(err).NotTo(HaveOccurred())
			GinkgoWriter.Printf("v1alphaPodResources.PodResources:%+v\n", v1alphaPodResources.GetPodResources())
			GinkgoWriter.Printf("v1PodResources.PodResources:%+v\n", v1PodResources.PodResources)

			// The device plugin's pod and pod1.
			unlessWaived(func() { Expect(v1alphaPodResources.PodResources).To(HaveLen(2)) })
			Expect(v1PodResources.PodResources).To(HaveLen(2))

			var v1alphaResourcesForOurPod *podresourcesv1alpha1.PodResources
			for _, res := range v1alphaPodResources.GetPodResources() {
				if res.Name == pod1.Name {
					v1alphaResourcesForOurPod = res
				}
			}
			var v1ResourcesForOurPod *podresourcesv1.PodResources
			for _, res := range v1PodResources.GetPodResources() {
				if res.Name == pod1.Name {
					v1ResourcesForOurPod = res
				}
			}
			unlessWaived(func() { Expect(v1alphaResourcesForOurPod).NotTo(BeNil()) })
			Expect(v1ResourcesForOurPod).NotTo(BeNil())

			unlessWaived(func() { Expect(v1alphaResourcesForOurPod.Name).To(Equal(pod1.Name)) })
			Expect(v1ResourcesForOurPod.Name).To(Equal(pod1.Name))
			unlessWaived(func() { Expect(v1alphaResourcesForOurPod.Namespace).To(Equal(pod1.Namespace)) })
			Expect(v1ResourcesForOurPod.Namespace).To(Equal(pod1.Namespace))

			unlessWaived(func() { Expect(v1alphaResourcesForOurPod.Containers).To(HaveLen(1)) })
			Expect(v1ResourcesForOurPod.Containers).To(HaveLen(1))
			unlessWaived(func() { Expect(v1alphaResourcesForOurPod.Containers[0].Name).To(Equal(pod1.Spec.Containers[0].Name)) })
			Expect(v1ResourcesForOurPod.Containers[0].Name).To(Equal(pod1.Spec.Containers[0].Name))

			unlessWaived(func() { Expect(v1alphaResourcesForOurPod.Containers[0].Devices).To(HaveLen(1)) })
			Expect(v1ResourcesForOurPod.Containers[0].Devices).To(HaveLen(1))
			unlessWaived(func() {
				Expect(v1alphaResourcesForOurPod.Containers[0].Devices[0].ResourceName).To(Equal(sampleDeviceResourceName))
			})
			Expect(v1ResourcesForOurPod.Containers[0].Devices[0].ResourceName).To(Equal(sampleDeviceResourceName))
			unlessWaived(func() { Expect(v1alphaResourcesForOurPod.Containers[0].Devices[0].DeviceIds).To(HaveLen(1)) })
			Expect(v1ResourcesForOurPod.Containers[0].Devices[0].DeviceIds).To(HaveLen(1))
		})

		It("can make a CDI device accessible in a container", func(ctx context.Context) {
			// One of the plugin's CDI devices, and its device node, is in the
			// container.
			podObj := makeBusyboxPod(sampleDeviceResourceName, "[ $(ls /tmp/CDI-Dev-[1,2] | wc -l) -eq 1 -a -b /tmp/$CDI_DEVICE ]")
			podObj.Spec.RestartPolicy = corev1.RestartPolicyNever
			pod := f.create(ctx, podObj)
			Expect(waitForPodSuccess(ctx, pod.Namespace, pod.Name)).To(Succeed())
		})

		// The container restarts (its command ends) while the agent and the
		// plugin stay: its device stays the same.
		It("Keeps device plugin assignments across pod restarts (no kubelet restart, no device plugin restart)", func(ctx context.Context) {
			podRECMD := fmt.Sprintf("devs=$(ls /tmp/ | egrep '^Dev-[0-9]+$') && echo stub devices: $devs && sleep %s", sleepIntervalWithRestart)
			pod1 := f.createSync(ctx, makeBusyboxPod(sampleDeviceResourceName, podRECMD))
			devID1, err := parseLog(ctx, f, pod1.Name, pod1.Name, deviceIDRE)
			Expect(err).NotTo(HaveOccurred(), "getting logs for pod %q", pod1.Name)
			Expect(devID1).NotTo(Equal(""), "pod1 requested a device but started successfully without")

			pod1, err = f.get(ctx, pod1.Name)
			Expect(err).NotTo(HaveOccurred())

			By("Waiting for container to restart")
			ensurePodContainerRestart(ctx, f, pod1.Name)

			By("Confirming that after a container restart, fake-device assignment is kept")
			devIDRestart1, err := parseLog(ctx, f, pod1.Name, pod1.Name, deviceIDRE)
			Expect(err).NotTo(HaveOccurred(), "getting logs for pod %q", pod1.Name)
			Expect(devIDRestart1).To(Equal(devID1))

			By("Verifying the device assignment after container restart using podresources API")
			v1PodResources, err = getV1NodeDevices(ctx)
			Expect(err).NotTo(HaveOccurred(), "getting pod resources assignment after pod restart")
			_, err = checkPodResourcesAssignment(v1PodResources, pod1.Namespace, pod1.Name, pod1.Spec.Containers[0].Name, sampleDeviceResourceName, []string{devID1})
			Expect(err).NotTo(HaveOccurred(), "inconsistent device assignment after pod restart")

			By("Creating another pod")
			pod2 := f.createSync(ctx, makeBusyboxPod(sampleDeviceResourceName, podRECMD))
			Expect(waitForPodRunning(ctx, f.Namespace.Name, pod2.Name, time.Minute)).To(Succeed())

			By("Checking that pod got a fake device")
			devID2, err := parseLog(ctx, f, pod2.Name, pod2.Name, deviceIDRE)
			Expect(err).NotTo(HaveOccurred(), "getting logs for pod %q", pod2.Name)
			Expect(devID2).NotTo(Equal(""), "pod2 requested a device but started successfully without")

			By("Verifying the device assignment after extra container start using podresources API")
			v1PodResources, err = getV1NodeDevices(ctx)
			Expect(err).NotTo(HaveOccurred(), "getting pod resources assignment after pod restart")
			_, err = checkPodResourcesAssignment(v1PodResources, pod1.Namespace, pod1.Name, pod1.Spec.Containers[0].Name, sampleDeviceResourceName, []string{devID1})
			Expect(err).NotTo(HaveOccurred(), "inconsistent device assignment after extra container restart - pod1")
			_, err = checkPodResourcesAssignment(v1PodResources, pod2.Namespace, pod2.Name, pod2.Spec.Containers[0].Name, sampleDeviceResourceName, []string{devID2})
			Expect(err).NotTo(HaveOccurred(), "inconsistent device assignment after extra container restart - pod2")
		})

		// The agent restarts; the plugin re-registers and the pod keeps
		// running: the agent keeps the pod's device.
		It("Keeps device plugin assignments across kubelet restarts (no pod restart, no device plugin restart)", func(ctx context.Context) {
			podRECMD := fmt.Sprintf("devs=$(ls /tmp/ | egrep '^Dev-[0-9]+$') && echo stub devices: $devs && sleep %s", sleepIntervalForever)
			pod1 := f.createSync(ctx, makeBusyboxPod(sampleDeviceResourceName, podRECMD))
			devID1, err := parseLog(ctx, f, pod1.Name, pod1.Name, deviceIDRE)
			Expect(err).NotTo(HaveOccurred(), "getting logs for pod %q", pod1.Name)
			Expect(devID1).NotTo(Equal(""), "pod1 requested a device but started successfully without")

			pod1, err = f.get(ctx, pod1.Name)
			Expect(err).NotTo(HaveOccurred())
			GinkgoWriter.Printf("testing pod: pre-restart  UID=%s namespace=%s name=%s ready=%v\n", pod1.UID, pod1.Namespace, pod1.Name, podReady(pod1))

			By("Restarting Kubelet")
			restartKubelet(ctx)

			By("Wait for node to be ready again")
			Expect(waitForAllNodesSchedulable(ctx, 5*time.Minute)).To(Succeed())

			By("Waiting for resource to become available on the local node after restart")
			waitForSampleDevices(ctx, 30*time.Second, "expected resource to be available after restart")

			By("Checking the same instance of the pod is still running")
			Eventually(ctx, f.get).
				WithArguments(pod1.Name).
				WithTimeout(time.Minute).
				Should(BeTheSamePodStillRunning(pod1),
					"the same pod instance not running across kubelet restarts, workload should not be perturbed by kubelet restarts")

			pod2, err := f.get(ctx, pod1.Name)
			Expect(err).NotTo(HaveOccurred())
			GinkgoWriter.Printf("testing pod: post-restart UID=%s namespace=%s name=%s ready=%v\n", pod2.UID, pod2.Namespace, pod2.Name, podReady(pod2))

			By("Verifying the device assignment after kubelet restart using podresources API")
			Eventually(ctx, func() error {
				v1PodResources, err = getV1NodeDevices(ctx)
				return err
			}, 30*time.Second, poll).ShouldNot(HaveOccurred(), "cannot fetch the compute resource assignment after kubelet restart")

			_, err = checkPodResourcesAssignment(v1PodResources, pod2.Namespace, pod2.Name, pod2.Spec.Containers[0].Name, sampleDeviceResourceName, []string{devID1})
			Expect(err).NotTo(HaveOccurred(), "inconsistent device assignment after pod restart")
		})

		// The container restarts, then the agent: the device stays.
		It("Keeps device plugin assignments across pod and kubelet restarts (no device plugin restart)", func(ctx context.Context) {
			podRECMD := fmt.Sprintf("devs=$(ls /tmp/ | egrep '^Dev-[0-9]+$') && echo stub devices: $devs && sleep %s", sleepIntervalWithRestart)
			pod1 := f.createSync(ctx, makeBusyboxPod(sampleDeviceResourceName, podRECMD))
			devID1, err := parseLog(ctx, f, pod1.Name, pod1.Name, deviceIDRE)
			Expect(err).NotTo(HaveOccurred(), "getting logs for pod %q", pod1.Name)
			Expect(devID1).NotTo(Equal(""), "pod1 requested a device but started successfully without")

			pod1, err = f.get(ctx, pod1.Name)
			Expect(err).NotTo(HaveOccurred())

			By("Wait for node to be ready again")
			Expect(waitForAllNodesSchedulable(ctx, 5*time.Minute)).To(Succeed())

			By("Waiting for container to restart")
			ensurePodContainerRestart(ctx, f, pod1.Name)

			By("Confirming that after a container restart, fake-device assignment is kept")
			devIDRestart1, err := parseLog(ctx, f, pod1.Name, pod1.Name, deviceIDRE)
			Expect(err).NotTo(HaveOccurred(), "getting logs for pod %q", pod1.Name)
			Expect(devIDRestart1).To(Equal(devID1))

			By("Restarting Kubelet")
			restartKubelet(ctx)

			By("Wait for node to be ready again")
			Expect(waitForAllNodesSchedulable(ctx, 5*time.Minute)).To(Succeed())

			By("Checking an instance of the pod is running")
			Eventually(ctx, f.get).
				WithArguments(pod1.Name).
				// The restart back-off is capped at five minutes.
				WithTimeout(5*time.Minute+10*time.Second).
				Should(And(BeAPodInPhase(corev1.PodRunning), BeAPodReady()),
					"the pod should still be running, the workload should not be perturbed by kubelet restarts")

			By("Verifying the device assignment after pod and kubelet restart using container logs")
			var devID1Restarted string
			Eventually(ctx, func() string {
				devID1Restarted, err = parseLog(ctx, f, pod1.Name, pod1.Name, deviceIDRE)
				if err != nil {
					GinkgoWriter.Printf("error getting logs for pod %q: %v\n", pod1.Name, err)
					return ""
				}
				return devID1Restarted
			}, 30*time.Second, poll).Should(Equal(devID1), "pod %s reports a different device after restarts: %s (expected %s)", pod1.Name, devID1Restarted, devID1)

			By("Verifying the device assignment after pod and kubelet restart using podresources API")
			Eventually(ctx, func() error {
				v1PodResources, err = getV1NodeDevices(ctx)
				return err
			}, 30*time.Second, poll).ShouldNot(HaveOccurred(), "cannot fetch the compute resource assignment after kubelet restart")

			_, err = checkPodResourcesAssignment(v1PodResources, pod1.Namespace, pod1.Name, pod1.Spec.Containers[0].Name, sampleDeviceResourceName, []string{devID1})
			Expect(err).NotTo(HaveOccurred(), "inconsistent device assignment after pod restart")
		})

		// A pod that completed before the agent restarted without its
		// plugin is not admitted again (which would fail it).
		It("will not attempt to admit the succeeded pod after the kubelet restart and device plugin removed", func(ctx context.Context) {
			podRECMD := fmt.Sprintf("devs=$(ls /tmp/ | egrep '^Dev-[0-9]+$') && echo stub devices: $devs && sleep %s", sleepIntervalToCompletion)
			podSpec := makeBusyboxPod(sampleDeviceResourceName, podRECMD)
			podSpec.Spec.RestartPolicy = corev1.RestartPolicyNever
			// The finalizer keeps the completed pod through the restart.
			podSpec.Finalizers = []string{testFinalizer}
			pod := f.createSync(ctx, podSpec)

			devID1, err := parseLog(ctx, f, pod.Name, pod.Name, deviceIDRE)
			Expect(err).NotTo(HaveOccurred(), "getting logs for pod %q", pod.Name)
			Expect(devID1).NotTo(Equal(""), "pod requested a device but started successfully without")

			pod, err = f.get(ctx, pod.Name)
			Expect(err).NotTo(HaveOccurred())

			By("Wait for node to be ready")
			Expect(waitForAllNodesSchedulable(ctx, 5*time.Minute)).To(Succeed())

			By("Waiting for pod to succeed")
			Expect(waitForPodSuccess(ctx, pod.Namespace, pod.Name)).To(Succeed())

			By("Deleting the device plugin")
			f.deleteSync(ctx, devicePluginPod.Name, metav1.DeleteOptions{}, podDeleteTimeout)
			waitForContainerRemoval(ctx, devicePluginPod.Spec.Containers[0].Name, devicePluginPod.Name, devicePluginPod.Namespace)

			Eventually(getNodeResourceValues, devicePluginGracefulTimeout, poll).WithContext(ctx).WithArguments(sampleDeviceResourceName).
				Should(Equal(resourceValue{Allocatable: 0, Capacity: int(sampleDevsAmount)}))

			By("Restarting Kubelet")
			restartKubelet(ctx)

			By("Wait for node to be ready again")
			Expect(waitForAllNodesSchedulable(ctx, 5*time.Minute)).To(Succeed())

			By("Pod should still be in Succeed state")
			// Admitting it again would fail it; nothing else tells.
			Consistently(func() corev1.PodPhase {
				pod, err = f.get(ctx, pod.Name)
				Expect(err).NotTo(HaveOccurred())
				return pod.Status.Phase
			}, time.Minute, poll).Should(Equal(corev1.PodSucceeded))

			By("Removing the finalizer from the pod so it can be deleted now")
			f.removeFinalizer(ctx, podSpec.Name, testFinalizer)
		})

		// The plugin's pod is deleted and created again: the running pod's
		// device stays assigned.
		It("Keeps device plugin assignments after the device plugin has restarted (no kubelet restart, pod restart)", func(ctx context.Context) {
			podRECMD := fmt.Sprintf("devs=$(ls /tmp/ | egrep '^Dev-[0-9]+$') && echo stub devices: $devs && sleep %s", sleepIntervalForever)
			pod1 := f.createSync(ctx, makeBusyboxPod(sampleDeviceResourceName, podRECMD))
			devID1, err := parseLog(ctx, f, pod1.Name, pod1.Name, deviceIDRE)
			Expect(err).NotTo(HaveOccurred(), "getting logs for pod %q", pod1.Name)
			Expect(devID1).NotTo(Equal(""), "pod1 requested a device but started successfully without")

			pod1, err = f.get(ctx, pod1.Name)
			Expect(err).NotTo(HaveOccurred())

			By("Wait for node to be ready again")
			Expect(waitForAllNodesSchedulable(ctx, 5*time.Minute)).To(Succeed())

			By("Re-Register resources and delete the plugin pod")
			f.deleteSync(ctx, devicePluginPod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, podDeleteTimeout)
			waitForContainerRemoval(ctx, devicePluginPod.Spec.Containers[0].Name, devicePluginPod.Name, devicePluginPod.Namespace)

			By("Recreating the plugin pod")
			devicePluginPod = f.createSync(ctx, dptemplate)
			Expect(waitForPodRunning(ctx, devicePluginPod.Namespace, devicePluginPod.Name, time.Minute)).To(Succeed())

			By("Waiting for resource to become available on the local node after re-registration")
			waitForSampleDevices(ctx, 30*time.Second, "expected resource to be available after re-registration")

			By("Verifying the device assignment after device plugin restart using podresources API")
			Eventually(ctx, func() error {
				v1PodResources, err = getV1NodeDevices(ctx)
				return err
			}, 30*time.Second, poll).ShouldNot(HaveOccurred(), "cannot fetch the compute resource assignment after kubelet restart")

			_, err = checkPodResourcesAssignment(v1PodResources, pod1.Namespace, pod1.Name, pod1.Spec.Containers[0].Name, sampleDeviceResourceName, []string{devID1})
			Expect(err).NotTo(HaveOccurred(), "inconsistent device assignment after pod restart")
		})

		// The agent restarts, then the plugin; the pod keeps running with
		// its device.
		It("Keeps device plugin assignments after kubelet restart and device plugin restart (no pod restart)", func(ctx context.Context) {
			podRECMD := fmt.Sprintf("devs=$(ls /tmp/ | egrep '^Dev-[0-9]+$') && echo stub devices: $devs && sleep %s", sleepIntervalForever)
			pod1 := f.createSync(ctx, makeBusyboxPod(sampleDeviceResourceName, podRECMD))
			devID1, err := parseLog(ctx, f, pod1.Name, pod1.Name, deviceIDRE)
			Expect(err).NotTo(HaveOccurred(), "getting logs for pod %q", pod1.Name)
			Expect(devID1).NotTo(BeEmpty(), "pod1 requested a device but started successfully without")

			pod1, err = f.get(ctx, pod1.Name)
			Expect(err).NotTo(HaveOccurred())

			By("Restarting Kubelet")
			restartKubelet(ctx)

			By("Wait for node to be ready again")
			Expect(waitForAllNodesSchedulable(ctx, 5*time.Minute)).To(Succeed())

			By("Checking the same instance of the pod is still running after kubelet restart")
			Eventually(ctx, f.get).
				WithArguments(pod1.Name).
				WithTimeout(time.Minute).
				Should(BeTheSamePodStillRunning(pod1),
					"the same pod instance not running across kubelet restarts, workload should not be perturbed by kubelet restarts")

			By("Verifying the device assignment after kubelet restart using podresources API")
			Eventually(ctx, func() error {
				v1PodResources, err = getV1NodeDevices(ctx)
				return err
			}, 30*time.Second, poll).ShouldNot(HaveOccurred(), "cannot fetch the compute resource assignment after kubelet restart")

			_, err = checkPodResourcesAssignment(v1PodResources, pod1.Namespace, pod1.Name, pod1.Spec.Containers[0].Name, sampleDeviceResourceName, []string{devID1})
			Expect(err).NotTo(HaveOccurred(), "inconsistent device assignment after pod restart")

			By("Re-Register resources by deleting the plugin pod")
			f.deleteSync(ctx, devicePluginPod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, podDeleteTimeout)
			waitForContainerRemoval(ctx, devicePluginPod.Spec.Containers[0].Name, devicePluginPod.Name, devicePluginPod.Namespace)

			By("Recreating the plugin pod")
			devicePluginPod = f.createSync(ctx, dptemplate)

			By("Waiting for resource to become available on the local node after restart")
			waitForSampleDevices(ctx, 30*time.Second, "expected resource to be available after restart")

			By("Checking the same instance of the pod is still running after the device plugin restart")
			Eventually(ctx, f.get).
				WithArguments(pod1.Name).
				WithTimeout(time.Minute).
				Should(BeTheSamePodStillRunning(pod1),
					"the same pod instance not running across kubelet restarts, workload should not be perturbed by device plugins restarts")
		})

		// A pod deleted while the agent is down is cleaned up when it comes
		// back, and its device is no longer assigned.
		It("[OrphanedPods] Ensures pods consuming devices deleted while kubelet is down are cleaned up correctly", func(ctx context.Context) {
			podRECMD := fmt.Sprintf("devs=$(ls /tmp/ | egrep '^Dev-[0-9]+$') && echo stub devices: $devs && sleep %s", sleepIntervalWithRestart)
			pod := f.createSync(ctx, makeBusyboxPod(sampleDeviceResourceName, podRECMD))

			devID, err := parseLog(ctx, f, pod.Name, pod.Name, deviceIDRE)
			Expect(err).NotTo(HaveOccurred(), "getting logs for pod %q", pod.Name)
			Expect(devID).NotTo(BeEmpty(), "pod1 requested a device but started successfully without")

			pod, err = f.get(ctx, pod.Name)
			Expect(err).NotTo(HaveOccurred())

			By("stopping the kubelet")
			startKubelet := mustStopKubelet(ctx)

			// mustStopKubelet waited for the health check to fail.
			Eventually(ctx, func() bool {
				ok := healthCheck(env.AgentHealthz)
				GinkgoWriter.Printf("kubelet health check at %q value=%v\n", env.AgentHealthz, ok)
				return ok
			}, podStartTimeout, poll).Should(BeFalseBecause("expected kubelet health check to be failed"))

			GinkgoWriter.Println("Delete the pod while the kubelet is not running")
			// Grace period 0: the pod is gone from the API at once.
			f.deletePodSyncByName(ctx, pod.Name)

			GinkgoWriter.Println("Starting the kubelet")
			startKubelet(ctx)

			GinkgoWriter.Printf("wait for the pod %v to disappear\n", pod.Name)
			Eventually(ctx, func(ctx context.Context) error {
				err := checkMirrorPodDisappear(ctx, pod.Name, pod.Namespace)
				GinkgoWriter.Printf("pod %s/%s disappear check err=%v\n", pod.Namespace, pod.Name, err)
				return err
			}, podDeleteTimeout, poll).Should(Succeed())

			waitForAllContainerRemoval(ctx, pod.Name, pod.Namespace)

			By("Verifying the device assignment after device plugin restart using podresources API")
			Eventually(ctx, func() error {
				v1PodResources, err = getV1NodeDevices(ctx)
				return err
			}, 30*time.Second, poll).ShouldNot(HaveOccurred(), "cannot fetch the compute resource assignment after kubelet restart")
			allocated, err := checkPodResourcesAssignment(v1PodResources, pod.Namespace, pod.Name, pod.Spec.Containers[0].Name, sampleDeviceResourceName, []string{})
			if err == nil || allocated {
				Fail(fmt.Sprintf("stale device assignment after pod deletion while kubelet was down allocated=%v error=%v", allocated, err))
			}
		})

		// An init container and a restartable init container share a
		// device; the regular container gets the other one.
		It("Can schedule a pod with a restartable init container [NodeConformance]", func(ctx context.Context) {
			podRECMD := "devs=$(ls /tmp/ | egrep '^Dev-[0-9]+$') && echo stub devices: $devs && sleep %s"
			sleepOneSecond := "1s"
			rl := corev1.ResourceList{corev1.ResourceName(sampleDeviceResourceName): *resource.NewQuantity(1, resource.DecimalSI)}
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "device-plugin-test-" + string(uuid.NewUUID())},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyAlways,
					InitContainers: []corev1.Container{
						{
							Image:     busyboxImage,
							Name:      "init-1",
							Command:   []string{"sh", "-c", fmt.Sprintf(podRECMD, sleepOneSecond)},
							Resources: corev1.ResourceRequirements{Limits: rl, Requests: rl},
						},
						{
							Image:         busyboxImage,
							Name:          "restartable-init-2",
							Command:       []string{"sh", "-c", fmt.Sprintf(podRECMD, sleepIntervalForever)},
							Resources:     corev1.ResourceRequirements{Limits: rl, Requests: rl},
							RestartPolicy: &containerRestartPolicyAlways,
						},
					},
					Containers: []corev1.Container{{
						Image:     busyboxImage,
						Name:      "regular-1",
						Command:   []string{"sh", "-c", fmt.Sprintf(podRECMD, sleepIntervalForever)},
						Resources: corev1.ResourceRequirements{Limits: rl, Requests: rl},
					}},
				},
			}

			pod1 := f.createSync(ctx, pod)

			devID1, err := parseLog(ctx, f, pod1.Name, pod1.Spec.InitContainers[0].Name, deviceIDRE)
			Expect(err).NotTo(HaveOccurred(), "getting logs for pod %q/%q", pod1.Name, pod1.Spec.InitContainers[0].Name)
			Expect(devID1).NotTo(Equal(""), "pod1's init container requested a device but started successfully without")

			devID2, err := parseLog(ctx, f, pod1.Name, pod1.Spec.InitContainers[1].Name, deviceIDRE)
			Expect(err).NotTo(HaveOccurred(), "getting logs for pod %q/%q", pod1.Name, pod1.Spec.InitContainers[1].Name)
			Expect(devID2).NotTo(Equal(""), "pod1's restartable init container requested a device but started successfully without")
			Expect(devID2).To(Equal(devID1), "pod1's init container and restartable init container should share the same device")

			devID3, err := parseLog(ctx, f, pod1.Name, pod1.Spec.Containers[0].Name, deviceIDRE)
			Expect(err).NotTo(HaveOccurred(), "getting logs for pod %q/%q", pod1.Name, pod1.Spec.Containers[0].Name)
			Expect(devID3).NotTo(Equal(""), "pod1's regular container requested a device but started successfully without")
			Expect(devID3).NotTo(Equal(devID2), "pod1's restartable init container and regular container should not share the same device")

			podResources, err := getV1NodeDevices(ctx)
			Expect(err).NotTo(HaveOccurred())
			GinkgoWriter.Printf("PodResources.PodResources:%+v\n", podResources.PodResources)

			Expect(podResources.PodResources).To(HaveLen(2))

			var resourcesForOurPod *podresourcesv1.PodResources
			for _, res := range podResources.GetPodResources() {
				if res.Name == pod1.Name {
					resourcesForOurPod = res
				}
			}
			Expect(resourcesForOurPod).NotTo(BeNil())
			Expect(resourcesForOurPod.Name).To(Equal(pod1.Name))
			Expect(resourcesForOurPod.Namespace).To(Equal(pod1.Namespace))

			// The init container that ran to completion is not reported.
			Expect(resourcesForOurPod.Containers).To(HaveLen(2))
			for _, container := range resourcesForOurPod.Containers {
				switch container.Name {
				case pod1.Spec.InitContainers[1].Name, pod1.Spec.Containers[0].Name:
					Expect(container.Devices).To(HaveLen(1))
					Expect(container.Devices[0].ResourceName).To(Equal(sampleDeviceResourceName))
					Expect(container.Devices[0].DeviceIds).To(HaveLen(1))
				default:
					Fail(fmt.Sprintf("unexpected container name: %s", container.Name))
				}
			}
		})
	})
}

// makeBusyboxPod returns a pod with one busybox container that requests
// one device of resourceName and runs cmd.
func makeBusyboxPod(resourceName, cmd string) *corev1.Pod {
	podName := "device-plugin-test-" + string(uuid.NewUUID())
	rl := corev1.ResourceList{corev1.ResourceName(resourceName): *resource.NewQuantity(1, resource.DecimalSI)}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyAlways,
			Containers: []corev1.Container{{
				Image:     busyboxImage,
				Name:      podName,
				Command:   []string{"sh", "-c", cmd},
				Resources: corev1.ResourceRequirements{Limits: rl, Requests: rl},
			}},
		},
	}
}

// ensurePodContainerRestart waits for the pod's first container to
// restart at least once more.
func ensurePodContainerRestart(ctx context.Context, f *framework, podName string) {
	GinkgoHelper()
	p, err := f.get(ctx, podName)
	if err != nil || len(p.Status.ContainerStatuses) < 1 {
		Fail(fmt.Sprintf("ensurePodContainerRestart failed for pod %q: %v", podName, err))
	}
	initialCount := p.Status.ContainerStatuses[0].RestartCount
	Eventually(ctx, func() int {
		p, err = f.get(ctx, podName)
		if err != nil || len(p.Status.ContainerStatuses) < 1 {
			return 0
		}
		currentCount := p.Status.ContainerStatuses[0].RestartCount
		GinkgoWriter.Printf("initial %v, current %v\n", initialCount, currentCount)
		return int(currentCount)
	}, 5*time.Minute, poll).Should(BeNumerically(">", initialCount))
}

// parseLog returns the first group of re in the container's log.
func parseLog(ctx context.Context, f *framework, podName, contName, re string) (string, error) {
	logs, err := podLogs(ctx, f.Namespace.Name, podName, contName)
	if err != nil {
		return "", err
	}
	GinkgoWriter.Printf("got pod logs: %v\n", logs)
	matches := regexp.MustCompile(re).FindStringSubmatch(logs)
	if len(matches) < 2 {
		return "", fmt.Errorf("unexpected match in logs: %q", logs)
	}
	return matches[1], nil
}

// checkPodResourcesAssignment compares the devices of resourceName the pod
// resources list gives the container with devs. It reports whether the
// container is in the list, and an error when it is not or when the
// devices differ.
func checkPodResourcesAssignment(v1PodRes *podresourcesv1.ListPodResourcesResponse, podNamespace, podName, containerName, resourceName string, devs []string) (bool, error) {
	for _, podRes := range v1PodRes.PodResources {
		if podRes.Namespace != podNamespace || podRes.Name != podName {
			continue
		}
		for _, contRes := range podRes.Containers {
			if contRes.Name != containerName {
				continue
			}
			return true, matchContainerDevices(podNamespace+"/"+podName+"/"+containerName, contRes.Devices, resourceName, devs)
		}
	}
	var listed []string
	for _, p := range v1PodRes.PodResources {
		for _, c := range p.Containers {
			listed = append(listed, fmt.Sprintf("%s/%s/%s", p.Namespace, p.Name, c.Name))
		}
	}
	err := fmt.Errorf("no resources found for %s/%s/%s in listpodresources [%s]", podNamespace, podName, containerName, strings.Join(listed, ","))
	GinkgoWriter.Println(err)
	return false, err
}

func matchContainerDevices(ident string, contDevs []*podresourcesv1.ContainerDevices, resourceName string, devs []string) error {
	expected := sets.New(devs...)
	assigned := sets.New[string]()
	for _, contDev := range contDevs {
		if contDev.ResourceName != resourceName {
			continue
		}
		assigned = assigned.Insert(contDev.DeviceIds...)
	}
	expectedStr := strings.Join(sets.List(expected), ",")
	assignedStr := strings.Join(sets.List(assigned), ",")
	GinkgoWriter.Printf("%s: devices expected %q assigned %q\n", ident, expectedStr, assignedStr)
	if !assigned.Equal(expected) {
		return fmt.Errorf("device allocation mismatch for %s expected %s assigned %s", ident, expectedStr, assignedStr)
	}
	return nil
}

// getSampleDevicePluginPod is the pod of the sample device plugin's
// DaemonSet manifest (sample-device-plugin.yaml of the node suite) with
// CDI on, as the node suite runs it. Its host paths are the node agent's
// and runtime's: the agent's device plugins directory (mounted where the
// plugin looks for the agent's socket), the plugins_registry of its root
// directory, and the runtime's CDI spec directory as /var/run/cdi.
func getSampleDevicePluginPod() *corev1.Pod {
	GinkgoHelper()
	pluginDir := env.DevicePluginDir
	registryDir := filepath.Join(env.RootDir, "plugins_registry")
	for _, d := range []string{pluginDir, registryDir, env.CDISpecDir} {
		Expect(os.MkdirAll(d, 0o755)).To(Succeed())
	}
	hostPath := func(name, path string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "sample-device-plugin",
			Labels: map[string]string{"k8s-app": "sample-device-plugin"},
		},
		Spec: corev1.PodSpec{
			PriorityClassName: "system-node-critical",
			Tolerations: []corev1.Toleration{
				{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
				{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			},
			Volumes: []corev1.Volume{
				hostPath("device-plugin", pluginDir),
				hostPath("plugins-registry-probe-mode", registryDir),
				hostPath("dev", "/dev"),
				hostPath("cdi-dir", env.CDISpecDir),
			},
			Containers: []corev1.Container{{
				Image: sampleDevicePluginImage,
				Name:  "sample-device-plugin",
				Env: []corev1.EnvVar{
					{Name: "PLUGIN_SOCK_DIR", Value: devicePluginContainerDir},
					{Name: "CDI_ENABLED", Value: "1"},
				},
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "device-plugin", MountPath: "/var/lib/kubelet/device-plugins"},
					{Name: "plugins-registry-probe-mode", MountPath: "/var/lib/kubelet/plugins_registry"},
					{Name: "dev", MountPath: "/dev"},
					{Name: "cdi-dir", MountPath: "/var/run/cdi"},
				},
			}},
		},
	}
}

// BeTheSamePodStillRunning matches the same pod (by UID), running and
// ready.
func BeTheSamePodStillRunning(expected *corev1.Pod) types.GomegaMatcher {
	return And(BeTheSamePodAs(expected.UID), BeAPodInPhase(corev1.PodRunning), BeAPodReady())
}

// BeAPodReady matches a ready pod.
func BeAPodReady() types.GomegaMatcher {
	return gcustom.MakeMatcher(func(actual *corev1.Pod) (bool, error) {
		return podReady(actual), nil
	}).WithTemplate("Pod {{.Actual.Namespace}}/{{.Actual.Name}} UID {{.Actual.UID}} not ready yet")
}

// BeAPodInPhase matches a pod in phase.
func BeAPodInPhase(phase corev1.PodPhase) types.GomegaMatcher {
	return gcustom.MakeMatcher(func(actual *corev1.Pod) (bool, error) {
		return actual.Status.Phase == phase, nil
	}).WithTemplate("Pod {{.Actual.Namespace}}/{{.Actual.Name}} failed {{.To}} be in phase {{.Data}} instead is in phase {{.Actual.Status.Phase}}").WithTemplateData(phase)
}

// BeTheSamePodAs matches the pod of that UID.
func BeTheSamePodAs(podUID k8stypes.UID) types.GomegaMatcher {
	return gcustom.MakeMatcher(func(actual *corev1.Pod) (bool, error) {
		return actual.UID == podUID, nil
	}).WithTemplate("Pod {{.Actual.Namespace}}/{{.Actual.Name}} expected UID {{.Data}} has UID instead {{.Actual.UID}}").WithTemplateData(podUID)
}
